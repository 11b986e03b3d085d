"""The batch loop shared by every strategy: ask -> measure -> store -> tell, within budgets.

Budgets, cancellation, resumption and the final re-measurement live here so a strategy is only
about which points to propose (Kernel Tuner's CostFunc idea).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from explorer.errors import SearchError
from explorer.measure import Measurer, confirm_best, trace_key
from explorer.search import SearchStrategy, make_strategy
from explorer.search._start import start_trial
from explorer.space import DesignSpace
from explorer.storage._base import NewTrial, RecordStore, RunInfo, TrialRecord
from explorer.target import Target
from explorer.workloads import Workload

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuneProgress:
    """Sent to ``on_progress`` after every stored batch."""

    run_id: int
    num_trials: int
    max_trials: int
    elapsed_secs: float
    best_secs: float | None
    batch: tuple[TrialRecord, ...]


@dataclass(frozen=True)
class TuneResult:
    """How a run ended.

    ``best`` is the trial with the lowest *confirmed* median: the top candidates are measured
    again at the end and their repeats pooled, so one lucky timing cannot win.

    ``start`` is the user's own schedule when the strategy was given one (the run's reference,
    re-measured with the best candidates): ``best`` is never slower than it, because the start
    itself is the answer when nothing measured faster.
    """

    run: RunInfo
    num_trials: int
    best: TrialRecord | None
    best_secs: float | None
    stopped_because: str  # "budget" | "time" | "exhausted" | "cancelled"
    start: TrialRecord | None = None
    start_secs: float | None = None

    @property
    def speedup_over_start(self) -> float | None:
        """How many times faster ``best`` is than the start (1.0: the start is the answer)."""
        if not self.start_secs or not self.best_secs:
            return None
        return self.start_secs / self.best_secs

    @property
    def best_is_start(self) -> bool:
        return self.start is not None and self.best is not None and self.best.id == self.start.id

    @property
    def best_gflops(self) -> float | None:
        if self.best is None or not self.best_secs:
            return None
        return self.best.candidate.workload.flops() / self.best_secs / 1e9


class Tuner:
    """Runs a strategy against a measurer, streaming every trial into a store.

    Args:
        measurer: builds and times candidates (never raises for bad ones).
        store: where runs and trials go; a batch is committed before the next is asked.
        batch_size: candidates per ask/measure round.
        confirm_top: how many of the best candidates are re-measured at the end (0: none).

    Example:
        >>> tuner = Tuner(measurer=LocalMeasurer(), store=get_store(":memory:"))  # doctest: +SKIP
        >>> tuner.run(get_workload("matmul"), Target.local_cpu(), "random", max_trials=16)
    """

    def __init__(
        self,
        *,
        measurer: Measurer,
        store: RecordStore,
        batch_size: int = 8,
        confirm_top: int = 3,
    ):
        if batch_size < 1:
            raise ValueError(f"Tuner.batch_size must be at least 1 (got {batch_size})")
        self.measurer = measurer
        self.store = store
        self.batch_size = batch_size
        self.confirm_top = confirm_top

    def run(
        self,
        workload: Workload,
        target: Target,
        strategy: str | SearchStrategy,
        *,
        max_trials: int,
        max_secs: float | None = None,
        seed: int = 0,
        should_stop: Callable[[], bool] = lambda: False,
        on_progress: Callable[[TuneProgress], None] | None = None,
        resume_run_id: int | None = None,
    ) -> TuneResult:
        """Search until ``max_trials`` trials are stored, ``max_secs`` pass, the strategy runs
        dry or ``should_stop()`` turns true (checked between batches).

        With ``resume_run_id`` the run continues: its stored trials count against the budget and
        are told to the strategy first, so nothing is measured twice.
        """
        if max_trials < 1:
            raise SearchError(f"max_trials must be at least 1 (got {max_trials})")
        strategy = make_strategy(strategy)
        space = DesignSpace.of(workload, target)
        if resume_run_id is None:
            run = self.store.create_run(
                workload,
                target,
                strategy.name or type(strategy).__name__,
                settings={
                    **strategy.settings(),
                    "seed": seed,
                    "max_trials": max_trials,
                    "max_secs": max_secs,
                    "batch_size": self.batch_size,
                },
            )
            history: list[TrialRecord] = []
        else:
            run = self._check_resumable(resume_run_id, workload, target, strategy)
            # A stopped run ends with re-timings of its best candidates (same traces): they are
            # not trials of the search, so they neither count against the budget nor get told
            # to the strategy twice.
            history = _unique_traces(self.store.trials(run_id=run.id))
        strategy.reset(space, rng=np.random.default_rng(seed), history=history, store=self.store)

        started = time.monotonic()
        num_trials = len(history)
        best = min((r.median_secs for r in history if r.result.is_ok), default=None)
        stopped_because = "budget"
        status = "failed"
        try:
            while num_trials < max_trials:
                if should_stop():
                    stopped_because = "cancelled"
                    break
                if max_secs is not None and time.monotonic() - started >= max_secs:
                    stopped_because = "time"
                    break
                candidates = strategy.ask(min(self.batch_size, max_trials - num_trials))
                if not candidates:
                    stopped_because = "exhausted"
                    break
                results = self.measurer.measure(candidates)
                predicted = strategy.predictions(candidates)
                batch = self.store.add_trials(
                    run.id,
                    [
                        NewTrial(c, r, p)
                        for c, r, p in zip(candidates, results, predicted, strict=True)
                    ],
                )
                strategy.tell(batch)
                num_trials += len(batch)
                ok = [r.median_secs for r in batch if r.result.is_ok and r.median_secs]
                if ok:
                    best = min([*ok, *([best] if best else [])])
                if on_progress is not None:
                    on_progress(
                        TuneProgress(
                            run.id,
                            num_trials,
                            max_trials,
                            time.monotonic() - started,
                            best,
                            tuple(batch),
                        )
                    )
            status = "cancelled" if stopped_because == "cancelled" else "finished"
        finally:
            # Whatever happens (KeyboardInterrupt included) the stored batches stay; the run is
            # marked so a later call can resume it.
            run = self.store.finish_run(run.id, status)
        best_record, best_secs, start, start_secs = self._confirm_best(run)
        return TuneResult(
            run, num_trials, best_record, best_secs, stopped_because, start, start_secs
        )

    def _check_resumable(
        self, run_id: int, workload: Workload, target: Target, strategy: SearchStrategy
    ) -> RunInfo:
        run = self.store.get_run(run_id)
        if run.workload != workload or run.target.key() != target.key():
            raise SearchError(
                f"run {run_id} tuned {run.workload.key()} on {run.target.key()}, not "
                f"{workload.key()} on {target.key()}; it cannot be resumed with these"
            )
        if strategy.name and run.strategy != strategy.name:
            raise SearchError(
                f"run {run_id} used strategy {run.strategy!r}, not {strategy.name!r}"
            )
        return run

    def _confirm_best(
        self, run: RunInfo
    ) -> tuple[TrialRecord | None, float | None, TrialRecord | None, float | None]:
        """The best trial and its confirmed median, then the start's (``None`` without one).

        The start (the user's schedule) is always re-timed beside the top candidates, in the
        same interleaved rounds, so "faster than your start" compares like with like.
        """
        stored = self.store.trials(run_id=run.id)
        start = start_trial(stored)
        trials = _unique_traces(t for t in stored if t.result.is_ok)
        if not trials:
            return None, None, start, None
        if self.confirm_top < 1:
            best = min(trials, key=lambda t: t.median_secs or math.inf)
            return best, best.median_secs, start, start.median_secs if start else None
        chosen = sorted(trials, key=lambda t: t.median_secs or math.inf)[: self.confirm_top]
        if start is not None and start.result.is_ok and all(t is not start for t in chosen):
            chosen.append(start)
        pairs = confirm_best(
            self.measurer,
            [t.candidate for t in chosen],
            [t.result for t in chosen],
            top_k=len(chosen),
            rounds=1,
        )
        by_candidate = {id(t.candidate): t for t in trials}
        # The re-timings are real measurements: store them (only the new repeats) beside the
        # originals, so the database shows what the final ranking rests on.
        new = []
        for cand, pooled in pairs:
            old = by_candidate[id(cand)].result
            fresh = pooled.run_secs[len(old.run_secs) :] if pooled.is_ok else ()
            new.append(NewTrial(cand, replace(pooled, run_secs=fresh) if pooled.is_ok else pooled))
        self.store.add_trials(run.id, new)
        start_secs = None
        if start is not None and start.result.is_ok:
            start_secs = next(p.median_secs for c, p in pairs if c is start.candidate)
        cand, pooled = pairs[0]
        if not pooled.is_ok:
            log.warning("re-measuring the best candidates failed: %s", pooled.error_msg)
            return None, None, start, start_secs
        return by_candidate[id(cand)], pooled.median_secs, start, start_secs


def _unique_traces(trials: Iterable[TrialRecord]) -> list[TrialRecord]:
    seen: set[str] = set()
    out = []
    for t in trials:
        key = trace_key(t.candidate.trace)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out
