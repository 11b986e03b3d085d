"""``race``: several strategies, several seeds each, on one recording, without measuring.

Every run searches the recorded schedules only (``Recording.space``) and is answered by the
recording (``Recording.measurer``): a replayed trial costs no build and no timing, so what a
race measures is the strategies' choices, seed by seed, and what it costs is their own work
(a random run a fraction of a second, MetaSchedule's evolutionary search seconds). Runs are
stored, marked as replayed, in a store of the race's own (in memory unless named), never among
real measurements.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from explorer._tune_budget import check_budget, check_int
from explorer.errors import ExplorerError
from explorer.replay._recording import Recording
from explorer.search import STRATEGIES
from explorer.space import DesignSpace
from explorer.storage import NewTrial, RecordStore, get_store, remeasurements
from explorer.target import available_cores
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
        secs: the run's own time in its process: the strategy's work, nothing measured.
    """

    strategy: str
    seed: int
    run_id: int
    best_so_far: tuple[float | None, ...]
    stopped_because: str
    secs: float

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
    workers: int | None = None,
    on_progress: Callable[[RaceProgress], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> RaceResult:
    """Race ``strategies`` with seeds ``0..seeds-1`` for ``trials`` trials each on ``recording``.

    The runs are independent: ``workers`` processes (default: one per available core) run
    them side by side, each with its own copy of the recording, and every run is stored in
    ``store`` as it ends (``on_progress`` then). A run's trials are the same whichever
    process ran it. ``should_stop()`` ends the race after the runs under way.

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
    jobs = [(name, seed) for seed in range(seeds) for name in names]  # seed-major: a stopped
    # race still compares every strategy
    if workers is None:
        workers = min(available_cores(), len(jobs))
    check_int("workers", workers, minimum=1)
    started = time.monotonic()
    runs: list[RaceRun] = []

    def done(ran: _Ran) -> None:
        run = _stored(store, recording, ran)
        runs.append(run)
        if on_progress is not None:
            on_progress(RaceProgress(len(runs), len(jobs), run))

    if workers == 1:
        space = recording.space()
        for name, seed in jobs:
            if should_stop():
                break
            done(_run_one(recording, space, name, seed, trials, batch_size, should_stop))
    else:
        _race_in_processes(recording, jobs, trials, batch_size, workers, done, should_stop)
    order = {job: i for i, job in enumerate(jobs)}
    runs.sort(key=lambda r: order[(r.strategy, r.seed)])
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


@dataclass(frozen=True)
class _Ran:
    """One run as a worker ran it, to be stored by the race's process."""

    strategy: str
    seed: int
    settings: dict[str, Any]
    environment: dict[str, Any]
    status: str
    trials: tuple[NewTrial, ...]
    stopped_because: str
    secs: float


_recording: Recording | None = None  # the worker's copy (``_init_worker``)
_space: DesignSpace | None = None


def _init_worker(recording: Recording) -> None:
    global _recording, _space
    _recording, _space = recording, recording.space()


def _run_in_worker(name: str, seed: int, trials: int, batch_size: int) -> _Ran:
    assert _recording is not None and _space is not None
    return _run_one(_recording, _space, name, seed, trials, batch_size)


def _run_one(
    recording: Recording,
    space: DesignSpace,
    name: str,
    seed: int,
    trials: int,
    batch_size: int,
    should_stop: Callable[[], bool] = lambda: False,
) -> _Ran:
    """One run on the recording, in a store of its own (stored by the race's process)."""
    started = time.monotonic()
    store = get_store(":memory:")
    # No re-timing at the end: a recording has nothing new to say about a schedule.
    tuner = Tuner(measurer=recording.measurer(), store=store, batch_size=batch_size, confirm_top=0)
    result = tuner.run(
        recording.workload,
        recording.target,
        name,
        max_trials=trials,
        seed=seed,
        space=space,
        should_stop=should_stop,
    )
    run = result.run
    stored = store.trials(run_id=run.id)
    return _Ran(
        name,
        seed,
        dict(run.settings),
        dict(run.environment),
        str(run.status),
        tuple(NewTrial(t.candidate, t.result, dict(t.predicted), t.is_remeasure) for t in stored),
        result.stopped_because,
        time.monotonic() - started,
    )


def _race_in_processes(
    recording: Recording,
    jobs: Sequence[tuple[str, int]],
    trials: int,
    batch_size: int,
    workers: int,
    done: Callable[[_Ran], None],
    should_stop: Callable[[], bool],
) -> None:
    # spawn, not fork: the race's process may hold TVM's and XGBoost's threads.
    with ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_init_worker,
        initargs=(recording,),
    ) as pool:
        pending = {
            pool.submit(_run_in_worker, name, seed, trials, batch_size) for name, seed in jobs
        }
        try:
            while pending:
                finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in finished:
                    done(future.result())
                if should_stop():
                    for future in pending:
                        future.cancel()
                    pending = {f for f in pending if not f.cancelled()}
        finally:
            for future in pending:
                future.cancel()


def _stored(store: RecordStore, recording: Recording, ran: _Ran) -> RaceRun:
    run = store.create_run(
        recording.workload,
        recording.target,
        ran.strategy,
        settings=ran.settings,
        environment=ran.environment,
    )
    store.add_trials(run.id, list(ran.trials))
    store.finish_run(run.id, ran.status)
    best_so_far = _best_so_far(store, run.id)
    return RaceRun(ran.strategy, ran.seed, run.id, best_so_far, ran.stopped_because, ran.secs)


def _best_so_far(store: RecordStore, run_id: int) -> tuple[float | None, ...]:
    """After each trial of the run, its fastest correct median so far: re-measurements and
    the unscheduled baseline are not trials (``remeasurements``, the rule every screen uses)."""
    rows = store.trial_rows(run_id=run_id)
    best: float | None = None
    out = []
    for row, again in zip(rows, remeasurements(rows), strict=True):
        if again:
            continue
        secs = row.median_secs
        if row.is_ok and secs and (best is None or secs < best):
            best = secs
        out.append(best)
    return tuple(out)
