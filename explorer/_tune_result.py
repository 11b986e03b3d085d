"""How a ``Tuner`` run ended: ``TuneResult`` (kept apart so ``tuner.py`` stays about the loop)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.measure import trace_key
from explorer.storage._base import RunInfo, TrialRecord

STOP_REASONS = {
    "budget": "the trial budget was used",
    "time": "the time limit was reached",
    "exhausted": "the strategy had no new schedule to try",
    "cancelled": "it was stopped",
}
"""``TuneResult.stopped_because`` in words."""


@dataclass(frozen=True)
class TuneResult:
    """How a run ended.

    ``best`` is the trial with the lowest *confirmed* median: the top candidates are measured
    again at the end and their repeats pooled, so one lucky timing cannot win.

    ``start`` is the user's own schedule when the strategy was given one (the run's reference,
    re-measured with the best candidates): ``best`` is never slower than it, because the start
    itself is the answer when nothing measured faster.

    ``baseline`` is the unscheduled program, measured before every search (not a trial) and
    re-measured with the best candidates: likewise ``best`` is never slower than it, because
    the baseline itself is the answer when no schedule beat it (``best_is_baseline``).
    """

    run: RunInfo
    num_trials: int
    best: TrialRecord | None
    best_secs: float | None
    stopped_because: str  # "budget" | "time" | "exhausted" | "cancelled"
    start: TrialRecord | None = None
    start_secs: float | None = None
    baseline: TrialRecord | None = None
    baseline_secs: float | None = None

    @property
    def why_stopped(self) -> str:
        """``stopped_because`` in words: "the time limit was reached"."""
        return STOP_REASONS.get(self.stopped_because, self.stopped_because)

    @property
    def speedup_over_start(self) -> float | None:
        """How many times faster ``best`` is than the start (1.0: the start is the answer)."""
        if not self.start_secs or not self.best_secs:
            return None
        return self.start_secs / self.best_secs

    @property
    def speedup_over_baseline(self) -> float | None:
        """How many times faster ``best`` is than the unscheduled program (1.0: it is it)."""
        if not self.baseline_secs or not self.best_secs:
            return None
        return self.baseline_secs / self.best_secs

    @property
    def best_is_baseline(self) -> bool:
        """Whether no schedule beat the unscheduled program, which is then the answer."""
        return (
            self.baseline is not None
            and self.best is not None
            and trace_key(self.best.candidate.trace) == trace_key(self.baseline.candidate.trace)
        )

    @property
    def best_is_start(self) -> bool:
        return self.start is not None and self.best is not None and self.best.id == self.start.id

    @property
    def best_gflops(self) -> float | None:
        if self.best is None or not self.best_secs:
            return None
        return self.best.candidate.workload.flops() / self.best_secs / 1e9
