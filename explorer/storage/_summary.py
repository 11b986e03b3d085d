"""What a run amounts to: its trial count and its best schedule, read the same way everywhere.

``explorer tune`` (through ``Tuner``) and ``explorer runs`` both report a run through
``summarize_run``, so they cannot disagree. The rules:

* Re-measurements (the re-timings of the best candidates at the end of a run, the run's
  baseline, the unscheduled program, and any schedule the run measured before:
  ``explorer.storage._counting``) are measurements, not trials: they are not counted, and spend
  no budget.
* A run's verdict comes from its latest *confirmation*: the best candidates, the baseline and
  the user's start re-timed side by side at the end of a search, in interleaved rounds, stored
  as one batch (the re-timings after the run's last trial that share one ``created_at``; a
  schedule's k-th row in it is its reading of round k). Those readings were taken under the
  same load, so they are compared with each other only: the best is the schedule with the
  fastest confirmation reading (a round's reading is its fastest repeat; a schedule's, its
  fastest round: load only ever adds time, ``explorer.core.fastest_round``), and one whose
  re-timing failed is out.
  Readings from other moments never enter the comparison, since on a busy machine the same
  kernel reads 2x apart from one minute to the next.
* A verdict is *conclusive* when the best was faster than the reference (the baseline, or the
  runner-up when the baseline itself is the best) in every round both were timed in; rounds
  that disagree make it inconclusive, and the faster reading is kept all the same, never the
  slower schedule.
* A run without a confirmation (stopped early, or whose re-timing failed entirely) ranks every
  schedule by the median over all its timings, unconfirmed and with no verdict. The baseline,
  the unscheduled program, always competes, so a run never calls a schedule slower than doing
  nothing its best.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from explorer.core import BASELINE_MARK, START_MARK, TrialRow, has_mark
from explorer.storage._counting import remeasurements


@dataclass(frozen=True)
class RunSummary:
    """A run's trial count and best schedule.

    Attributes:
        run_id: The run.
        num_trials: Its trials, re-measurements not counted (what its budget counts).
        num_remeasured: Its re-measurements.
        best_trial_id: The first trial of the best schedule (``None`` without a success).
        best_secs: That schedule's fastest round in the confirmation (its median over all its
            timings in the run when it has no confirmation).
        is_confirmed: Whether the best was re-timed side by side with the others.
        baseline_secs: The unscheduled program's reading, read like ``best_secs`` (``None``
            for a run without a baseline, or whose baseline gave no timing).
        is_conclusive: Whether the confirmation's rounds agree that the best is faster than
            the baseline (or, when the baseline is the best, than every schedule); ``None``
            without a paired comparison (no confirmation, or no baseline in it).
        num_failed: Trials that gave no timing (build or run errors, timeouts, wrong results).
        start_secs: The user's start (a run given one), read like ``best_secs``.
        is_conclusive_over_start: ``is_conclusive``, against the start.
    """

    run_id: int
    num_trials: int
    num_remeasured: int
    best_trial_id: int | None
    best_secs: float | None
    is_confirmed: bool
    baseline_secs: float | None = None
    is_conclusive: bool | None = None
    num_failed: int = 0
    start_secs: float | None = None
    is_conclusive_over_start: bool | None = None

    @property
    def speedup_over_baseline(self) -> float | None:
        """How many times faster the best is than the unscheduled program (1.0: it is it)."""
        if not self.baseline_secs or not self.best_secs:
            return None
        return self.baseline_secs / self.best_secs


def confirmation_rows(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """The rows of the run's latest confirmation (see the module's rules), in stored order;
    empty when the run has none."""
    last_trial = max((i for i, r in enumerate(rows) if not r.is_remeasure), default=-1)
    seen = {r.trace_hash for r in rows[: last_trial + 1]}
    tail = []
    for row in rows[last_trial + 1 :]:
        if row.trace_hash in seen:  # a re-timing (a baseline's first measurement is none)
            tail.append(row)
        seen.add(row.trace_hash)
    if not tail:
        return []
    stamp = tail[-1].created_at
    return [r for r in tail if r.created_at == stamp]


def paired_readings(rows: Sequence[TrialRow]) -> dict[int, list[float | None]]:
    """Per schedule (trace hash), its fastest repeat in each round of a confirmation's
    ``rows`` (``None`` for a round that failed)."""
    readings: dict[int, list[float | None]] = {}
    for row in rows:
        fastest = min(row.run_secs) if row.is_ok and row.run_secs else None
        readings.setdefault(row.trace_hash, []).append(fastest)
    return readings


def is_faster_in_every_round(fast: list[float | None], slow: list[float | None]) -> bool | None:
    """Whether ``fast`` read below ``slow`` in every round both have a reading of; ``None``
    when they share no round."""
    pairs = [(a, b) for a, b in zip(fast, slow, strict=False) if a is not None and b is not None]
    if not pairs:
        return None
    return all(a < b for a, b in pairs)


def summarize_run(run_id: int, rows: Sequence[TrialRow]) -> RunSummary:
    """The summary of run ``run_id`` from its ``trial_rows`` (in insertion order)."""
    first: dict[int, TrialRow] = {}
    timings: dict[int, list[float]] = {}
    for row in rows:
        first.setdefault(row.trace_hash, row)
        if row.is_ok:
            timings.setdefault(row.trace_hash, []).extend(row.run_secs)
    baseline = next((r.trace_hash for r in rows if has_mark(r.decisions, BASELINE_MARK)), None)
    # Counted by the one rule every screen uses (``explorer.storage._counting``).
    again = remeasurements(rows)
    num_remeasured = sum(again)
    num_failed = sum(
        1
        for r, is_again in zip(rows, again, strict=True)
        if not is_again and not r.is_ok and not r.status.is_inconclusive
    )

    # Step 1. The latest confirmation decides, among the schedules it re-timed successfully:
    # each by its fastest round there (a round's reading is its fastest repeat). Load only
    # ever adds time, and can add it to most repeats of a round of a parallel kernel (its
    # threads waited for a busy core's time slice): the fastest is the least disturbed.
    confirmed = paired_readings(confirmation_rows(rows))
    paired = {
        key: min(readings)
        for key, rounds in confirmed.items()
        if None not in rounds and (readings := [x for x in rounds if x is not None])
    }
    secs_of = dict(paired)
    if not secs_of:  # Step 2. None: every schedule by all its timings, the baseline too.
        secs_of = {key: statistics.median(secs) for key, secs in timings.items() if secs}

    # Step 3. The baseline always competes, so a run never calls a schedule slower than doing
    # nothing its best: when its re-timing failed, with all its timings (no verdict then).
    if baseline is not None and baseline not in secs_of and timings.get(baseline):
        secs_of[baseline] = statistics.median(timings[baseline])
    best_key = min(secs_of, key=lambda k: (secs_of[k], first[k].id), default=None)
    is_confirmed = best_key in paired

    # Step 4. The verdicts, round by round: the best against the baseline (against every
    # other schedule when the baseline is the best) and against the user's start.
    def verdict(reference: int | None) -> bool | None:
        if not is_confirmed or reference not in paired:
            return None
        assert best_key is not None
        if best_key != reference:
            return is_faster_in_every_round(confirmed[best_key], confirmed[reference])
        others = [
            is_faster_in_every_round(confirmed[reference], confirmed[key])
            for key in paired
            if key != reference
        ]
        return None if not others or None in others else all(others)

    start = next((r.trace_hash for r in rows if has_mark(r.decisions, START_MARK)), None)
    return RunSummary(
        run_id=run_id,
        num_trials=len(rows) - num_remeasured,
        num_remeasured=num_remeasured,
        best_trial_id=None if best_key is None else first[best_key].id,
        best_secs=None if best_key is None else secs_of[best_key],
        is_confirmed=is_confirmed,
        baseline_secs=None if baseline is None else secs_of.get(baseline),
        is_conclusive=verdict(baseline),
        num_failed=num_failed,
        start_secs=None if start is None else secs_of.get(start, _median(timings.get(start))),
        is_conclusive_over_start=verdict(start),
    )


def _median(secs: list[float] | None) -> float | None:
    return statistics.median(secs) if secs else None
