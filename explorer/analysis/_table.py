"""Trials as columns: what the per-trial analyses read, small enough to keep for 100k trials.

A decoded ``TrialRecord`` carries its whole trace (about 27 KB of Python objects for a 64^3
matmul), so 100k of them take ~3 GB and make every later garbage collection crawl. The analyses
only need a handful of fields per trial, so a ``TrialTable`` keeps those as NumPy columns plus the
distinct knob decisions; a dashboard builds one per (workload, target) from the store's
``trial_rows`` (no trace decoded) and extends it batch by batch instead of re-reading the database.

Re-measurements: a trial whose trace (``TrialRow.trace_hash``) already appeared earlier in the same
run re-times a schedule the run had measured (the ``Tuner`` re-measures its best candidates at the
end of a run; a hand-made schedule measured twice). It is a measurement but not a new point of
the search, so the analyses keep it off the trials axis and out of trial budgets and counts, and
say how many there were. The run's baseline (the unscheduled program, which the ``Tuner``
measures beside every search: ``TrialTable.is_baseline``) is one too: measured, never a trial.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from explorer.core import BASELINE_MARK, START_MARK, TrialRecord, TrialRow, has_mark
from explorer.storage import is_remeasurement
from explorer.types import MeasureStatus

STATUSES: tuple[MeasureStatus, ...] = tuple(MeasureStatus)
"""``TrialTable.status_codes`` index into this tuple."""

_STATUS_CODE = {s: i for i, s in enumerate(STATUSES)}


@dataclass(frozen=True, slots=True)
class Decision:
    """A trial's knob decisions, hashable: the sketch when the search recorded it, and one value
    per sampling instruction (tile factors as tuples)."""

    sketch: int | None
    values: tuple[Hashable, ...]


@dataclass(frozen=True, slots=True, eq=False)
class TrialTable:
    """One row per trial, in the order the records were given (columns are read-only arrays).

    Attributes:
        ids: trial ids.
        run_ids: the run of each trial.
        seqs: position of each trial within its run.
        status_codes: index into ``STATUSES``.
        latency_secs: median latency; NaN unless the trial succeeded with a positive timing.
        created_at: when each trial was stored (unix seconds).
        trace_hashes: ``TrialRow.trace_hash`` of each trial.
        is_remeasure: whether the row is a re-measurement, not a trial (stored as one, the
            run's baseline, or a trace measured earlier in its run: the rule of
            ``explorer.storage.is_remeasurement``); rows must come in order within each run for
            this to hold.
        is_baseline: whether the row measures its run's baseline, the unscheduled program.
        is_start: whether the row measures its run's start, the user's own schedule.
        predicted: cost model name -> predicted score per trial (NaN where that model made no
            prediction); higher means faster, as the ``CostModel`` contract says.
        decision_ids: index into ``decisions``; -1 when the trial recorded none.
        decisions: the distinct decisions, in order of first appearance.

    Example:
        >>> table = TrialTable.from_rows(store.trial_rows(run_id=1))  # doctest: +SKIP
        >>> table = table.extend(batch)  # a new table, the old one unchanged  # doctest: +SKIP
    """

    ids: NDArray[np.int64]
    run_ids: NDArray[np.int64]
    seqs: NDArray[np.int64]
    status_codes: NDArray[np.int8]
    latency_secs: NDArray[np.float64]
    created_at: NDArray[np.float64]
    trace_hashes: NDArray[np.int64]
    is_remeasure: NDArray[np.bool_]
    is_baseline: NDArray[np.bool_]
    is_start: NDArray[np.bool_]
    predicted: Mapping[str, NDArray[np.float64]]
    decision_ids: NDArray[np.int64]
    decisions: tuple[Decision, ...]
    _decision_index: dict[Decision, int] = field(default_factory=dict, repr=False)
    _traces_seen: dict[int, set[int]] = field(default_factory=dict, repr=False)  # run -> hashes

    @staticmethod
    def empty() -> TrialTable:
        return TrialTable.from_rows(())

    @staticmethod
    def from_rows(rows: Iterable[TrialRow | TrialRecord]) -> TrialTable:
        """A table of ``RecordStore.trial_rows`` (records are accepted too, and converted)."""
        return _build(_EMPTY_PARTS, _as_rows(rows))

    @staticmethod
    def from_records(records: Iterable[TrialRecord | TrialRow]) -> TrialTable:
        """A table of decoded records (rows are accepted too)."""
        return TrialTable.from_rows(records)

    def extend(self, rows: Iterable[TrialRow | TrialRecord]) -> TrialTable:
        """This table with ``rows`` (or records) appended; the caller avoids duplicates (see
        ``has``) and appends each run's trials in order."""
        new = _as_rows(rows)
        if not new:
            return self
        return _build(self, new)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def is_ok(self) -> NDArray[np.bool_]:
        """Rows whose trial succeeded with a usable timing."""
        return np.isfinite(self.latency_secs)

    @property
    def num_trials(self) -> int:
        """Rows that are not re-measurements."""
        return int(len(self) - self.num_remeasured)

    @property
    def num_remeasured(self) -> int:
        return int(np.count_nonzero(self.is_remeasure))

    @property
    def num_failed(self) -> int:
        """Failed trials, re-measurements and inconclusive (unchecked) timings not counted."""
        return int(np.count_nonzero(~self.is_ok & ~self.is_remeasure & ~self.is_inconclusive))

    @property
    def is_unchecked(self) -> NDArray[np.bool_]:
        """Rows timed elsewhere (MetaSchedule) and never checked against NumPy: neither a
        success (their timing is not used) nor a failure."""
        unchecked: NDArray[np.bool_] = self.status_codes == _STATUS_CODE[MeasureStatus.UNCHECKED]
        return unchecked

    @property
    def is_inconclusive(self) -> NDArray[np.bool_]:
        """Rows that are neither a success nor a failure (unchecked ones)."""
        return self.is_unchecked

    @property
    def num_unchecked(self) -> int:
        """Unchecked trials, re-measurements not counted."""
        return int(np.count_nonzero(self.is_unchecked & ~self.is_remeasure))

    def has(self, trial_ids: Sequence[int]) -> NDArray[np.bool_]:
        """Which of ``trial_ids`` are already rows of this table."""
        return np.isin(np.asarray(trial_ids, dtype=np.int64), self.ids)

    def trial_id_at(self, run_id: int, seq: int) -> int | None:
        """The id of trial ``seq`` of run ``run_id``, if it is in the table."""
        hits = np.flatnonzero((self.run_ids == run_id) & (self.seqs == seq))
        return int(self.ids[hits[0]]) if len(hits) else None


def as_table(records: Iterable[TrialRecord | TrialRow] | TrialTable) -> TrialTable:
    """Accept any form wherever an analysis reads trials."""
    return records if isinstance(records, TrialTable) else TrialTable.from_rows(records)


def freeze(value: Any) -> Hashable:
    """A hashable twin of a JSON value (lists become tuples)."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    scalar: Hashable = value  # str, int, float, bool or None
    return scalar


def decision_of(decisions: Any) -> Decision | None:
    """Read a ``Candidate.decisions`` in any of the forms the searches write.

    ``KnobSpace.materialize`` and the MetaSchedule matcher write ``{"sketch", "point"?,
    "values"}``; ``DesignSpace.sample`` writes the bare list of values (sketch unknown).
    """
    if isinstance(decisions, dict):
        values = decisions.get("values")
        if not isinstance(values, list | tuple):
            return None
        sketch = decisions.get("sketch")
        return Decision(sketch if isinstance(sketch, int) else None, _freeze_all(values))
    if isinstance(decisions, list | tuple):
        return Decision(None, _freeze_all(decisions))
    return None


def _freeze_all(values: Iterable[Any]) -> tuple[Hashable, ...]:
    return tuple(freeze(v) for v in values)


class _Parts:
    """The empty table's columns (a module constant; ``_build`` only reads them)."""

    ids = run_ids = seqs = decision_ids = trace_hashes = np.zeros(0, dtype=np.int64)
    status_codes = np.zeros(0, dtype=np.int8)
    latency_secs = created_at = np.zeros(0, dtype=np.float64)
    is_remeasure = is_baseline = is_start = np.zeros(0, dtype=bool)
    predicted: Mapping[str, np.ndarray] = {}
    decisions: tuple[Decision, ...] = ()
    _decision_index: dict[Decision, int] = {}
    _traces_seen: dict[int, set[int]] = {}


_EMPTY_PARTS = _Parts()


def _as_rows(items: Iterable[TrialRow | TrialRecord]) -> list[TrialRow]:
    return [r if isinstance(r, TrialRow) else TrialRow.from_record(r) for r in items]


def _build(base: Any, rows: list[TrialRow]) -> TrialTable:
    n = len(rows)
    ids = np.fromiter((r.id for r in rows), dtype=np.int64, count=n)
    run_ids = np.fromiter((r.run_id for r in rows), dtype=np.int64, count=n)
    seqs = np.fromiter((r.seq for r in rows), dtype=np.int64, count=n)
    codes = np.fromiter((_STATUS_CODE[r.status] for r in rows), dtype=np.int8, count=n)
    latency = np.fromiter((_latency(r) for r in rows), dtype=np.float64, count=n)
    created = np.fromiter((r.created_at for r in rows), dtype=np.float64, count=n)
    hashes = np.fromiter((r.trace_hash for r in rows), dtype=np.int64, count=n)
    baseline = np.fromiter((has_mark(r.decisions, BASELINE_MARK) for r in rows), bool, count=n)
    start = np.fromiter((has_mark(r.decisions, START_MARK) for r in rows), bool, count=n)

    # Step 1. Predictions: a model seen for the first time gets NaN for every earlier row.
    old_n = len(base.ids)
    names = sorted({*base.predicted, *(k for r in rows for k in r.predicted)})
    predicted = {}
    for name in names:
        new = np.fromiter(
            (float(r.predicted.get(name, np.nan)) for r in rows), dtype=np.float64, count=n
        )
        old = base.predicted.get(name)
        predicted[name] = _frozen(
            np.concatenate([old if old is not None else np.full(old_n, np.nan), new])
        )

    # Step 2. Decisions: distinct ones are kept once, rows point at them.
    index = dict(base._decision_index)
    decisions = list(base.decisions)
    dec_ids = np.empty(n, dtype=np.int64)
    for i, r in enumerate(rows):
        d = decision_of(r.decisions)
        if d is None:
            dec_ids[i] = -1
            continue
        j = index.get(d)
        if j is None:
            j = index[d] = len(decisions)
            decisions.append(d)
        dec_ids[i] = j

    # Step 3. Re-measurements: the runs' trace sets are copied only where this batch adds to
    # them (the base table keeps its own).
    seen = dict(base._traces_seen)
    copied: set[int] = set()
    again = np.zeros(n, dtype=bool)
    for i, r in enumerate(rows):
        if r.run_id not in copied:
            seen[r.run_id] = set(seen.get(r.run_id, ()))
            copied.add(r.run_id)
        again[i] = is_remeasurement(r, seen[r.run_id])  # the rule `explorer runs` counts by

    return TrialTable(
        ids=_frozen(np.concatenate([base.ids, ids])),
        run_ids=_frozen(np.concatenate([base.run_ids, run_ids])),
        seqs=_frozen(np.concatenate([base.seqs, seqs])),
        status_codes=_frozen(np.concatenate([base.status_codes, codes])),
        latency_secs=_frozen(np.concatenate([base.latency_secs, latency])),
        created_at=_frozen(np.concatenate([base.created_at, created])),
        trace_hashes=_frozen(np.concatenate([base.trace_hashes, hashes])),
        is_remeasure=_frozen(np.concatenate([base.is_remeasure, again])),
        is_baseline=_frozen(np.concatenate([base.is_baseline, baseline])),
        is_start=_frozen(np.concatenate([base.is_start, start])),
        predicted=predicted,
        decision_ids=_frozen(np.concatenate([base.decision_ids, dec_ids])),
        decisions=tuple(decisions),
        _decision_index=index,
        _traces_seen=seen,
    )


def _latency(row: TrialRow) -> float:
    secs = row.median_secs
    return float(secs) if row.is_ok and secs and secs > 0 else np.nan


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def pick_rows(
    latency_secs: np.ndarray, max_points: int, *, best_share: float = 0.25
) -> np.ndarray:
    """Row indices (ascending) to draw when there are more than ``max_points``.

    The fastest ``best_share * max_points`` rows are always kept (they are what a user clicks to
    open), the rest is an evenly spaced, deterministic sample, so the cloud keeps its shape and a
    refresh does not make points jump around.
    """
    n = len(latency_secs)
    if n <= max_points:
        return np.arange(n)
    num_best = int(max_points * best_share)
    best = np.argsort(latency_secs, kind="stable")[:num_best]
    rest = np.setdiff1d(np.arange(n), best, assume_unique=True)
    spaced = rest[np.linspace(0, len(rest) - 1, max_points - num_best).round().astype(np.int64)]
    return np.union1d(best, spaced)
