"""Measurement throughput: our LocalMeasurer against MetaSchedule's builder and runner.

Run: ``python benchmarks/bench_measure.py [--trials 64] [--ms-trials 16]``

Same workload (matmul 256x256x256 float32), same target (local CPU, 2 cores), kernels timed with
2 threads, all in one run:

* ``ours``: ``LocalMeasurer`` (default ``MeasureConfig``: correctness check + 5 repeats of
  >= 20 ms) on ``--trials`` candidates sampled at random from MetaSchedule's design space
  (post-order-apply, postprocs applied), in batches of 16. Sampling time is included, and so
  is the start of the worker pool.
* ``ms_default``: ``ms.tune_tir`` as TVM ships it (default ``LocalBuilder``, which re-imports
  ``tvm.s_tir.tensor_intrin`` in every fresh build worker; default ``LocalRunner``, which times
  3 runs of >= 100 ms), ``--ms-trials`` trials, one batch.
* ``ms_fast_build``: the same with the ``fast_build`` builder (docs/tvm-notes.md, section 4).

Trials per minute = trials / wall time. Target: ours >= 5x ms_default. Results are printed and
written to ``bench_results/measure.csv``.
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)

from explorer import _tvm
from explorer.measure import Candidate, LocalMeasurer, MeasureConfig
from explorer.target import Target
from explorer.workloads import get_workload

ms = _tvm.ms
BATCH = 16
NUM_THREADS = 2


@_tvm.derived_object
class _Counter(ms.measure_callback.PyMeasureCallback):
    """Counts MetaSchedule's trials and failures and keeps the best mean latency."""

    def __init__(self) -> None:
        self.trials = 0
        self.errors = 0
        self.best = math.inf

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
        for br, rr in zip(builder_results, runner_results, strict=True):
            self.trials += 1
            if br.error_msg or rr.error_msg or not rr.run_secs:
                self.errors += 1
            else:
                self.best = min(self.best, statistics.mean(float(x) for x in rr.run_secs))


def _design_space(workload, target: Target):
    _tvm.ensure_cpu_intrinsics()
    ctx = ms.TuneContext(
        mod=workload.mod(),
        target=target.to_tvm(),
        space_generator="post-order-apply",
        search_strategy="evolutionary",
        task_name="bench",
        rand_state=1,
        num_threads=NUM_THREADS,
    )
    return ctx, list(ctx.generate_design_space())


def _sample(workload, target: Target, ctx, spaces, seed: int) -> Candidate | None:
    """One random point of the design space, postprocs applied; the FULL trace is kept."""
    sch = _tvm.Schedule(workload.mod(), seed=seed)
    trace = _tvm.Trace(list(spaces[seed % len(spaces)].trace.insts), {})
    trace.apply_to_schedule(sch, remove_postproc=True)
    if not all(p.apply(sch) for p in ctx.space_generator.postprocs):
        return None
    return Candidate(workload, target, _tvm.trace_to_json(sch.trace))


def bench_ours(workload, target: Target, trials: int) -> dict:
    start = time.perf_counter()
    ctx, spaces = _design_space(workload, target)
    results = []
    seed = 1
    config = MeasureConfig(num_threads=NUM_THREADS)
    with LocalMeasurer(config, num_build_workers=target.num_cores) as measurer:
        first_batch_secs = None
        while len(results) < trials:
            batch: list[Candidate] = []
            while len(batch) < min(BATCH, trials - len(results)):
                cand = _sample(workload, target, ctx, spaces, seed)
                seed += 1
                if cand is not None:
                    batch.append(cand)
            t0 = time.perf_counter()
            results += measurer.measure(batch)
            if first_batch_secs is None:
                first_batch_secs = time.perf_counter() - t0
    wall = time.perf_counter() - start
    ok = [r for r in results if r.is_ok]
    return {
        "config": "ours (LocalMeasurer)",
        "trials": len(results),
        "wall_secs": wall,
        "errors": len(results) - len(ok),
        "best_us": min((r.median_secs for r in ok), default=math.inf) * 1e6,
        "notes": f"(first batch of {BATCH}, incl. worker start: {first_batch_secs:.1f} s; "
        f"threads {sorted({r.num_threads for r in ok})})",
    }


def bench_tune_tir(workload, target: Target, trials: int, *, fast: bool) -> dict:
    work_dir = tempfile.mkdtemp(prefix="bench-ms-")
    counter = _Counter()
    kwargs = {}
    if fast:
        kwargs["builder"] = ms.builder.LocalBuilder(
            f_build=_tvm.fast_build, max_workers=target.num_cores
        )
    start = time.perf_counter()
    try:
        ms.tune_tir(
            mod=workload.mod(),
            target=target.to_tvm(),
            work_dir=work_dir,
            max_trials_global=trials,
            num_trials_per_iter=BATCH,
            measure_callbacks=ms.MeasureCallback.create("default") + [counter],
            num_tuning_cores=target.num_cores,
            seed=0,
            **kwargs,
        )
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    wall = time.perf_counter() - start
    return {
        "config": "ms.tune_tir + fast_build" if fast else "ms.tune_tir (default LocalBuilder)",
        "trials": counter.trials,
        "wall_secs": wall,
        "errors": counter.errors,
        "best_us": counter.best * 1e6,
        "notes": "",
    }


def _line(row: dict) -> str:
    return (
        f"{row['config']:<36} {row['trials']:>4} trials in {row['wall_secs']:6.1f} s = "
        f"{row['trials_per_min']:6.1f} trials/min ({row['ok_per_min']:.1f} ok), "
        f"{row['errors']} errors, "
        f"best {row['best_us']:.1f} us  {row['notes']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64, help="candidates for LocalMeasurer")
    parser.add_argument("--ms-trials", type=int, default=16, help="trials for each tune_tir")
    parser.add_argument("--out", default="bench_results/measure.csv")
    args = parser.parse_args(argv)

    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    # MetaSchedule's runner workers inherit the thread count from this process's environment.
    os.environ["TVM_NUM_THREADS"] = str(NUM_THREADS)
    target = Target.local_cpu(num_cores=NUM_THREADS)
    workload = get_workload("matmul", M=256, N=256, K=256)
    header = f"workload {workload.key()}, target {target.to_tvm_dict()}"
    print(header, flush=True)

    rows = []
    for label, run in (
        ("ours", lambda: bench_ours(workload, target, args.trials)),
        ("ms_fast_build", lambda: bench_tune_tir(workload, target, args.ms_trials, fast=True)),
        ("ms_default", lambda: bench_tune_tir(workload, target, args.ms_trials, fast=False)),
    ):
        row = run()
        row["key"] = label
        row["trials_per_min"] = 60.0 * row["trials"] / row["wall_secs"]
        row["ok_per_min"] = 60.0 * (row["trials"] - row["errors"]) / row["wall_secs"]
        rows.append(row)
        print(_line(row), flush=True)

    # MetaSchedule logs a lot to stdout; repeat the summary at the end.
    by_key = {r["key"]: r["trials_per_min"] for r in rows}
    ratio_default = by_key["ours"] / by_key["ms_default"]
    ratio_fast = by_key["ours"] / by_key["ms_fast_build"]
    verdict = "met" if ratio_default >= 5 else "NOT met"
    print(f"\n== summary ({header}; load average {os.getloadavg()[0]:.1f})")
    for row in rows:
        print(_line(row))
    print(f"ours / ms_default    = {ratio_default:.1f}x  (target >= 5x: {verdict})")
    print(f"ours / ms_fast_build = {ratio_fast:.1f}x")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = [
        "key",
        "config",
        "trials",
        "wall_secs",
        "trials_per_min",
        "errors",
        "best_us",
        "notes",
    ]
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row[k] for k in fields})
        writer.writerow({"key": "ratio_ms_default", "trials_per_min": round(ratio_default, 2)})
        writer.writerow({"key": "ratio_ms_fast_build", "trials_per_min": round(ratio_fast, 2)})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
