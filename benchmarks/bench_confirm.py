"""Re-time the best schedules of a finished search benchmark, then recompute its targets.

A search benchmark takes hours; if the machine was busy meanwhile, every timing (NumPy's
included) is depressed and noisy, and a row's "best" may be a lucky outlier. This pass takes the
database the benchmark wrote, picks each row's fastest few schedules (within the row's own trial
budget, re-measurements excluded), re-times them all in interleaved rounds on the machine as it
is now, re-times NumPy the same way, and prints the same table and targets from those timings.

    python benchmarks/bench_confirm.py                   # bench_results/search.{csv,db}
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
from pathlib import Path

from bench_search import RunRow, _report, numpy_gflops

from explorer.measure import LocalMeasurer, MeasureConfig, trace_key
from explorer.storage import get_store

TOP = 5  # schedules re-timed per row: the first timings may have ranked them wrongly


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", type=Path, default=Path("bench_results"))
    args = p.parse_args()
    rows = [_row(r) for r in csv.DictReader((args.results / "search.csv").open())]
    store = get_store(args.results / "search.db")
    confirmed, refs = [], {}
    with LocalMeasurer(MeasureConfig(repeat=5, min_repeat_secs=0.05)) as measurer:
        for row in rows:
            trials, seen = [], set()
            for t in store.trials(run_id=row.run_id):
                key = trace_key(t.candidate.trace)
                if key not in seen:  # a repeated trace is a re-measurement, not a trial
                    seen.add(key)
                    trials.append(t)
            ok = sorted(
                (t for t in trials[: row.trials] if t.result.is_ok and t.median_secs),
                key=lambda t: t.median_secs,
            )[:TOP]
            again = measurer.remeasure([t.candidate for t in ok], rounds=3) if ok else []
            secs = min((r.median_secs for r in again if r.is_ok and r.median_secs), default=0)
            flops = store.get_run(row.run_id).workload.flops()
            gflops = flops / secs / 1e9 if secs else 0.0
            confirmed.append(dataclasses.replace(row, best_gflops=gflops))
            print(f"{row.workload:44s} {row.strategy:22s} {row.budget:>6s}: "
                  f"{row.best_gflops:7.1f} -> {gflops:7.1f} GFLOPS", flush=True)  # fmt: skip
            if row.workload not in refs:
                refs[row.workload] = numpy_gflops(store.get_run(row.run_id).workload)
    pair = min(int(r.budget[2:]) for r in rows if r.budget.startswith("2x"))
    evo = sorted(
        {int(r.budget) for r in rows if r.strategy == "evolutionary" and r.budget.isdigit()}
    )
    long_budget, n_evo = evo[-1], evo[-2] if len(evo) > 1 else evo[-1]
    droplet = max(int(r.budget) for r in rows if r.strategy == "droplet")
    _report(confirmed, refs, pair, n_evo, long_budget, droplet)


def _row(r: dict[str, str]) -> RunRow:
    def num(x: str) -> float | None:
        return float(x) if x not in ("", "None") else None

    return RunRow(
        r["workload"], r["strategy"], r["budget"], int(r["seed"]), int(r["trials"]),
        float(r["secs"]), float(r["best_gflops"]),
        int(r["trials_to_95"]) if r["trials_to_95"] else None, num(r["secs_to_95"]),
        float(r["spearman"]), float(r["trials_per_min"]), int(r["run_id"]),
    )  # fmt: skip


if __name__ == "__main__":
    main()
