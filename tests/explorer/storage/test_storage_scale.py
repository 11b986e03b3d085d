"""100k trials: the dashboard queries return the right answers at scale.

Timings are measured against a baseline in ``benchmarks/bench_storage.py``, not asserted here.
"""

from __future__ import annotations

import math
import sqlite3

import pytest

from explorer.core import Candidate, MeasureResult
from explorer.storage import NewTrial, SQLiteStore
from explorer.types import MeasureStatus

NUM_RUNS, PER_RUN, BATCH = 20, 5000, 2500


def _secs(run: int, i: int) -> float | None:
    """A deterministic, unsorted latency; every 13th trial fails."""
    if (i + run) % 13 == 0:
        return None
    return 1e-4 * (1 + ((i * 7919 + run * 104729) % 100003) / 100003)


@pytest.fixture(scope="module")
def big(tmp_path_factory, workload, other_workload, target, other_target, make_trial):
    path = tmp_path_factory.mktemp("big") / "records.db"
    combos = [(w, t) for w in (workload, other_workload) for t in (target, other_target)]
    store = SQLiteStore(path)
    runs = []
    for r in range(NUM_RUNS):
        w, t = combos[r % len(combos)]
        run = store.create_run(w, t, "random", settings={"r": r})
        runs.append(run)
        proto = make_trial(w, t, trace=r % 4).candidate
        for start in range(0, PER_RUN, BATCH):
            batch = []
            for i in range(start, start + BATCH):
                secs = _secs(r, i)
                result = (
                    MeasureResult(MeasureStatus.OK, (secs,), flops=w.flops())
                    if secs is not None
                    else MeasureResult(MeasureStatus.RUN_ERROR, error_msg="crashed")
                )
                cand = Candidate(w, t, proto.trace, {"i": i})
                batch.append(NewTrial(cand, result, {"xgb": float(i), "random": -float(i)}))
            store.add_trials(run.id, batch)
    yield store, runs, path
    store.close()


def test_counts(big):
    store, runs, _ = big
    assert store.count_trials() == NUM_RUNS * PER_RUN
    assert all(store.count_trials(run_id=run.id) == PER_RUN for run in runs)


def test_best_so_far_matches_a_python_running_minimum(big):
    store, runs, _ = big
    for r in (0, 7, NUM_RUNS - 1):
        curve = store.best_so_far(runs[r].id)
        expected, best = [], math.inf
        for i in range(PER_RUN):
            secs = _secs(r, i)
            best = min(best, math.inf if secs is None else secs)
            expected.append(best)
        assert curve.seq == tuple(range(PER_RUN))
        assert curve.best_secs == tuple(expected)


def test_best_k_per_workload_and_target(big):
    store, runs, _ = big
    for r in range(4):  # one run of each (workload, target) combination
        w, t = runs[r].workload, runs[r].target
        same = [i for i, run in enumerate(runs) if run.workload == w and run.target == t]
        expected = sorted(
            (s, run_i, i)
            for run_i in same
            for i in range(PER_RUN)
            if (s := _secs(run_i, i)) is not None
        )[:10]
        best = store.best(w, t, k=10)
        assert [b.median_secs for b in best] == [e[0] for e in expected]
        assert [(b.run_id, b.seq) for b in best] == [(runs[e[1]].id, e[2]) for e in expected]
        assert all(b.candidate.workload == w and b.candidate.target == t for b in best)


def test_trials_of_a_run_come_back_in_order_with_predictions(big):
    store, runs, _ = big
    trials = store.trials(run_id=runs[5].id)
    assert len(trials) == PER_RUN
    assert [t.seq for t in trials] == list(range(PER_RUN))
    assert [t.candidate.decisions["i"] for t in trials] == list(range(PER_RUN))
    assert trials[123].predicted == {"xgb": 123.0, "random": -123.0}
    failures = [t for t in trials if t.status is not MeasureStatus.OK]
    assert len(failures) == sum(_secs(5, i) is None for i in range(PER_RUN))


def test_the_dashboard_queries_use_indexes(big):
    _, runs, path = big
    conn = sqlite3.connect(path)

    def plan(sql: str, *args: object) -> str:
        rows = conn.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall()
        return " | ".join(r[-1] for r in rows)

    best = plan(
        "SELECT id FROM trials WHERE workload_key = ? AND target_key = ? AND status = 'ok' "
        "AND median_secs IS NOT NULL ORDER BY median_secs, id LIMIT 10",
        "w",
        "t",
    )
    assert "USING INDEX trials_best" in best and "TEMP B-TREE" not in best
    per_run = plan("SELECT id FROM trials WHERE run_id = ? ORDER BY seq", 1)
    assert "INDEX sqlite_autoindex_trials_1" in per_run and "TEMP B-TREE" not in per_run
    conn.close()
