"""A chunk's cost against its task's history: what carrying earlier trials over costs.

A model tune gives a task its trials in chunks, and each chunk's strategy is told the task's
earlier chunks first (``Tuner.run(prior_runs=...)``). This times one chunk with more and more
history behind it and prints, per chunk, its seconds, the trials carried over, MetaSchedule's
rounds (with those that offered nothing new, and the random rounds after them) and the
ratio of its seconds to the first chunk's, all measured in this run.

Two ways:

- ``--db DB --task NAME``: on a copy of a database a model tune left (``bench_model.py``'s
  ``records.db``), one new chunk of the task with its first k tune chunks carried over, for each
  k of ``--history`` (e.g. ``1,20,39``). The chunks are independent: each starts from the copy.
- without ``--db``: ``--chunks`` chunks of one catalog workload (``--workload``, default a
  512 matmul), each carrying over all before it, as a model tune's chunks of one task do.

Usage: ``python benchmarks/bench_carry_over.py [--db DB --task NAME --history 1,20,39]
[--chunks 12] [--trials 16] [--strategy evolutionary] [--seed 777]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)

from explorer.measure import LocalMeasurer
from explorer.search import make_strategy
from explorer.storage import environment, get_store
from explorer.target import Target
from explorer.tuner import Tuner
from explorer.workloads import get_workload


def chunk(store, measurer, workload, target, args, prior, seed) -> dict:
    """One chunk of ``args.trials`` on ``workload`` with ``prior`` runs carried over."""
    strategy = make_strategy(args.strategy)
    tuner = Tuner(measurer=measurer, store=store, batch_size=min(args.trials, 8))
    start = time.perf_counter()
    result = tuner.run(
        workload, target, strategy, max_trials=args.trials, seed=seed, prior_runs=prior
    )
    told = sum(1 for r in prior for t in store.trials(run_id=r) if not t.is_remeasure)
    return {
        "run": result.run.id,
        "secs": time.perf_counter() - start,
        "told": told,
        "trials": result.num_trials,
        "rounds": getattr(strategy, "num_rounds_", None),
        "empty": getattr(strategy, "num_empty_rounds_", None),
        "random": getattr(strategy, "num_random_rounds_", None),
        "best_ms": None if result.best_secs is None else result.best_secs * 1e3,
    }


def show(label: str, row: dict, first: float) -> None:
    best = "-" if row["best_ms"] is None else f"{row['best_ms']:.4f}"
    print(
        f"{label:>12} told {row['told']:5d}  {row['secs']:7.1f} s  x{row['secs'] / first:5.2f}"
        f"  trials {row['trials']:3d}  rounds {row['rounds']} empty {row['empty']}"
        f" random {row['random']}  best {best} ms",
        flush=True,
    )


def from_database(args, measurer) -> None:
    with tempfile.TemporaryDirectory() as tmp, get_store(args.db) as tuned:
        model = tuned.models()[0]
        task = next((t for t in model.tasks if t.name == args.task), None)
        if task is None:
            raise SystemExit(f"{args.db} has no task {args.task!r} in model {model.name!r}")
        runs = [r for r, name, _ in tuned.model_runs(model.id) if name == task.name]
        first = None
        for i, k in enumerate(int(x) for x in args.history.split(",")):
            # Each chunk starts from the tune as it was: a copy of its database of its own.
            with get_store(tuned.backup(Path(tmp) / f"records-{i}.db")) as store:
                row = chunk(
                    store, measurer, task.workload, model.target, args, runs[:k], args.seed
                )
            first = first or row["secs"]
            show(f"history {k}", row, first)


def from_scratch(args, measurer) -> None:
    workload, target = get_workload(args.workload), Target.local_cpu()
    with tempfile.TemporaryDirectory() as tmp, get_store(Path(tmp) / "records.db") as store:
        runs: list[int] = []
        first = None
        for i in range(args.chunks):
            row = chunk(store, measurer, workload, target, args, list(runs), args.seed * 1000 + i)
            runs.append(row["run"])
            first = first or row["secs"]
            show(f"chunk {i + 1}", row, first)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path)
    parser.add_argument("--task")
    parser.add_argument("--history", default="1,20,39")
    parser.add_argument("--workload", default="matmul_512")
    parser.add_argument("--chunks", type=int, default=12)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--strategy", default="evolutionary")
    parser.add_argument("--seed", type=int, default=777)
    args = parser.parse_args()
    if args.db is not None and not args.task:
        parser.error("--db needs --task: the model task whose chunks to carry over")
    print(f"machine: {environment()['cpu_model']}", flush=True)
    with LocalMeasurer() as measurer:
        if args.db is not None:
            from_database(args, measurer)
        else:
            from_scratch(args, measurer)


if __name__ == "__main__":
    main()
