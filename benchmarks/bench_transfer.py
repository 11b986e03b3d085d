"""Transfer learning, held out: pre-train on the catalog's presets but five, then tune those
five with and without transfer, against TVM's own ``tune_tir`` (with our fast builder).

The protocol: ``explorer.pretrain`` measures random schedules of every preset except the held-out
ones (ResNet-18 layers C4, C7 and C9, a batch matmul, a dense layer) into
``bench_results/transfer_pretrain.db``; that database is kept between invocations, so a second
invocation pre-trains further (``--pretrain-minutes 0``: use it as it is). Each held-out workload
is then tuned in its own copy of it, so what one held-out workload's runs measure never reaches
another's: our model-guided strategies at 32 and 64 trials with ``transfer_from="auto"`` and
without it (so what transfer itself buys is read at equal budgets), ``tune_tir_fast`` at 64 and
128. Every row's best few schedules are re-timed at the end in interleaved rounds with one
timer (``_retime``), and every ratio printed is between numbers of this run, on this machine
(its CPU is printed first).

The goals (issue "small budgets that win"): with transfer, our best strategy at 32 trials at
least ``tune_tir_fast`` at 128 (median of the seeds, per workload); every model-guided strategy
at 64 trials at least ``tune_tir_fast`` at 64, with and without transfer.

    python benchmarks/bench_transfer.py --quick  # 2 workloads, 1 seed, evolutionary (~45 min)
    python benchmarks/bench_transfer.py          # 5 workloads, 5 seeds, 4 strategies (a day)

Output: the table and the goals on stdout, ``bench_results/transfer.csv``.
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _retime import TIMED, retime, searched_trials, top_candidates

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.pretrain import coverage, pretrain, pretrain_presets
from explorer.search import make_strategy
from explorer.search._metaschedule import run_metaschedule
from explorer.storage import SQLiteStore, get_store
from explorer.storage._environment import cpu_model
from explorer.target import Target
from explorer.tuner import Tuner
from explorer.workloads import get_workload

OUT = Path("bench_results")
HELD_OUT = ("resnet18_c4", "resnet18_c7", "resnet18_c9", "batch_matmul_8x128", "dense_bert_ffn")
MODEL_GUIDED = ("evolutionary", "evolutionary+droplet", "autotvm", "value")
BATCH = 8
MEASURE = MeasureConfig(repeat=5, min_repeat_secs=0.02)  # as bench_search


@dataclass(frozen=True)
class Row:
    workload: str
    strategy: str  # "evolutionary+T": with transfer
    budget: int
    seed: int
    trials: int
    secs: float
    learned: int  # trials of other workloads its model learned from first
    best_gflops: float  # the row's own pick, on its own timings
    confirmed_gflops: float  # re-timed at the end, interleaved with every row of the workload
    run_id: int


def _gflops(workload, secs: float | None) -> float:
    return workload.flops() / secs / 1e9 if secs and math.isfinite(secs) else 0.0


def _fresh_copy(pre: SQLiteStore, dest: Path) -> Path:
    """Copy the pretraining database to ``dest``, replacing a previous run's copy. The copies
    are this benchmark's scratch, remade every run; an interrupted run leaves its ``-wal`` beside
    one, which the store rightly refuses to overwrite, so the old copy goes first, whole."""
    for stale in (dest, Path(f"{dest}-wal"), Path(f"{dest}-shm"), Path(f"{dest}-journal")):
        stale.unlink(missing_ok=True)
    return pre.backup(dest)


def _plan(strategies, seeds, budgets, first_seed=0) -> list[tuple[str, int, int]]:
    small, equal, long = budgets
    runs = []
    for seed in range(first_seed, first_seed + seeds):
        runs += [("tune_tir_fast", equal, seed), ("tune_tir_fast", long, seed)]
        for s in strategies:
            runs += [(f"{s}+T", small, seed), (s, small, seed)]
            runs += [(f"{s}+T", equal, seed), (s, equal, seed)]
    return runs


def _search(tuner, store, workload, target, label, budget, seed) -> Row:
    t0 = time.monotonic()
    learned = 0
    if label == "tune_tir_fast":
        run = run_metaschedule(
            workload,
            target,
            store,
            max_trials=budget,
            num_trials_per_iter=min(64, budget),
            seed=seed,
        )
        run_id = run.id
    else:
        name, transfer = label.removesuffix("+T"), label.endswith("+T")
        strategy = make_strategy(name, transfer_from="auto" if transfer else None)
        result = tuner.run(workload, target, strategy, max_trials=budget, seed=seed)
        run_id = result.run.id
        learned = int(store.get_run(run_id).settings.get("transfer_trials") or 0)
    secs = time.monotonic() - t0
    trials = searched_trials(store, run_id, budget)
    timed = [t.median_secs for t in trials if t.median_secs and t.status in TIMED]
    return Row(
        workload.key(), label, budget, seed, len(trials), secs, learned,
        _gflops(workload, min(timed, default=None)), math.nan, run_id,
    )  # fmt: skip


def _median(values) -> float:
    values = [v for v in values if v > 0]
    return statistics.median(values) if values else math.nan


def _goals(rows: list[Row], strategies, budgets) -> list[str]:
    small, equal, top = budgets
    out = []
    for w in dict.fromkeys(r.workload for r in rows):

        def med(label, budget, w=w):
            return _median(
                [
                    r.confirmed_gflops
                    for r in rows
                    if (r.workload, r.strategy, r.budget) == (w, label, budget)
                ]
            )

        long, short = med("tune_tir_fast", top), med("tune_tir_fast", equal)
        best = max(
            strategies, key=lambda s: med(f"{s}+T", small) if med(f"{s}+T", small) > 0 else -1
        )
        ratio = med(f"{best}+T", small) / long
        out.append(
            f"{w[:40]:40s} {best}+T@{small} / tune_tir_fast@{top} = {ratio:5.2f} (goal >= 1)"
        )
        for s in strategies:
            with_t, without = med(f"{s}+T", equal) / short, med(s, equal) / short
            out.append(
                f"{'':40s} {s}@{equal} / tune_tir_fast@{equal}: with transfer {with_t:5.2f}, "
                f"without {without:5.2f} (goal >= 1)"
            )
        for s in strategies:
            # What transfer itself buys where it should matter most: the smallest budget.
            effect = med(f"{s}+T", small) / med(s, small)
            if math.isfinite(effect):
                out.append(f"{'':40s} transfer's effect on {s}@{small}: {effect:5.2f}x")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="2 workloads, 1 seed, evolutionary")
    # Only held-out workloads: any other was in the pretraining, and its copy's name could be
    # the pretraining database's own (which a copy replaces).
    p.add_argument("--workloads", nargs="*", default=None, choices=HELD_OUT)
    p.add_argument("--strategies", nargs="*", default=None)
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument("--first-seed", type=int, default=0, help="seeds run: FIRST .. FIRST+SEEDS-1")
    p.add_argument("--pretrain-minutes", type=float, default=None)
    p.add_argument(
        "--budgets",
        nargs=3,
        type=int,
        default=[32, 64, 128],
        metavar=("SMALL", "EQUAL", "LONG"),
        help="ours with transfer at SMALL; ours and tune_tir_fast at EQUAL; tune_tir_fast at LONG",
    )
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    if args.quick:
        defaults = (["resnet18_c7", "dense_bert_ffn"], ["evolutionary"], 1, 15.0)
    else:
        defaults = (list(HELD_OUT), list(MODEL_GUIDED), 5, 60.0)
    names = ("workloads", "strategies", "seeds", "pretrain_minutes")
    for name, value in zip(names, defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    args.out.mkdir(exist_ok=True)
    target = Target.local_cpu()
    print(f"CPU {cpu_model()}, target {target.key()}", flush=True)
    trained_on = pretrain_presets(skip=HELD_OUT)
    pre_db = args.out / "transfer_pretrain.db"
    rows: list[Row] = []
    with LocalMeasurer(MEASURE) as measurer:
        pre = get_store(pre_db)
        if args.pretrain_minutes > 0:
            t0 = time.monotonic()
            done = pretrain(
                pre, measurer, target, seconds=60 * args.pretrain_minutes, names=trained_on
            )
            print(f"pretrained {done.trials} trials in {time.monotonic() - t0:.0f} s", flush=True)
        held = coverage(pre, target, HELD_OUT)
        assert not any(held.values()), f"the pretraining database holds held-out trials: {held}"
        covered = coverage(pre, target, trained_on)
        print(
            f"pretraining database: {sum(covered.values())} trials of {len(trained_on)} presets "
            f"({min(covered.values())} to {max(covered.values())} each)",
            flush=True,
        )
        # Each held-out workload is tuned in its own copy: nothing one measures reaches another.
        copies = {n: _fresh_copy(pre, args.out / f"transfer_{n}.db") for n in args.workloads}
        pre.close()
        for name in args.workloads:
            workload = get_workload(name)
            store = get_store(copies[name])
            tuner = Tuner(measurer=measurer, store=store, batch_size=BATCH, confirm_top=3)
            mine = []
            plan = _plan(args.strategies, args.seeds, args.budgets, args.first_seed)
            for label, budget, seed in plan:
                row = _search(tuner, store, workload, target, label, budget, seed)
                mine.append(row)
                print(
                    f"{name:20s} {label:24s} {budget:>4d} seed {seed}: {row.best_gflops:7.1f} "
                    f"GFLOPS, {row.trials} trials in {row.secs:6.1f} s, "
                    f"learned from {row.learned}",
                    flush=True,
                )
            retimed = retime(
                measurer, [(r.run_id, top_candidates(store, r.run_id, r.budget)) for r in mine]
            )
            print(f"  {retimed.describe()}", flush=True)
            for r in mine:
                gflops = _gflops(workload, retimed.best_secs.get(r.run_id))
                rows.append(replace(r, confirmed_gflops=gflops))
                print(
                    f"  re-timed {r.strategy:24s} {r.budget:>4d} seed {r.seed}: "
                    f"{gflops:7.1f} GFLOPS"
                )
            store.close()
    print(f"\nCPU {cpu_model()}; medians of {args.seeds} seed(s), re-timed GFLOPS ratios:")
    for line in _goals(rows, args.strategies, args.budgets):
        print(line)
    with open(args.out / "transfer.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)


if __name__ == "__main__":
    main()
