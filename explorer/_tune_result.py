"""How a ``Tuner`` run ended: ``TuneResult`` (kept apart so ``tuner.py`` stays about the loop)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from explorer.core import RunInfo, TrialRecord
from explorer.measure import trace_key
from explorer.storage import RunSummary
from explorer.text import format_secs

STOP_REASONS = {
    "budget": "the trial budget was used",
    "time": "the time limit was reached",
    "exhausted": "the strategy had no new schedule to try",
    "cancelled": "it was stopped",
}
"""``TuneResult.stopped_because`` in words."""

# How a verdict was reached, said after its numbers: whether every round of the run's
# side-by-side confirmation agreed (``RunSummary.is_conclusive``).
_PAIRED = {
    True: "every round of the side-by-side re-timing agreed",
    False: (
        "inconclusive: the rounds of the side-by-side re-timing disagreed (the machine's load "
        "changed), so the faster reading is kept"
    ),
    None: "not re-timed side by side",
}


@dataclass(frozen=True)
class TuneResult:
    """How a run ended.

    ``best`` is the trial with the fastest *confirmed* reading: the top candidates, the start and
    the baseline are re-timed side by side at the end, in interleaved rounds, and only those
    readings are compared (``explorer.storage.summarize_run``), so neither one lucky timing nor
    a moment of load elsewhere can decide. ``summary`` says whether the rounds agreed
    (``is_conclusive``).

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
    summary: RunSummary | None = None

    @property
    def is_confirmed(self) -> bool:
        """Whether the best was re-timed side by side with the others at the end."""
        return self.summary is not None and self.summary.is_confirmed

    @property
    def is_conclusive(self) -> bool | None:
        """Whether every round of the confirmation agreed on the verdict against the
        unscheduled program (``None``: no paired comparison, see ``RunSummary``)."""
        return None if self.summary is None else self.summary.is_conclusive

    @property
    def is_conclusive_over_start(self) -> bool | None:
        """``is_conclusive``, against the user's start."""
        return None if self.summary is None else self.summary.is_conclusive_over_start

    @property
    def num_failed(self) -> int:
        """Trials that gave no timing (build, run or check failures, timeouts)."""
        return 0 if self.summary is None else self.summary.num_failed

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

    def verdicts(self, name: Callable[[int], str]) -> list[str]:
        """The best against the unscheduled program, then against the start (a run given
        one), a sentence each: what ``explorer tune`` prints and the Search tab says.
        ``name`` names a trial by its id (``explorer.storage.trial_name``: "trial 12 of run
        5")."""
        lines = [self._baseline_verdict(name)]
        if self.start is not None:
            lines.append(self._start_verdict(name(self.start.id), self.start))
        return lines

    def _baseline_verdict(self, name: Callable[[int], str]) -> str:
        baseline = self.baseline
        if baseline is None:
            return "no unscheduled baseline in this run (made before runs measured one)"
        if self.baseline_secs is None:
            return f"{name(baseline.id)} gave no timing: {baseline.status.value}"
        how = _PAIRED[self.is_conclusive]
        if self.best_is_baseline:
            return (
                f"no schedule beat the unscheduled program ({format_secs(self.baseline_secs)}; "
                f"{how}); it is the answer"
            )
        return (
            f"{self.speedup_over_baseline:.2f}x faster than unscheduled "
            f"({format_secs(self.baseline_secs)}; {how})"
        )

    def _start_verdict(self, name: str, start: TrialRecord) -> str:
        if self.start_secs is None:
            return f"your start ({name}) gave no timing: {start.status.value}"
        how = _PAIRED[self.is_conclusive_over_start]
        if self.best_is_start:
            return (
                f"no faster schedule found: your start ({name}, "
                f"{format_secs(self.start_secs)}; {how}) is the answer"
            )
        return (
            f"{self.speedup_over_start:.2f}x faster than your start ({name}, "
            f"{format_secs(self.start_secs)}; {how})"
        )

    @property
    def best_gflops(self) -> float | None:
        if self.best is None or not self.best_secs:
            return None
        return self.best.candidate.workload.flops() / self.best_secs / 1e9
