"""``race``: several strategies, several seeds each, on one recording, in seconds.

Every run searches the recorded schedules only (``Recording.space``) and is answered by the
recording (``Recording.measurer``): a replayed trial costs no build and no timing, so what a
race measures is the strategies' choices, seed by seed. Runs are stored, marked as replayed, in
a store of the race's own (in memory unless named), never among real measurements.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from explorer._tune_budget import check_budget, check_int
from explorer.errors import ExplorerError
from explorer.replay._recording import Recording
from explorer.search import STRATEGIES
from explorer.storage import RecordStore, get_store
from explorer.tuner import Tuner

MAX_SEEDS = 100
DEFAULT_STRATEGIES = ("random", "autotvm", "evolutionary", "droplet", "evolutionary+droplet")


@dataclass(frozen=True)
class RaceRun:
    """One strategy, one seed.

    Attributes:
        best_so_far: after each trial, the fastest correct latency so far (``None`` before
            the first correct one), in seconds.
        stopped_because: ``budget``, or ``exhausted`` when the strategy found nothing more
            to propose among the recorded schedules.
    """

    strategy: str
    seed: int
    run_id: int
    best_so_far: tuple[float | None, ...]
    stopped_because: str

    @property
    def best_secs(self) -> float | None:
        return self.best_so_far[-1] if self.best_so_far else None


@dataclass(frozen=True)
class RaceResult:
    """A race's runs, and what it raced on."""

    workload_key: str
    target: str
    source: str
    num_schedules: int
    coverage: float
    recording_best_secs: float | None
    trials: int
    runs: tuple[RaceRun, ...]
    secs: float

    @property
    def strategies(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.strategy for r in self.runs))


@dataclass(frozen=True)
class RaceProgress:
    """Sent after each run of a race."""

    done: int
    total: int
    run: RaceRun


def race(
    recording: Recording,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    *,
    seeds: int = 10,
    trials: int = 64,
    store: RecordStore | None = None,
    batch_size: int = 8,
    on_progress: Callable[[RaceProgress], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> RaceResult:
    """Race ``strategies`` with seeds ``0..seeds-1`` for ``trials`` trials each on ``recording``.

    Raises:
        ExplorerError: an unknown strategy, a bad count, or a stop before any run ended.
    """
    check_int("seeds", seeds, minimum=1)
    if seeds > MAX_SEEDS:
        raise ExplorerError(f"seeds must be at most {MAX_SEEDS} (got {seeds})")
    check_budget(trials, None, 0)
    names = list(dict.fromkeys(strategies))
    if not names:
        raise ExplorerError("a race needs at least one strategy")
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise ExplorerError(
            f"unknown strategy {unknown[0]!r}; choose among {', '.join(sorted(STRATEGIES))}"
        )
    store = store if store is not None else get_store(":memory:")
    space = recording.space()
    measurer = recording.measurer()
    # No re-timing at the end: a recording has nothing new to say about a schedule.
    tuner = Tuner(measurer=measurer, store=store, batch_size=batch_size, confirm_top=0)
    started = time.monotonic()
    runs: list[RaceRun] = []
    total = len(names) * seeds
    for seed in range(seeds):  # seed-major: a stopped race still compares every strategy
        for name in names:
            if should_stop():
                break
            result = tuner.run(
                recording.workload,
                recording.target,
                name,
                max_trials=trials,
                seed=seed,
                space=space,
                should_stop=should_stop,
            )
            run_id = result.run.id
            run = RaceRun(name, seed, run_id, _best_so_far(store, run_id), result.stopped_because)
            runs.append(run)
            if on_progress is not None:
                on_progress(RaceProgress(len(runs), total, run))
    if not runs:
        raise ExplorerError("the race was stopped before any run ended")
    return RaceResult(
        workload_key=recording.workload.key(),
        target=str(recording.target),
        source=recording.source,
        num_schedules=recording.num_schedules,
        coverage=recording.coverage,
        recording_best_secs=recording.best_secs,
        trials=trials,
        runs=tuple(runs),
        secs=time.monotonic() - started,
    )


def _best_so_far(store: RecordStore, run_id: int) -> tuple[float | None, ...]:
    best: float | None = None
    out = []
    for t in store.trials(run_id=run_id):
        if t.is_remeasure:
            continue
        secs = t.result.median_secs
        if t.result.is_ok and secs and (best is None or secs < best):
            best = secs
        out.append(best)
    return tuple(out)
