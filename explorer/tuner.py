"""The batch loop shared by every strategy: ask -> measure -> store -> tell, within budgets.

Budgets, cancellation, resumption and the final re-measurement live here so a strategy is only
about which points to propose (Kernel Tuner's CostFunc idea).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from explorer._tune_budget import RunBudget, check_budget, check_int
from explorer._tune_result import TuneResult
from explorer._tune_resume import PRIOR_RUNS, check_same_run, prior_ids_of, strategy_of
from explorer.core import (
    BASELINE_MARK,
    NewTrial,
    RecordStore,
    RunInfo,
    RunStatus,
    TrialRecord,
    TrialRow,
    has_mark,
)
from explorer.errors import RunInUseError, SearchError
from explorer.measure import Candidate, Measurer, trace_key
from explorer.search import (
    SearchStrategy,
    baseline_candidate,
    baseline_trial,
    is_baseline,
    make_strategy,
    start_trial,
)
from explorer.space import DesignSpace
from explorer.storage import confirmation_rows, environment, summarize_run
from explorer.target import Target
from explorer.workloads import Workload

log = logging.getLogger(__name__)

POOL = "pool_points"
"""The settings key of how many points a run's space had, when it searched ``within`` some."""


@dataclass(frozen=True)
class TuneProgress:
    """Sent to ``on_progress`` after every stored batch."""

    run_id: int
    num_trials: int
    max_trials: int
    elapsed_secs: float
    best_secs: float | None
    batch: tuple[TrialRecord, ...]


class Tuner:
    """Runs a strategy against a measurer, streaming every trial into a store.

    Args:
        measurer: builds and times candidates (never raises for bad ones).
        store: where runs and trials go; a batch is committed before the next is asked.
        batch_size: candidates per ask/measure round.
        confirm_top: how many of the best candidates are re-measured at the end (0: none).
        confirm_rounds: how many interleaved rounds re-time them, beside the baseline and
            the start (``Measurer.measure_paired``).

    Example:
        On this machine the measurer is ``LocalMeasurer()`` (what ``explorer tune`` uses; close
        it, or use it in a ``with`` block). Here a ``ReplayMeasurer`` answers from the shipped
        recording of real measurements, so the example runs in a second:

        >>> import tempfile
        >>> from explorer.storage import get_store
        >>> from explorer.testing import recordings
        >>> folder = tempfile.TemporaryDirectory()
        >>> recording = recordings.open_recording(folder.name)  # a private copy
        >>> measurer = recordings.replay_measurer(recording, recordings.TINY)
        >>> target = recordings.recorded_trials(recording, recordings.TINY)[0].candidate.target
        >>> tuner = Tuner(measurer=measurer, store=get_store(":memory:"), batch_size=4)
        >>> result = tuner.run(recordings.TINY, target, "random", max_trials=8, seed=0)
        >>> result.num_trials, result.stopped_because, result.best is not None
        (8, 'budget', True)
        >>> recording.close(); folder.cleanup()
    """

    def __init__(
        self,
        *,
        measurer: Measurer,
        store: RecordStore,
        batch_size: int = 8,
        confirm_top: int = 3,
        confirm_rounds: int = 3,
    ):
        check_int("Tuner batch_size", batch_size, minimum=1)
        check_int("Tuner confirm_top", confirm_top, minimum=0)
        check_int("Tuner confirm_rounds", confirm_rounds, minimum=1)
        self.measurer = measurer
        self.store = store
        self.batch_size = batch_size
        self.confirm_top = confirm_top
        self.confirm_rounds = confirm_rounds
        self.run_id: int | None = None
        """The run of the latest ``run``/``resume`` call, set as soon as it exists (so that a
        caller interrupted mid-run can name the run to resume)."""

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
        prior_runs: Sequence[int] = (),
        space: DesignSpace | None = None,
    ) -> TuneResult:
        """Search until ``max_trials`` trials are stored, ``max_secs`` pass, the strategy runs
        dry or ``should_stop()`` turns true (checked between batches).

        Before the search the workload's unscheduled program is measured as the run's baseline
        (``explorer.search._baseline``: stored, but not a trial, so it spends neither trials
        nor searching time); at the end it is re-timed beside the best candidates, and it is
        the answer when no schedule beat it. The strategy is told ``max_trials``
        (``reset(budget=...)``), so that settings given as ``"auto"`` scale to it.

        Nothing is stored until the search has started: a strategy that refuses its options or
        start point raises before any run exists. A ``KeyboardInterrupt`` (Ctrl-C, or SIGTERM
        in the CLI) ends the run as ``interrupted``, resumable.

        With ``resume_run_id`` the run continues (see ``resume``); the arguments must then be
        the run's own (anything else raises ``SearchError``).

        ``prior_runs``: earlier runs of the same workload and target (a model tune's earlier
        chunks of a task) whose trials the strategy is told before its first batch, as a
        resumed run's own: a model-guided strategy starts from what they taught it, and no
        strategy proposes their schedules again. They are not this run's trials: they spend
        none of its budget and are never its best. The run's settings keep their ids, so a
        resume tells them again. A run that does not exist, or is of another workload or
        target, raises ``SearchError`` before anything is stored.

        ``space``: the design space to search, when not the workload's whole one: a race on a
        recording passes ``DesignSpace.within`` its recorded points. The run's settings say how
        many points it had (``POOL``); such a run cannot be resumed.
        """
        check_budget(max_trials, max_secs, seed)
        _check_space(space, workload, target, resume_run_id)
        prior_ids = [int(r) for r in prior_runs]
        if resume_run_id is not None:
            run = self._get_run(resume_run_id)
            instance = make_strategy(strategy)
            check_same_run(run, workload, target, instance, max_trials, max_secs, seed, prior_ids)
            return self.resume(
                resume_run_id,
                # A name means the run's own strategy, hyper-parameters included.
                strategy=None if isinstance(strategy, str) else instance,
                should_stop=should_stop,
                on_progress=on_progress,
            )
        prior = self._prior_trials(prior_ids, workload, target)
        strategy = make_strategy(strategy)
        pool = {} if space is None or space.pool is None else {POOL: len(space.pool)}
        space = space if space is not None else DesignSpace.of(workload, target)
        strategy.reset(
            space,
            rng=np.random.default_rng(seed),
            history=prior,
            store=self.store,
            budget=int(max_trials),
        )
        secs = None if max_secs is None else float(max_secs)  # NumPy's numbers: plain ones
        budget = RunBudget(int(max_trials), secs, int(seed), self.batch_size)
        carried = {PRIOR_RUNS: prior_ids} if prior_ids else {}
        run = self.store.create_run(
            workload,
            target,
            strategy.name or type(strategy).__name__,
            settings={**strategy.settings(), **budget.settings(), **carried, **pool},
            environment={**environment(), **self.measurer.run_environment(target)},
        )
        self.run_id = run.id
        return self._search(run, strategy, budget, [], should_stop, on_progress, prior)

    def resume(
        self,
        run_id: int,
        *,
        strategy: SearchStrategy | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        on_progress: Callable[[TuneProgress], None] | None = None,
    ) -> TuneResult:
        """Continue run ``run_id`` where it stopped, with its own workload, target, strategy,
        settings, budget, batch size and seed (all read from the run).

        The run must not be owned by another live process (``RunInUseError``); this process
        owns it until the call returns. The strategy is rebuilt from the run's settings unless
        given (an instance, for strategies with settings that are not stored). Its stored batches
        are replayed through ``ask``/``tell`` with the run's seed, so the strategy continues in
        the very state an uninterrupted run would have reached: with a deterministic measurer a
        resumed run measures the same points as one never stopped. (If the replay diverges,
        e.g. the strategy learns from other runs in the store, the stored trials are told to a
        fresh strategy instead and nothing is measured twice.) A run whose budget is spent and
        whose best was re-timed already ends at once, without re-timing again.
        """
        # Step 1. Everything that can refuse the resume, while the run is left as it is.
        run = self._get_run(run_id)
        if POOL in run.settings:
            raise SearchError(
                f"run {run.id} searched only the {run.settings[POOL]} schedules of a recording: "
                "it cannot be resumed (race again instead)"
            )
        budget = RunBudget.of(run)
        if strategy is None:
            strategy = strategy_of(run, self.store.trials(run_id=run.id))
        space = DesignSpace.of(run.workload, run.target)
        before = run.status
        # Step 2. Own the run (one owner per run), then read its trials: none can be added now.
        run = self.store.claim_run(run.id)
        self.run_id = run.id
        try:
            searched = [t for t in self.store.trials(run_id=run.id) if not t.is_remeasure]
            prior = self._prior_trials(prior_ids_of(run), run.workload, run.target)
            if len(searched) < budget.max_trials:
                history = self._replay(strategy, space, budget, searched, prior)
            else:  # nothing left to ask: no need to rebuild the strategy's state
                history = _unique_traces(searched)
        except BaseException as exc:
            # Nothing was measured: the run gets its status back (Ctrl-C: interrupted).
            interrupted = isinstance(exc, KeyboardInterrupt) or before is RunStatus.RUNNING
            self.store.finish_run(run.id, RunStatus.INTERRUPTED if interrupted else before)
            raise
        return self._search(run, strategy, budget, history, should_stop, on_progress, prior)

    def _search(
        self,
        run: RunInfo,
        strategy: SearchStrategy,
        budget: RunBudget,
        history: list[TrialRecord],
        should_stop: Callable[[], bool],
        on_progress: Callable[[TuneProgress], None] | None,
        prior: Sequence[TrialRecord] = (),
    ) -> TuneResult:
        """The batch loop, on a run this process owns; ``finish_run`` releases it.
        ``prior``: the prior runs' trials (their best cuts the baseline: ``_measure_baseline``)."""
        started = time.monotonic()
        active_before = run.active_secs  # searching time of the run's earlier sessions

        def active_secs() -> float:
            return active_before + time.monotonic() - started

        num_trials = len(history)
        num_new = 0
        best = _fastest(history, None)
        stopped_because = "budget"
        status = RunStatus.FAILED
        error: BaseException | None = None
        searched_secs: float | None = None
        try:
            if self._measure_baseline(run, _fastest([*history, *prior], None)):
                # The baseline is not a trial: its time is not the search's either.
                started = time.monotonic()
            while num_trials < budget.max_trials:
                if should_stop():
                    stopped_because = "cancelled"
                    break
                if budget.max_secs is not None and active_secs() >= budget.max_secs:
                    stopped_because = "time"
                    break
                candidates = strategy.ask(min(budget.batch_size, budget.max_trials - num_trials))
                if not candidates:
                    stopped_because = "exhausted"
                    break
                batch = self._measure_batch(run, strategy, candidates, best)
                self.store.heartbeat(run.id, active_secs())
                strategy.tell(batch)
                num_trials += len(batch)
                num_new += len(batch)
                best = _fastest(batch, best)
                if on_progress is not None:
                    on_progress(
                        TuneProgress(
                            run.id,
                            num_trials,
                            budget.max_trials,
                            time.monotonic() - started,
                            best,
                            tuple(batch),
                        )
                    )
            searched_secs = active_secs()  # re-timing the best is not searching time
            # The run stays `running` until its best is re-timed: a re-timing that waits (a
            # fleet whose devices went away) or fails must not read as `finished` meanwhile.
            # A run resumed with nothing left to do keeps its confirmation: re-timing it again
            # at every resume would only pile up re-measurements.
            if num_new or not confirmation_rows(self.store.trial_rows(run_id=run.id)):
                self._confirm_best(run)
            status = RunStatus.CANCELLED if stopped_because == "cancelled" else RunStatus.FINISHED
        except BaseException as exc:
            status, error = _status_after(exc), exc
            raise
        finally:
            # Whatever happens the stored batches stay; the run is marked (Ctrl-C: interrupted)
            # and released, so a later call can resume it. A lost lease is not ours to end.
            if not isinstance(error, RunInUseError):
                with contextlib.suppress(RunInUseError):
                    self.store.heartbeat(
                        run.id, active_secs() if searched_secs is None else searched_secs
                    )
                run = self.store.finish_run(run.id, status)
        return self._result(run, stopped_because)

    def _measure_batch(
        self,
        run: RunInfo,
        strategy: SearchStrategy,
        candidates: list[Candidate],
        best: float | None,
    ) -> list[TrialRecord]:
        """Measure ``candidates`` and store them as trials of ``run``, with the strategy's
        predictions. Without a best yet (``math.inf``), the measurer cuts hopeless kernels
        against the batch's own fastest."""
        results = self.measurer.measure(candidates, best_secs=best or math.inf)
        predicted = strategy.predictions(candidates)
        return self.store.add_trials(
            run.id,
            [NewTrial(c, r, p) for c, r, p in zip(candidates, results, predicted, strict=True)],
        )

    def _result(self, run: RunInfo, stopped_because: str) -> TuneResult:
        """The run's summary (exactly what `explorer runs` shows), with its trials."""
        rows = self.store.trial_rows(run_id=run.id)
        summary = summarize_run(run.id, rows)

        def trial(trial_id: int | None) -> TrialRecord | None:
            return None if trial_id is None else self.store.get_trial(trial_id)

        start = start_trial(self.store.trials(run_id=run.id))
        return TuneResult(
            run,
            summary.num_trials,
            trial(summary.best_trial_id),
            summary.best_secs,
            stopped_because,
            start,
            summary.start_secs if start is not None else None,
            trial(_baseline_id(rows)),
            summary.baseline_secs,
            summary=summary,
        )

    def _measure_baseline(self, run: RunInfo, best: float | None) -> bool:
        """Measure the unscheduled program as the run's baseline, unless the run has one;
        whether it was measured now.

        ``best``: the fastest schedule known already (of the prior runs: a model tune's
        earlier chunks of the task), which cuts the baseline short as a search's hopeless
        kernel (``Measurer.measure(best_secs=...)``): a model tune timed its task's unscheduled
        program in full before every chunk, 1.1 s a call on a BERT layer's largest matmul.
        The confirmation re-times it beside the best all the same, and that decides; so it is
        measured as a reference (``Measurer.measure(reference=True)``): from 0.1 s a call on,
        2 repeats, or its check's call alone from a second (the unscheduled matmul 1024: one
        call of 5 s instead of two before every search).

        Stored as a measurement that is not a trial (``is_remeasure``): it spends no budget, is
        not counted and is never told to the strategy, so a resumed run replays exactly the
        same batches. A baseline that fails or times out (a naive kernel can be slow) is stored
        with its status, like any measurement: data, not a failed run.
        """
        if _baseline_id(self.store.trial_rows(run_id=run.id)) is not None:
            return False
        candidate = baseline_candidate(run.workload, run.target)
        [result] = self.measurer.measure([candidate], best_secs=best, reference=True)
        self.store.add_trials(run.id, [NewTrial(candidate, result, is_remeasure=True)])
        return True

    def _replay(
        self,
        strategy: SearchStrategy,
        space: DesignSpace,
        budget: RunBudget,
        searched: list[TrialRecord],
        prior: list[TrialRecord],
    ) -> list[TrialRecord]:
        """Bring a fresh strategy to the state it had after the stored batches (told ``prior``
        first, as at the run's start); returns the history the search continues from."""
        strategy.reset(
            space,
            rng=np.random.default_rng(budget.seed),
            history=prior,
            store=self.store,
            budget=budget.max_trials,
        )
        done = 0
        while done < len(searched):
            asked = strategy.ask(min(budget.batch_size, budget.max_trials - done))
            stored = searched[done : done + len(asked)]
            same = len(asked) == len(stored) and all(
                trace_key(c.trace) == trace_key(t.candidate.trace)
                for c, t in zip(asked, stored, strict=True)
            )
            if not asked or not same:
                log.warning(
                    "run %d: replaying its %d stored trials through %s diverged at trial %d; "
                    "continuing from the stored trials instead (the rest of the run may differ "
                    "from an uninterrupted one)",
                    searched[0].run_id, len(searched), strategy.name, done,
                )  # fmt: skip
                history = _unique_traces(searched)
                strategy.reset(
                    space,
                    rng=np.random.default_rng(budget.seed),
                    history=_unique_traces([*prior, *history]),
                    store=self.store,
                    budget=budget.max_trials,
                )
                return history
            strategy.tell(stored)
            done += len(asked)
        return list(searched)

    def _prior_trials(
        self, run_ids: Sequence[int], workload: Workload, target: Target
    ) -> list[TrialRecord]:
        """The trials (re-measurements and baselines left out) of ``run_ids``, which must be
        runs of ``workload`` on ``target``."""
        trials: list[TrialRecord] = []
        for run_id in run_ids:
            run = self._get_run(run_id)
            if run.workload != workload or run.target.key() != target.key():
                raise SearchError(
                    f"prior run {run_id} searched {run.workload.key()} on {run.target}, not "
                    f"{workload.key()} on {target}: only runs of the same workload and target "
                    "can be carried over"
                )
            trials += [t for t in self.store.trials(run_id=run_id) if not t.is_remeasure]
        return _unique_traces(trials)

    def _get_run(self, run_id: int) -> RunInfo:
        check_int("run_id", run_id, minimum=1)
        try:
            return self.store.get_run(int(run_id))
        except KeyError:
            where = getattr(self.store, "path", None)
            if where in (None, ":memory:"):
                where = "this record store"
            raise SearchError(f"there is no run {run_id} in {where}") from None

    def confirm(self, run_id: int) -> TuneResult:
        """Re-time run ``run_id``'s best candidates, its start and its baseline side by side
        once more (as at the end of a search; this confirmation then decides) and return the
        run as it stands after it: for a verdict the previous confirmation could not settle
        (``TuneResult.is_conclusive``), or one whose re-timing failed."""
        run = self._get_run(run_id)
        self._confirm_best(run)
        return self._result(run, "budget")

    def _confirm_best(self, run: RunInfo) -> None:
        """Re-time the top candidates, the start and the baseline side by side, in
        ``confirm_rounds`` interleaved rounds (``Measurer.measure_paired``), and store every
        round's reading as a re-measurement, all in one batch: the run's confirmation.

        The start (the user's schedule) and the baseline (the unscheduled program) are always
        re-timed beside the top candidates, so "faster than your start" and "faster than
        unscheduled" are read from readings taken under the same load, round by round
        (``summarize_run``): on a busy machine the same kernel reads 2x apart from one minute
        to the next, so readings from the search itself never decide.
        """
        stored = self.store.trials(run_id=run.id)
        if self.confirm_top < 1:
            return
        searched = _unique_traces(
            t for t in stored if t.result.is_ok and not is_baseline(t.candidate)
        )
        chosen = sorted(searched, key=lambda t: t.median_secs or math.inf)[: self.confirm_top]
        for reference in (start_trial(stored), baseline_trial(stored)):
            if reference is None or not reference.result.run_secs:  # failed: nothing to re-time
                continue
            if trace_key(reference.candidate.trace) not in {
                trace_key(t.candidate.trace) for t in chosen
            }:
                chosen.append(reference)
        if not chosen:
            return
        per_round = self.measurer.measure_paired(
            [t.candidate for t in chosen], rounds=self.confirm_rounds
        )
        # Round-robin, as they were timed: a schedule's k-th row is its reading of round k.
        batch = [
            NewTrial(t.candidate, results[k], is_remeasure=True)
            for k in range(max(len(r) for r in per_round))
            for t, results in zip(chosen, per_round, strict=True)
            if k < len(results)
        ]
        self.store.add_trials(run.id, batch)
        if not any(new.result.is_ok for new in batch):
            log.warning("re-measuring the best candidates failed: %s", batch[0].result.error_msg)


def _check_space(
    space: DesignSpace | None, workload: Workload, target: Target, resume_run_id: int | None
) -> None:
    if space is not None and (space.workload != workload or space.target != target):
        raise SearchError("the space to search is not of this workload and target")
    if space is not None and resume_run_id is not None:
        raise SearchError("a run searching part of a space cannot be resumed")


def _status_after(exc: BaseException | None) -> RunStatus:
    """How a run ends when ``exc`` stops it: Ctrl-C and SIGTERM interrupt, errors fail it."""
    return RunStatus.INTERRUPTED if isinstance(exc, KeyboardInterrupt) else RunStatus.FAILED


def _unique_traces(trials: Iterable[TrialRecord]) -> list[TrialRecord]:
    seen: set[str] = set()
    out = []
    for t in trials:
        key = trace_key(t.candidate.trace)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def _baseline_id(rows: Sequence[TrialRow]) -> int | None:
    """The id of the run's baseline measurement (read from rows: no trace decoded)."""
    return next((r.id for r in rows if has_mark(r.decisions, BASELINE_MARK)), None)


def _fastest(records: Sequence[TrialRecord], best: float | None) -> float | None:
    """The fastest median among ``records``' successes and ``best`` (``None``: none yet)."""
    timed = [secs for r in records if r.result.is_ok and (secs := r.median_secs) is not None]
    return min([*timed, *([best] if best is not None else [])], default=None)


__all__ = ["POOL", "PRIOR_RUNS", "RunBudget", "TuneProgress", "TuneResult", "Tuner", "strategy_of"]
