"""What the packed sketches add: each strategy with and without them, at equal trials, re-timed
together, against the machine's measured peak and (for matmul) NumPy's native kernel.

For every workload and seed, each strategy searches twice through the same ``Tuner``: in the
whole design space (MetaSchedule's sketches and the packed ones) and in MetaSchedule's sketches
alone (``DesignSpace.metaschedule_only``, what ``tune_tir`` searches). Every row's best few
schedules are then re-timed in interleaved rounds with one timer (``_retime``), NumPy timed
between the rounds in its own clean subprocess; the fp32 peak is read from its cache (measured
again when it was kept from a busy machine). Every ratio printed is between numbers of this
run, on this machine (its CPU is printed first).

The goals (issue "small budgets that win", part 3): on matmul 1024 the best at least 0.85 of
the measured peak and at least NumPy's native kernel; on ResNet-18's 3x3 convolutions (C2, C4,
C7, C9, C12) at least 0.6 of the peak, per layer.

    python benchmarks/bench_packing.py --quick   # matmul 1024 and C7, evolutionary, 1 seed
    python benchmarks/bench_packing.py           # matmul 1024 (2 seeds) and the five layers

Output: the table and the goals on stdout, ``bench_results/packing.csv``.
"""

from __future__ import annotations

import argparse
import csv
import logging
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _retime import TIMED, retime, searched_trials, top_candidates

from explorer.machine import NumpyTimer, measured_peak
from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.search import make_strategy
from explorer.space import DesignSpace
from explorer.storage import get_store
from explorer.target import Target
from explorer.tuner import Tuner
from explorer.workloads import get_workload

OUT = Path("bench_results")
CONVS = ("resnet18_c2", "resnet18_c4", "resnet18_c7", "resnet18_c9", "resnet18_c12")
MEASURE = MeasureConfig(repeat=5, min_repeat_secs=0.02)  # as bench_search's rows


@dataclass(frozen=True)
class Row:
    workload: str
    strategy: str
    packed: bool
    seed: int
    trials: int
    secs: float
    best_gflops: float  # on the row's own timings
    confirmed_gflops: float  # re-timed with every row of its workload
    run_id: int


def _gflops(workload, secs: float | None) -> float:
    return workload.flops() / secs / 1e9 if secs else 0.0


def _search(tuner, store, workload, target, strategy, packed, budget, seed) -> Row:
    space = DesignSpace.of(workload, target)
    t0 = time.monotonic()
    result = tuner.run(
        workload,
        target,
        make_strategy(strategy),
        max_trials=budget,
        seed=seed,
        space=space if packed else space.metaschedule_only(),
    )
    secs = time.monotonic() - t0
    trials = searched_trials(store, result.run.id, budget)
    timed = [t.median_secs for t in trials if t.median_secs and t.status in TIMED]
    best = _gflops(workload, min(timed, default=None))
    return Row(workload.key(), strategy, packed, seed, len(trials), secs, best, 0.0, result.run.id)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="matmul 1024 and C7, 1 seed")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--strategies", nargs="*", default=None)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    if args.quick:
        plan = [("matmul_1024", 1), ("resnet18_c7", 1)]
        strategies = args.strategies or ["evolutionary"]
    else:
        plan = [("matmul_1024", 2), *((c, 1) for c in CONVS)]
        strategies = args.strategies or ["evolutionary", "droplet"]
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    args.out.mkdir(exist_ok=True)
    db = args.out / "packing.db"
    db.unlink(missing_ok=True)
    store = get_store(db)
    target = Target.local_cpu()
    print(f"target {target} {target.to_tvm_dict()}", flush=True)
    rows: list[Row] = []
    numpy: dict[str, float] = {}
    with LocalMeasurer(MEASURE) as measurer, NumpyTimer() as numpy_timer:
        tuner = Tuner(measurer=measurer, store=store, batch_size=8, confirm_top=3)
        for name, seeds in plan:
            workload = get_workload(name)
            mine = []
            for seed in range(seeds):
                for strategy in strategies:
                    for packed in (False, True):
                        row = _search(
                            tuner, store, workload, target, strategy, packed, args.trials, seed
                        )
                        mine.append(row)
                        print(
                            f"{name:14s} {strategy:22s} {'packed' if packed else 'MS only':7s} "
                            f"seed {seed}: {row.best_gflops:6.1f} GFLOPS in {row.secs:5.0f} s",
                            flush=True,
                        )

            numpy_kernels: set[str] = set()

            def time_numpy(workload=workload, kernels=numpy_kernels) -> float:
                b = numpy_timer.time(workload)
                kernels.add(f"{b.blas} {b.kernel}, {b.num_threads} threads")
                return min(b.run_secs)  # its fastest repeat

            has_numpy = workload.family in ("matmul", "batch_matmul")
            retimed = retime(
                measurer,
                [(r.run_id, top_candidates(store, r.run_id, args.trials)) for r in mine],
                time_numpy if has_numpy else None,
            )
            if retimed.numpy_secs:
                numpy[workload.key()] = _gflops(workload, min(retimed.numpy_secs))
                print(f"  NumPy's kernel: {'; '.join(sorted(numpy_kernels))}", flush=True)
            print(f"  {retimed.describe()}", flush=True)
            for r in mine:
                rows.append(
                    replace(r, confirmed_gflops=_gflops(workload, retimed.best_secs.get(r.run_id)))
                )
    peak = measured_peak(target)
    _report(rows, numpy, peak.gflops_f32, strategies)
    with open(args.out / "packing.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    print(f"wrote {args.out / 'packing.csv'}")


def _report(rows: list[Row], numpy: dict[str, float], peak: float, strategies) -> None:
    print(f"\nre-timed GFLOPS (median over seeds); measured fp32 peak {peak:.0f} GFLOPS")
    print(f"{'workload':44s} {'strategy':22s} {'MS only':>8s} {'packed':>8s} {'ratio':>6s}")
    for w in dict.fromkeys(r.workload for r in rows):
        for s in strategies:

            def med(packed: bool, w=w, s=s) -> float:
                values = [
                    r.confirmed_gflops
                    for r in rows
                    if (r.workload, r.strategy, r.packed) == (w, s, packed)
                ]
                return statistics.median(values) if values else 0.0

            without, with_ = med(False), med(True)
            ratio = with_ / without if without else float("nan")
            print(f"{w[:44]:44s} {s:22s} {without:8.1f} {with_:8.1f} {ratio:6.2f}")
    print("\ngoals (best re-timed row of each workload):")
    for w in dict.fromkeys(r.workload for r in rows):
        best = max(r.confirmed_gflops for r in rows if r.workload == w)
        goal = 0.85 if w.startswith("matmul") else 0.6
        print(f"  {w[:44]}: best / peak {best / peak:.2f} (goal >= {goal:g}: "
              f"{'met' if best / peak >= goal else 'NOT met'})")  # fmt: skip
        if w in numpy:
            ratio = best / numpy[w]
            print(f"  {w[:44]}: best / NumPy ({numpy[w]:.0f} GFLOPS) {ratio:.2f} (goal >= 1: "
                  f"{'met' if ratio >= 1 else 'NOT met'}; moonshot 1.15)")  # fmt: skip


if __name__ == "__main__":
    main()
