"""Re-time a finished search benchmark's best schedules again, then print its targets again.

``bench_search`` already re-times every row's best schedules at the end of its run. If the
machine was busy then, every timing (NumPy's included) is depressed and noisy; this pass takes
the database and CSV the benchmark wrote and repeats that re-timing (``_retime``: each row's
fastest few schedules within its own trial budget, interleaved rounds, NumPy between rounds in a
clean subprocess) on the machine as it is now.

    python benchmarks/bench_confirm.py                   # bench_results/search.{csv,db}
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from types import SimpleNamespace

import _checkout  # noqa: F401  (first: this checkout's explorer)
from bench_search import MEASURE, OURS, RunRow, _confirm, _report, _write

from explorer.machine import NumpyTimer, measured_peak
from explorer.measure import LocalMeasurer
from explorer.storage import get_store
from explorer.target import Target


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", type=Path, default=Path("bench_results"))
    args = p.parse_args()
    rows = [_row(r) for r in csv.DictReader((args.results / "search.csv").open())]
    store = get_store(args.results / "search.db")
    confirmed: list[RunRow] = []
    numpy: dict = {}
    with (
        LocalMeasurer(MEASURE) as measurer,
        NumpyTimer() as numpy_timer,
    ):
        for key in dict.fromkeys(r.workload for r in rows):
            mine = [r for r in rows if r.workload == key]
            workload = store.get_run(mine[0].run_id).workload
            confirmed += _confirm(store, measurer, numpy_timer, workload, mine, numpy)
    # The run's shape, read back from its rows: the budgets every strategy of ours ran at.
    ours = [r for r in rows if r.strategy in OURS and r.strategy != "evolutionary+droplet"]
    budgets = sorted({r.budget for r in ours if r.strategy == "droplet"})
    vendor = sorted({r.budget for r in rows if r.strategy == "tune_tir_fast"})
    hybrid = [r.budget for r in rows if r.strategy == "evolutionary+droplet"]
    shape = SimpleNamespace(
        budgets=budgets,
        long=vendor[-1] if vendor and vendor[-1] not in budgets else 0,
        droplet=max(hybrid, default=0),
    )
    goals = _report(confirmed, numpy, measured_peak(Target.local_cpu()), shape)
    _write(args.results / "search_confirmed.csv", confirmed)
    _write(args.results / "targets_confirmed.csv", goals)


def _row(r: dict[str, str]) -> RunRow:
    return RunRow(
        r["workload"], r["strategy"], int(r["budget"]), int(r["seed"]), int(r["trials"]),
        float(r["secs"]), float(r["best_gflops"]), math.nan, float(r["trials_per_min"]),
        float(r["spearman"]), int(r["run_id"]), int(r["failed"]),
        float(r.get("build_secs") or math.nan),  # not in the CSVs of runs before it was kept
        float(r.get("kernel_secs") or math.nan),  # nor this
    )  # fmt: skip


if __name__ == "__main__":
    main()
