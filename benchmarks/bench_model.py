"""Whole networks: our model tune against ONNX Runtime and TVM's own tune_relax (issue 23).

Run: ``python benchmarks/bench_model.py [--networks resnet18,mobilenet_v2,bert_layer]
[--trials 200] [--strategy evolutionary] [--transfer] [--seed 0] [--no-tune-relax]``

For each network (the shipped ONNX builders, real shapes, random weights): import it
(``explorer.model.import_model``), tune it with ``--trials`` trials in all
(``tune_model``: the gradient task scheduler over our strategy), then one race
(``race_model``, in a child process): the network untuned, with our schedules, with TVM's
``tune_relax`` at the same total trials (tuned inside the race, before any timing), and ONNX
Runtime (CPU execution provider, threads = the target's cores), every build's output checked
against ONNX Runtime's, the four timed in interleaved rounds, each read by its fastest call.

Printed per network, from that one race: ours / ONNX Runtime (the issue's goal: <= 1.0),
tune_relax / ours (>= 1.0: ours is faster at equal trials), the speed-up over untuned, the
trials and wall time of our tune. ``--transfer``: every chunk's strategy learns first from the
database's trials of the other tasks (``tune_model(transfer=True)``). ``--cache-flush``: what
leaves the CPU caches before each timed sample (``MeasureConfig.cache_flush``); by default a
task's own protocol, its weights flushed as the network finds them (read once an inference),
``none`` times every kernel warm, ``all`` flushes everything. Results go to ``--out``
(default ``bench_results/model/``): the record database (a second run continues the tunes:
raise ``--trials`` to spend more) and ``summary.json``. Name the machine beside every number
(the first line says which CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
import onnx

from explorer.measure import CacheFlush, LocalMeasurer, MeasureConfig
from explorer.model import (
    NETWORKS,
    ONNXRUNTIME,
    TUNE_RELAX,
    TUNED,
    UNTUNED,
    TaskState,
    import_model,
    race_model,
    task_states,
    tune_model,
    tune_spent,
)
from explorer.storage import environment, get_store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", default="resnet18,mobilenet_v2,bert_layer")
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--strategy", default="evolutionary")
    parser.add_argument("--transfer", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-tune-relax", action="store_true")
    parser.add_argument("--cache-flush", choices=[f.value for f in CacheFlush])
    parser.add_argument("--out", type=Path, default=Path("bench_results/model"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"machine: {environment()['cpu_model']}", flush=True)
    summary = {}
    config = MeasureConfig(cache_flush=args.cache_flush and CacheFlush(args.cache_flush))
    with get_store(args.out / "records.db") as store, LocalMeasurer(config) as measurer:
        for name in args.networks.split(","):
            path = args.out / f"{name}.onnx"
            if not path.exists():
                onnx.save(NETWORKS[name](), path)
            start = time.perf_counter()
            model = import_model(path, store, measurer=measurer)
            imported = time.perf_counter() - start
            tune = tune_model(
                model, store, measurer, max_trials=args.trials, strategy=args.strategy,
                seed=args.seed, transfer=args.transfer,
                on_progress=lambda p, name=name: print(
                    f"  {name} [{p.trials}/{p.max_trials}] {p.task}", flush=True
                ),
            )  # fmt: skip
            tuned_at = time.perf_counter()
            _print_tasks(task_states(model, store, tune))
            # tune_relax gets what ours spent: a tune stops short of --trials when every
            # task's search ran out of new schedules.
            spent = tune_spent(model, store, tune)
            race = race_model(
                model, store, tune=tune, rounds=args.rounds,
                tune_relax_trials=0 if args.no_tune_relax else spent,
            )  # fmt: skip
            raced = time.perf_counter() - tuned_at
            secs = {e.name: e.fastest_secs for e in race.entries if not e.error}
            errors = {e.name: e.error for e in race.entries if e.error}
            row = {
                "tasks": len(model.tasks),
                "trials": race.trials,
                "import_secs": round(imported, 1),
                "tune_secs": round(tuned_at - start - imported, 1),
                "race_secs": round(raced, 1),
                "ms": {k: round(v * 1e3, 4) for k, v in secs.items() if v},
                "errors": errors,
            }
            ours, ort = secs.get(TUNED), secs.get(ONNXRUNTIME)
            relax, untuned = secs.get(TUNE_RELAX), secs.get(UNTUNED)
            if ours and ort:
                row["ours_over_onnxruntime"] = round(ours / ort, 3)
            if ours and relax:
                row["tune_relax_over_ours"] = round(relax / ours, 3)
            if ours and untuned:
                row["speedup_over_untuned"] = round(untuned / ours, 1)
            summary[name] = row
            print(f"{name}: {json.dumps(row)}", flush=True)
    summary["machine"] = environment()["cpu_model"]
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    return 0


def _print_tasks(states: list[TaskState]) -> None:
    """Each task after the tune, costliest per inference first: what still dominates (its
    best time, measured alone and warm, times its calls per inference)."""
    total = sum(s.task.weight * (s.best_secs or 0.0) for s in states) or 1.0
    for s in sorted(states, key=lambda s: -s.task.weight * (s.best_secs or 0.0)):
        ms = s.task.weight * (s.best_secs or 0.0) * 1e3
        gflops = s.task.flops / s.best_secs / 1e9 if s.best_secs else 0.0
        print(
            f"    {s.task.name:32s} x{s.task.weight} {s.trials:4d} trials {ms:7.3f} ms "
            f"{ms / total / 10:5.1f} % {gflops:6.1f} GFLOPS",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
