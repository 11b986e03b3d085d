"""What a run amounts to: its trial count and its best schedule, read the same way everywhere.

``explorer tune`` (through ``Tuner``) and ``explorer runs`` both report a run through
``summarize_run``, so they cannot disagree. Three rules:

* Re-measurements (the re-timings of the best candidates at the end of a run, the run's
  baseline, the unscheduled program, and any schedule the run measured before:
  ``explorer.storage._counting``) are measurements, not trials: they are not counted, and spend
  no budget.
* The best is the schedule with the lowest median over *all* its timings in the run (the
  original trial and every re-timing pooled). Once some schedules were re-timed, only those
  compete (a single lucky timing cannot win), and one whose re-timing failed is out.
* The baseline (the unscheduled program, ``decisions["baseline"]``) is what every answer must
  beat: with any conclusive timing it always competes, confirmed or not, so a run never calls
  a schedule slower than doing nothing its best. When nothing beat it, it is the answer.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from explorer.storage._base import TrialRow
from explorer.storage._counting import remeasurements
from explorer.storage._marks import BASELINE_MARK, has_mark


@dataclass(frozen=True)
class RunSummary:
    """A run's trial count and best schedule.

    Attributes:
        run_id: The run.
        num_trials: Its trials, re-measurements not counted (what its budget counts).
        num_remeasured: Its re-measurements.
        best_trial_id: The first trial of the best schedule (``None`` without a success).
        best_secs: That schedule's median over all its timings in the run.
        is_confirmed: Whether the best was re-timed (the run ended its search normally).
        baseline_secs: The unscheduled program's median over all its timings in the run
            (``None`` for a run without a baseline, or whose baseline gave no timing).
    """

    run_id: int
    num_trials: int
    num_remeasured: int
    best_trial_id: int | None
    best_secs: float | None
    is_confirmed: bool
    baseline_secs: float | None = None

    @property
    def speedup_over_baseline(self) -> float | None:
        """How many times faster the best is than the unscheduled program (1.0: it is it)."""
        if not self.baseline_secs or not self.best_secs:
            return None
        return self.baseline_secs / self.best_secs


def summarize_run(run_id: int, rows: Sequence[TrialRow]) -> RunSummary:
    """The summary of run ``run_id`` from its ``trial_rows`` (in insertion order)."""
    first: dict[int, TrialRow] = {}
    timings: dict[int, list[float]] = {}
    remeasured_ok: set[int] = set()
    remeasure_failed: set[int] = set()
    for row in rows:
        key = row.trace_hash
        first.setdefault(key, row)
        if row.is_ok:
            timings.setdefault(key, []).extend(row.run_secs)
        if row.is_remeasure and first[key] is not row:
            # A re-timing; the baseline's first measurement confirms nothing.
            (remeasured_ok if row.is_ok else remeasure_failed).add(key)
    confirmed = remeasured_ok - remeasure_failed
    baseline = next((r.trace_hash for r in rows if has_mark(r.decisions, BASELINE_MARK)), None)
    contenders = confirmed or set(timings)
    if baseline is not None and baseline in timings:
        contenders = contenders | {baseline}
    best_key = min(
        (k for k in contenders if timings.get(k)),
        key=lambda k: (statistics.median(timings[k]), first[k].id),
        default=None,
    )
    # Counted by the one rule every screen uses (``explorer.storage._counting``).
    num_remeasured = sum(remeasurements(rows))
    return RunSummary(
        run_id=run_id,
        num_trials=len(rows) - num_remeasured,
        num_remeasured=num_remeasured,
        best_trial_id=None if best_key is None else first[best_key].id,
        best_secs=None if best_key is None else statistics.median(timings[best_key]),
        is_confirmed=best_key is not None and best_key in confirmed,
        baseline_secs=(
            statistics.median(timings[baseline])
            if baseline is not None and timings.get(baseline)
            else None
        ),
    )
