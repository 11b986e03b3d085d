"""Where our `evolutionary` and TVM's `tune_tir_fast` differ at equal trials, one factor at a time.

Both run MetaSchedule's evolutionary search with its XGB model; four things differ, and each row
below changes one of them in our `evolutionary` towards what `tune_tir` does:

* ``ours``: as shipped (the packed sketches beside MetaSchedule's, rounds of a quarter of the
  budget, the model's warm-up and population scaled to it, our timing protocol);
* ``MS space``: MetaSchedule's sketches alone (``DesignSpace.metaschedule_only``);
* ``MS rounds``: MetaSchedule's round of 64, warm-up of 100 measurements (before which its
  model ranks at random) and population of 512;
* ``MS timing``: ``tune_tir``'s timing (3 repeats of at least 50 ms, no warm-up call, no
  second round when the repeats spread, no early stop of hopeless kernels);
* ``all MS``: the three at once (our harness running what ``tune_tir_fast`` runs);
* ``tune_tir_fast``: ``ms.tune_tir`` itself with our fast builder (the reference).

For every workload and seed the rows run one after another; at the end every row's best few
schedules are re-timed together in interleaved rounds with one timer (``_retime``), and the
ratios are of those re-timed GFLOPS, each row's median over seeds divided by
``tune_tir_fast``'s. The machine's CPU is printed first.

    python benchmarks/bench_factors.py                    # matmul 512, 1024, C2, C7; 5 seeds
    python benchmarks/bench_factors.py --workloads matmul_512 --seeds 3
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _retime import TIMED, retime, searched_trials, top_candidates

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.search import make_strategy
from explorer.search._metaschedule import run_metaschedule
from explorer.space import DesignSpace
from explorer.storage import get_store
from explorer.target import Target, cpu_model
from explorer.tuner import Tuner
from explorer.workloads import get_workload

OUT = Path("bench_results")
OURS = MeasureConfig(repeat=5, min_repeat_secs=0.02)  # as bench_search's rows
# tune_tir's runner: repeats of at least 50 ms (MetaSchedule's own are 3 of one call each;
# run_metaschedule's defaults, what tune_tir_fast uses, are number=2, repeat=3, 50 ms)
MS_TIMING = MeasureConfig(
    repeat=3, min_repeat_secs=0.05, warmup_secs=0.0, timing_rounds=1, hopeless_ratio=None
)
MS_ROUNDS = {"num_trials_per_iter": 64, "num_warmup_samples": 100, "population_size": 512}


@dataclass(frozen=True)
class Factor:
    ms_space: bool = False
    ms_rounds: bool = False
    ms_timing: bool = False


ROWS = {
    "ours": Factor(),
    "MS space": Factor(ms_space=True),
    "MS rounds": Factor(ms_rounds=True),
    "MS timing": Factor(ms_timing=True),
    "all MS": Factor(True, True, True),
}
REFERENCE = "tune_tir_fast"
WORKLOADS = ("matmul_512", "matmul_1024", "resnet18_c2", "resnet18_c7")


def _search(tuners, store, workload, target, row: str, budget: int, seed: int):
    """One row's run: its id and seconds."""
    t0 = time.monotonic()
    if row == REFERENCE:
        run = run_metaschedule(
            workload, target, store, max_trials=budget, num_trials_per_iter=min(64, budget),
            seed=seed,
        )  # fmt: skip
        return run.id, time.monotonic() - t0
    factor = ROWS[row]
    space = DesignSpace.of(workload, target)
    result = tuners[factor.ms_timing].run(
        workload,
        target,
        make_strategy("evolutionary", **(MS_ROUNDS if factor.ms_rounds else {})),
        max_trials=budget,
        seed=seed,
        space=space.metaschedule_only() if factor.ms_space else space,
    )
    return result.run.id, time.monotonic() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    args.out.mkdir(exist_ok=True)
    db = args.out / "factors.db"
    db.unlink(missing_ok=True)
    store = get_store(db)
    target = Target.local_cpu()
    print(f"{cpu_model()}, target {target}, {args.trials} trials, {args.seeds} seeds", flush=True)
    rows = [*ROWS, REFERENCE]
    with LocalMeasurer(OURS) as ours, LocalMeasurer(MS_TIMING) as ms_timing:
        tuners = {
            timing: Tuner(measurer=m, store=store, batch_size=8, confirm_top=0)
            for timing, m in ((False, ours), (True, ms_timing))
        }
        for name in args.workloads:
            workload = get_workload(name)
            runs: dict[str, list[tuple[int, float]]] = {row: [] for row in rows}
            for seed in range(args.seeds):
                for row in rows:
                    run_id, secs = _search(tuners, store, workload, target, row, args.trials, seed)
                    runs[row].append((run_id, secs))
                    trials = searched_trials(store, run_id, args.trials)
                    timed = [t.median_secs for t in trials if t.median_secs and t.status in TIMED]
                    own = workload.flops() / min(timed) / 1e9 if timed else 0.0
                    print(f"{name:12s} {row:14s} seed {seed}: {own:6.1f} GFLOPS (own timing) "
                          f"in {secs:4.0f} s", flush=True)  # fmt: skip
            retimed = retime(
                ours,
                [
                    (run_id, top_candidates(store, run_id, args.trials))
                    for per_row in runs.values()
                    for run_id, _ in per_row
                ],
            )
            _report(workload, runs, retimed.best_secs)
    store.close()


def _report(workload, runs: dict[str, list[tuple[int, float]]], best_secs) -> None:
    def gflops(run_id: int) -> float:
        secs = best_secs.get(run_id)
        return workload.flops() / secs / 1e9 if secs else 0.0

    reference = statistics.median(gflops(r) for r, _ in runs[REFERENCE])
    print(f"\n{workload.key()}: re-timed GFLOPS, median [range] over seeds, / {REFERENCE}")
    for row, per_row in runs.items():
        values = [gflops(r) for r, _ in per_row]
        median = statistics.median(values)
        secs = statistics.median(s for _, s in per_row)
        print(f"  {row:14s} {median:6.1f} [{min(values):.0f}-{max(values):.0f}]  "
              f"{median / reference:5.2f}  ({secs:.0f} s a run)")  # fmt: skip
    print(flush=True)


if __name__ == "__main__":
    main()
