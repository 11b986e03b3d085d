"""The record database at 100k trials: insert rate and the dashboard queries, against baselines.

Run: ``python benchmarks/bench_storage.py [--runs 20] [--per-run 5000]``

Inserts ``runs x per_run`` trials (2 workloads x 2 targets, 10 % failures, two predictions each)
through ``SQLiteStore.add_trials`` in batches, then times each dashboard query through the store
API (the median of several calls) and compares it with two baselines measured in the same run on
the same file:

* ``no index``: the same SQL with ``NOT INDEXED`` (what the query would cost without our indexes),
  compared with the same SQL as the store runs it (``raw/no index``);
* ``full scan``: ``SELECT * FROM trials`` fetched in full (reading everything), compared with the
  store API call, decoding included (``API/full scan``).

Target: each dashboard query well under 100 ms at 100k trials. ``trials(run_id)`` returns a whole
run as Python records, so its cost grows with the run's length (decoding, not SQL, dominates; the
raw indexed SQL is shown next to it).
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _timing import median_ms

from explorer import _tvm
from explorer.core import Candidate, MeasureResult
from explorer.storage import NewTrial, SQLiteStore
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

TARGET_MS = 100.0


def _trace(workload, factor: int):
    sch = _tvm.Schedule(workload.mod())
    sch.split(sch.get_loops(sch.get_sblock("C"))[0], [None, factor])
    return _tvm.trace_to_json(sch.trace)


def _fill(store: SQLiteStore, num_runs: int, per_run: int, batch: int) -> list:
    workloads = [
        get_workload("matmul", M=64, N=64, K=64),
        get_workload("matmul", M=32, N=32, K=64),
    ]
    targets = [Target.local_cpu(), Target(kind="llvm", mcpu="generic", num_cores=1)]
    combos = [(w, t) for w in workloads for t in targets]
    runs = []
    for r in range(num_runs):
        w, t = combos[r % len(combos)]
        run = store.create_run(w, t, "random", settings={"r": r})
        runs.append(run)
        trace = _trace(w, (4, 8, 16, 32)[r % 4])
        for start in range(0, per_run, batch):
            trials = []
            for i in range(start, min(start + batch, per_run)):
                if (i + r) % 10 == 0:
                    result = MeasureResult(MeasureStatus.BUILD_ERROR, error_msg="failed")
                else:
                    secs = 1e-4 * (1 + ((i * 7919 + r * 104729) % 100003) / 100003)
                    result = MeasureResult(MeasureStatus.OK, (secs, secs * 1.01), flops=w.flops())
                cand = Candidate(w, t, trace, {"i": i})
                trials.append(NewTrial(cand, result, {"xgb": float(i), "random": -float(i)}))
            store.add_trials(run.id, trials)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--per-run", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    total = args.runs * args.per_run

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.db"
        store = SQLiteStore(path)
        t0 = time.perf_counter()
        runs = _fill(store, args.runs, args.per_run, args.batch)
        insert_secs = time.perf_counter() - t0
        size_mb = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
        print(
            f"inserted {total:,} trials in {insert_secs:.1f} s "
            f"({total / insert_secs:,.0f} trials/s, batches of {args.batch}); {size_mb:.0f} MB"
        )

        raw = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        run = runs[len(runs) // 2]
        w, t = run.workload, run.target
        wk, tk = w.key(), t.key()

        def sql(text: str, *params: object) -> Callable[[], object]:
            return lambda: raw.execute(text, params).fetchall()

        full_scan = median_ms(sql("SELECT * FROM trials"), repeat=3)
        best_sql = (
            "SELECT * FROM trials{} WHERE workload_key = ? AND target_key = ? AND status = 'ok' "
            "AND median_secs IS NOT NULL ORDER BY median_secs, id LIMIT 10"
        )
        curve_sql = (
            "SELECT seq, created_at, MIN(CASE WHEN status = 'ok' AND median_secs IS NOT NULL "
            "THEN median_secs ELSE 9e999 END) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) "
            "FROM trials{} WHERE run_id = ? ORDER BY seq"
        )
        run_sql = "SELECT * FROM trials{} WHERE run_id = ? ORDER BY seq"
        count_sql = "SELECT count(*) FROM trials{} WHERE run_id = ?"
        rows = [
            ("best_so_far(run)", lambda: store.best_so_far(run.id), curve_sql, (run.id,)),
            ("best(workload, target, k=10)", lambda: store.best(w, t, k=10), best_sql, (wk, tk)),
            ("trials(run_id=run)", lambda: store.trials(run_id=run.id), run_sql, (run.id,)),
            ("count_trials(run_id=run)", lambda: store.count_trials(run_id=run.id), count_sql,
             (run.id,)),
        ]  # fmt: skip
        print(f"\nbaseline: full scan `SELECT * FROM trials` = {full_scan:.1f} ms\n")
        header = f"{'query':30} {'store API':>10} {'raw SQL':>9} {'no index':>9} "
        print(header + f"{'raw/no index':>13} {'API/full scan':>14}  target")
        for name, api, text, params in rows:
            api_ms = median_ms(api, repeat=7)
            raw_ms = median_ms(sql(text.format(""), *params), repeat=7)
            unindexed_ms = median_ms(sql(text.format(" NOT INDEXED"), *params), repeat=3)
            verdict = "met" if api_ms < TARGET_MS else "NOT met"
            print(
                f"{name:30} {api_ms:8.2f}ms {raw_ms:7.2f}ms {unindexed_ms:7.1f}ms "
                f"{raw_ms / unindexed_ms:12.3f}x {api_ms / full_scan:13.3f}x  {verdict}"
            )
        print(f"\n(trials(run_id) returns {args.per_run:,} decoded records per call)")
        raw.close()
        store.close()


if __name__ == "__main__":
    main()
