"""A race on a recording (``explorer.replay.race``), summarised per strategy for its table and
plot: the median best across seeds, how close it came to the recording's best, and how many
trials each seed needed to reach 90% of it.

"Reaching 90% of the best" is running at 90% of the best schedule's speed: a latency at most
the recording's best divided by 0.9. A seed that never got there counts as needing more trials
than the race gave it, so a median over seeds is "more than N" when half of them never did.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from explorer.analysis._convergence import ConvergenceInfo, convergence_info
from explorer.core import RecordStore
from explorer.replay import RaceResult, RaceRun
from explorer.text import share

REACH = 0.9
"""The share of the recording's best speed a seed must reach (``trials_to_reach``)."""


@dataclass(frozen=True)
class RaceRow:
    """One strategy's seeds.

    Attributes:
        median_best_ms: the median over seeds of each seed's best (``None``: no seed found a
            correct schedule).
        of_best: the recording's best latency over ``median_best_ms`` (1.0: it found it).
        trials_to_reach: the median over seeds of the trials needed to reach ``REACH`` of the
            recording's best (``math.inf``: half of the seeds or more never did).
        reached: how many seeds reached it.
        exhausted: how many seeds stopped before their budget, the strategy having nothing
            more to propose (converged, or no recorded schedule left where it looks).
        median_trials: the median over seeds of the trials each ran.
        median_run_secs: the median over seeds of a run's own time: what the strategy's
            work costs (nothing is measured in a race).
    """

    strategy: str
    num_seeds: int
    median_best_ms: float | None
    of_best: float | None
    trials_to_reach: float
    reached: int
    exhausted: int
    median_trials: float
    median_run_secs: float


@dataclass(frozen=True)
class RaceInfo:
    """What the race view shows: a row per strategy and the best-so-far curves."""

    workload_key: str
    target: str
    source: str
    num_schedules: int
    coverage: float
    trials: int
    seeds: int
    secs: float
    best_ms: float | None
    reach_ms: float | None
    rows: tuple[RaceRow, ...]
    convergence: ConvergenceInfo

    @property
    def subtitle(self) -> str:
        return (
            f"replayed from {self.source}: {self.num_schedules} recorded schedules "
            f"({share(self.coverage)} of the space), {self.seeds} seeds x {self.trials} trials, "
            f"raced in {self.secs:.1f} s"
        )


def trials_to_reach(best_so_far: Sequence[float | None], reach_secs: float) -> int | None:
    """The first trial (1-based) whose best so far is at most ``reach_secs``, or ``None``."""
    for i, secs in enumerate(best_so_far, start=1):
        if secs is not None and secs <= reach_secs:
            return i
    return None


def race_info(result: RaceResult, store: RecordStore) -> RaceInfo:
    """Summarise ``result``; ``store`` is the race's own (its runs' curves)."""
    best = result.recording_best_secs
    reach = best / REACH if best else None
    rows = tuple(
        _row(name, [r for r in result.runs if r.strategy == name], best, reach)
        for name in result.strategies
    )
    curves = convergence_info(store, metric="latency_ms")
    seeds = len({r.seed for r in result.runs})
    return RaceInfo(
        workload_key=result.workload_key,
        target=result.target,
        source=result.source,
        num_schedules=result.num_schedules,
        coverage=result.coverage,
        trials=result.trials,
        seeds=seeds,
        secs=result.secs,
        best_ms=best * 1e3 if best else None,
        reach_ms=reach * 1e3 if reach else None,
        rows=rows,
        convergence=curves,
    )


def _row(name: str, runs: Sequence[RaceRun], best: float | None, reach: float | None) -> RaceRow:
    bests = [r.best_secs for r in runs if r.best_secs]
    median_best = statistics.median(bests) if bests else None
    needed = []
    for r in runs:
        n = trials_to_reach(r.best_so_far, reach) if reach else None
        needed.append(math.inf if n is None else n)
    return RaceRow(
        strategy=name,
        num_seeds=len(runs),
        median_best_ms=median_best * 1e3 if median_best else None,
        of_best=best / median_best if best and median_best else None,
        trials_to_reach=statistics.median(needed) if needed else math.inf,
        reached=sum(n != math.inf for n in needed),
        exhausted=sum(r.stopped_because == "exhausted" for r in runs),
        median_trials=statistics.median(len(r.best_so_far) for r in runs) if runs else 0,
        median_run_secs=statistics.median(r.secs for r in runs) if runs else 0.0,
    )
