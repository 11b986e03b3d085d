"""TrialTable: trials as columns, extended batch by batch."""

from __future__ import annotations

import math

import numpy as np

from explorer.analysis import STATUSES, TrialTable
from explorer.analysis._table import pick_rows
from explorer.types import MeasureStatus


def test_columns_match_the_records(store, add_run):
    _, records = add_run("autotvm", [2.0, None, 1.0], predicted=[{"a": 1.0}, {}, {"a": 3.0}])
    t = TrialTable.from_records(records)
    assert len(t) == 3 and t.num_failed == 1
    assert list(t.ids) == [r.id for r in records]
    assert list(t.seqs) == [0, 1, 2]
    assert STATUSES[t.status_codes[1]] is MeasureStatus.BUILD_ERROR
    assert t.latency_secs[0] == 2e-3 and math.isnan(t.latency_secs[1])
    assert np.isnan(t.predicted["a"][1]) and t.predicted["a"][2] == 3.0
    assert not t.ids.flags.writeable


def test_extend_pads_new_models_and_shares_decisions(store, add_run):
    _, first = add_run("autotvm", [1.0, 2.0], predicted=[{"a": 1.0}, {"a": 2.0}])
    _, second = add_run("autotvm", [3.0, 4.0], predicted=[{"b": 5.0}, {}])
    t0 = TrialTable.from_records(first)
    t = t0.extend(second)
    assert len(t0) == 2 and len(t) == 4  # the old table is unchanged
    assert sorted(t.predicted) == ["a", "b"]
    assert np.isnan(t.predicted["b"][:2]).all() and t.predicted["b"][2] == 5.0
    # Both runs used the same first two candidates: their decisions are stored once.
    assert len(t.decisions) == 2 and list(t.decision_ids) == [0, 1, 0, 1]
    assert list(t.has([first[0].id, 10**9])) == [True, False]
    assert t.trial_id_at(second[0].run_id, 1) == second[1].id
    assert t.trial_id_at(second[0].run_id, 7) is None
    assert t.extend([]) is t


def test_pick_rows_keeps_the_fastest_and_spreads_the_rest():
    lat = np.arange(100, 0, -1, dtype=float)  # the fastest is last
    rows = pick_rows(lat, 20)
    assert len(rows) == 20 and list(rows) == sorted(rows)
    assert 99 in rows and 0 in rows
    assert list(pick_rows(lat[:5], 20)) == [0, 1, 2, 3, 4]


def test_rows_and_records_make_the_same_table(store, add_run):
    run, records = add_run("autotvm", [2.0, None, 1.0], predicted=[{"a": 1.0}, {}, {"a": 3.0}])
    from_rows = TrialTable.from_rows(store.trial_rows(run_id=run.id))
    from_records = TrialTable.from_records(records)
    for column in ("ids", "seqs", "status_codes", "created_at", "trace_hashes", "is_remeasure"):
        assert list(getattr(from_rows, column)) == list(getattr(from_records, column)), column
    assert np.array_equal(from_rows.latency_secs, from_records.latency_secs, equal_nan=True)
    assert from_rows.decisions == from_records.decisions
    assert list(from_rows.decision_ids) == list(from_records.decision_ids)


def test_a_trace_seen_earlier_in_its_run_is_a_remeasurement(store, add_run):
    # Trials 0-3 are new schedules; 4 and 5 time schedules 0 and 2 again (as the Tuner's final
    # confirmation does); another run measuring schedule 0 is a trial of that run.
    a, first = add_run("random", [4.0, None, 2.0, 3.0, 1.5, 2.1], traces=[0, 1, 2, 3, 0, 2])
    b, second = add_run("random", [5.0, 6.0], traces=[0, 9])
    t = TrialTable.from_records(first + second)
    assert list(t.is_remeasure) == [False] * 4 + [True, True] + [False, False]
    assert len(t) == 8 and t.num_trials == 6 and t.num_remeasured == 2
    assert t.num_failed == 1
    # Extended batch by batch, a re-measurement is still recognised across batches.
    grown = TrialTable.empty()
    for record in first + second:
        grown = grown.extend([record])
    assert list(grown.is_remeasure) == list(t.is_remeasure)
    # Extending leaves the old table's view of the run's traces alone.
    head = TrialTable.from_records(first[:2])
    assert head.extend([first[2]]).num_remeasured == 0
    assert list(head.extend([first[5]]).is_remeasure) == [False, False, False]  # 2 is new here
