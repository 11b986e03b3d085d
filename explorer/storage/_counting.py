"""Which of a run's measurements are its trials, and how a screen names one.

One rule for every count the explorer shows: ``summarize_run`` (``explorer runs``, ``explorer
tune``, the reports, the NAS panel) and ``explorer.analysis.TrialTable`` (the dashboards) both
ask ``is_remeasurement``, so no two screens count one run differently. A measurement is a
*re-measurement*, not a trial, when it

* is stored as one (``is_remeasure``: the ``Tuner``'s re-timings of its best candidates),
* measures the run's baseline, the unscheduled program (``decisions["baseline"]``), or
* measures a schedule (a trace) the run measured before: pressing Measure five times on one
  schedule in the editor's manual run makes one trial and four re-measurements.

A trial's number is its position among its run's trials, from 1: ``"trial 12 of run 5"``. The
database-wide id ("trial 88") says nothing about the run, so screens name trials this way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from explorer.core import BASELINE_MARK, RecordStore, TrialRecord, TrialRow, has_mark


def is_remeasurement(row: TrialRow, seen: set[int]) -> bool:
    """Whether ``row`` is a re-measurement rather than a trial of its run.

    Args:
        row: the measurement.
        seen: the trace hashes of the run's trials before ``row``; a trial's hash is added.
    """
    if has_mark(row.decisions, BASELINE_MARK):
        return True  # never a trial, and its empty trace may be a start's (a trial) too
    if row.is_remeasure or row.trace_hash in seen:
        return True
    seen.add(row.trace_hash)
    return False


def remeasurements(rows: Iterable[TrialRow]) -> list[bool]:
    """``is_remeasurement`` of each of one run's rows, given in insertion order."""
    seen: set[int] = set()
    return [is_remeasurement(row, seen) for row in rows]


def count_trials(store: RecordStore, run_id: int | None = None) -> tuple[int, int]:
    """How many trials and how many re-measurements ``store`` holds (in run ``run_id``, or in
    every run), by the rule above: what `explorer runs` and the dashboards count. (A run's
    budget counts ``RecordStore.count_trials(remeasures=False)``: only the flagged ones apart.)
    """
    by_run: dict[int, list[TrialRow]] = defaultdict(list)
    for row in store.trial_rows(run_id=run_id):
        by_run[row.run_id].append(row)
    again = sum(sum(remeasurements(sorted(rows, key=lambda r: r.seq))) for rows in by_run.values())
    total = sum(len(rows) for rows in by_run.values())
    return total - again, again


def trial_name(rows: Sequence[TrialRow], trial_id: int) -> str:
    """How a screen names measurement ``trial_id`` of the run whose rows are ``rows``.

    ``"trial 12 of run 5"``; ``"the unscheduled baseline of run 5"``; ``"a re-measurement of
    trial 3 of run 5"``.

    Raises:
        KeyError: no row has that id.

    Example:
        >>> from explorer.types import MeasureStatus
        >>> def row(id, trace, decisions=None):
        ...     return TrialRow(id, 5, id, MeasureStatus.OK, 1e-3, (1e-3,), {}, decisions, trace,
        ...                     0.0, is_remeasure=decisions is not None)
        >>> rows = [row(86, 1, {"baseline": True}), row(87, 2), row(88, 3), row(89, 3)]
        >>> [trial_name(rows, i) for i in (86, 88, 89)]  # doctest: +NORMALIZE_WHITESPACE
        ['the unscheduled baseline of run 5', 'trial 2 of run 5',
         'a re-measurement of trial 2 of run 5']
    """
    seen: set[int] = set()
    number: dict[int, int] = {}  # trace hash -> its first trial's number
    for row in rows:
        again = is_remeasurement(row, seen)
        if not again:
            number[row.trace_hash] = len(number) + 1
        if row.id != trial_id:
            continue
        run = f"run {row.run_id}"
        if has_mark(row.decisions, BASELINE_MARK):
            return f"the unscheduled baseline of {run}"
        first = number.get(row.trace_hash)
        if not again:
            return f"trial {first} of {run}"
        return (
            f"a re-measurement of trial {first} of {run}"
            if first
            else f"a re-measurement in {run}"
        )
    raise KeyError(f"no measurement {trial_id} among the {len(rows)} rows given")


def name_trial(store: RecordStore, record: TrialRecord) -> str:
    """``trial_name`` of a stored record (its run's rows are read: no trace is decoded)."""
    return trial_name(store.trial_rows(run_id=record.run_id), record.id)
