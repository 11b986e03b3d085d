"""One rule counts a run's trials on every screen (issue 21): ``summarize_run`` (what `explorer
runs` and `explorer tune` print) and ``TrialTable`` (the dashboards) agree on any run, and a
trial is named by its number in its run."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.analysis import TrialTable
from explorer.storage import TrialRow, summarize_run, trial_name
from explorer.types import MeasureStatus

# One measurement: (which of a few schedules, flagged as a re-timing, the run's baseline)
_ROW = st.tuples(st.integers(0, 4), st.booleans(), st.booleans())


def rows_of(spec: list[tuple[int, bool, bool]], run_id: int = 5, first_id: int = 80) -> list:
    return [
        TrialRow(
            id=first_id + i,
            run_id=run_id,
            seq=i,
            status=MeasureStatus.OK,
            median_secs=1e-3,
            run_secs=(1e-3,),
            predicted={},
            decisions={"baseline": True} if baseline else None,
            trace_hash=0 if baseline else schedule,
            created_at=float(i),
            is_remeasure=flagged or baseline,
        )
        for i, (schedule, flagged, baseline) in enumerate(spec)
    ]


@given(st.lists(_ROW, max_size=30), st.integers(1, 5))
def test_explorer_runs_and_the_dashboards_count_every_run_alike(spec, batch):
    rows = rows_of(spec)
    summary = summarize_run(5, rows)
    table = TrialTable.from_rows(rows)
    assert (summary.num_trials, summary.num_remeasured) == (table.num_trials, table.num_remeasured)
    grown = TrialTable.empty()  # a dashboard extends its table batch by batch
    for start in range(0, len(rows), batch):
        grown = grown.extend(rows[start : start + batch])
    assert grown.is_remeasure.tolist() == table.is_remeasure.tolist()


def test_a_manual_run_of_ten_measurements_of_two_schedules_is_two_trials():
    rows = rows_of([(1, False, False)] * 5 + [(2, False, False)] * 5)
    summary = summarize_run(5, rows)
    assert (summary.num_trials, summary.num_remeasured) == (2, 8)


def test_trials_are_named_by_their_number_in_their_run():
    # the baseline, two schedules, a re-timing of the first, a start sharing the empty trace
    rows = rows_of([(0, False, True), (3, False, False), (4, False, False), (3, True, False)])
    rows.append(rows_of([(0, False, False)], first_id=90)[0])
    assert [trial_name(rows, r.id) for r in rows] == [
        "the unscheduled baseline of run 5",
        "trial 1 of run 5",
        "trial 2 of run 5",
        "a re-measurement of trial 1 of run 5",
        "trial 3 of run 5",  # the user's start can be the unscheduled program: a trial
    ]
    with pytest.raises(KeyError, match="no measurement 7"):
        trial_name(rows, 7)
