"""Tuning a whole model: one budget of trials shared by its tasks, given in chunks to the task
where the next trials should cut the network's latency most.

Two schedulers: ``round-robin`` (every task in turn, the simple baseline) and ``gradient``, the
allocation of Ansor (Zheng et al. 2020, section 6) as MetaSchedule's ``GradientBased`` task
scheduler computes it: after one chunk per task, the next chunk goes to the task whose estimated
gradient of the end-to-end latency with respect to its trials is steepest,

    grad_i = w_i * (alpha * backward_i + (1 - alpha) * forward_i)

where ``w_i`` is the task's calls per inference, ``backward_i`` the change of its best latency per
trial over its last ``window`` chunks, and ``forward_i = -best_i / trials_i`` the optimistic
guess that more trials keep paying at the average rate so far.

Every chunk is an ordinary run of a strategy of ours on the task's workload (stored, resumable,
with its baseline and its best re-timed side by side), linked to the model tune it belongs to.
A chunk carries over the task's earlier chunks (``Tuner.run(prior_runs=...)``): its strategy is
told their trials first, so a model-guided one starts from what they taught it, and none
measures a schedule of an earlier chunk again; each chunk used to start afresh.
With ``transfer`` every chunk's strategy also learns first from the database's trials of other
workloads on the target (``transfer_from="auto"``: the model's other tasks, pretraining runs),
as ``tune_relax`` shares one cost model between a network's tasks.
A tune is named ``STRATEGY/seedN/SCHEDULER`` (``STRATEGY+transfer/...`` with transfer); calling
``tune_model`` again with the same name continues it: an interrupted chunk is resumed, and the
allocation picks up from the stored runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from explorer.core import ModelRecord, ModelTask, RecordStore, RunStatus
from explorer.errors import SearchError
from explorer.machine import BUSY
from explorer.measure import Measurer
from explorer.search import make_strategy
from explorer.storage import summarize_run
from explorer.text import plural
from explorer.tuner import TuneProgress, Tuner

SCHEDULERS = ("gradient", "round-robin")
ALPHA, WINDOW = 0.2, 3  # MetaSchedule's GradientBased defaults
MIN_FIRST_CHUNK = 4


@dataclass(frozen=True)
class TaskState:
    """What the tune knows of one task: its trials so far and its best after each chunk."""

    task: ModelTask
    trials: int
    history: tuple[tuple[int, float], ...]  # (trials so far, best secs so far) after each chunk
    exhausted: bool  # the strategy ran out of points: no more chunks

    @property
    def best_secs(self) -> float | None:
        return self.history[-1][1] if self.history else self.task.untuned_secs

    def gradient(self) -> float:
        """d(network latency)/d(trials) estimated for this task (negative: more trials help)."""
        if not self.history or self.trials == 0:
            return -math.inf  # never tried: before anything else
        best = self.history[-1][1]
        before = self.history[max(0, len(self.history) - 1 - WINDOW)]
        spent = self.trials - before[0]
        backward = (best - before[1]) / spent if spent > 0 else 0.0
        forward = -best / self.trials
        return self.task.weight * (ALPHA * backward + (1 - ALPHA) * forward)


@dataclass(frozen=True)
class ModelTuneProgress:
    """Sent after every chunk: the task just tuned and the state of all."""

    tune: str
    task: str
    trials: int
    max_trials: int
    states: tuple[TaskState, ...]
    busy_elsewhere: float | None = None  # others' share of the CPUs during the chunk

    @property
    def busy_note(self) -> str | None:
        """One sentence when other processes used ``BUSY`` or more of the CPUs during the
        chunk just tuned, else ``None``."""
        if self.busy_elsewhere is None or self.busy_elsewhere < BUSY:
            return None
        return (
            f"Other processes used {self.busy_elsewhere:.0%} of the CPUs while {self.task} was "
            "tuned: its trials read slower than on a quiet machine and may rank its schedules "
            "wrongly (the race times the network again)."
        )

    @property
    def estimated_secs(self) -> float | None:
        """The network's latency if its tasks ran at their best times (the sum the tune
        optimises; the race measures the real thing)."""
        parts = [s.best_secs for s in self.states]
        if any(p is None for p in parts):
            return None
        return math.fsum(s.task.weight * (s.best_secs or 0.0) for s in self.states)


def tune_name(strategy: str, seed: int, scheduler: str, *, transfer: bool = False) -> str:
    return f"{strategy}{'+transfer' if transfer else ''}/seed{seed}/{scheduler}"


def tune_spent(model: ModelRecord, store: RecordStore, tune: str | None) -> int:
    """The trials the tune ``tune`` of ``model`` has measured so far (``None``: every tune of
    it; re-timings not counted): what ``tune_model``'s ``max_trials``, a total, is compared
    with, and what a race says it spent."""
    return sum(
        store.count_trials(run_id=run_id, remeasures=False)
        for run_id, _, run_tune in store.model_runs(model.id)
        if tune is None or run_tune == tune
    )


def task_states(model: ModelRecord, store: RecordStore, tune: str) -> list[TaskState]:
    """The state of every task of ``model`` in the tune ``tune``, from the stored runs."""
    runs: dict[str, list[int]] = {}
    for run_id, task_name, run_tune in store.model_runs(model.id):
        if run_tune == tune:
            runs.setdefault(task_name, []).append(run_id)
    states = []
    for task in model.tasks:
        trials, exhausted = 0, False
        history: list[tuple[int, float]] = []
        best = math.inf
        for run_id in runs.get(task.name, []):
            rows = store.trial_rows(run_id=run_id)
            summary = summarize_run(run_id, rows)
            trials += summary.num_trials
            if summary.best_secs is not None:
                best = min(best, summary.best_secs)
            if math.isfinite(best):
                history.append((trials, best))
            run = store.get_run(run_id)
            budget = int(run.settings.get("max_trials", 0) or 0)
            ran_dry = run.status is RunStatus.FINISHED and summary.num_trials < budget
            exhausted = exhausted or ran_dry
        states.append(TaskState(task, trials, tuple(history), exhausted))
    return states


def next_task(states: Sequence[TaskState], scheduler: str) -> TaskState | None:
    """The task the next chunk goes to (``None``: every task ran out of points)."""
    open_states = [s for s in states if not s.exhausted]
    if not open_states:
        return None
    untried = [s for s in open_states if s.trials == 0]
    if untried:  # every task gets a first chunk, the costliest untuned first
        return max(untried, key=lambda s: s.task.untuned_total_secs or 0.0)
    if scheduler == "round-robin":
        return min(open_states, key=lambda s: s.trials)
    return min(open_states, key=lambda s: s.gradient())


def tune_model(
    model: ModelRecord,
    store: RecordStore,
    measurer: Measurer,
    *,
    max_trials: int,
    strategy: str = "evolutionary",
    seed: int = 0,
    scheduler: str = "gradient",
    chunk: int = 16,
    transfer: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
    on_progress: Callable[[ModelTuneProgress], None] | None = None,
    on_step: Callable[[str], None] = lambda _: None,
) -> str:
    """Tune ``model``'s tasks with ``max_trials`` trials in all (see the module doc); returns
    the tune's name (for ``race_model(..., tune=...)``).

    ``on_progress`` is told after every chunk; ``on_step``, in a few words, which task a chunk
    tunes as it starts (a first chunk of a large task builds for seconds before its first
    measurement).

    Raises:
        SearchError: an unknown scheduler, or a budget or chunk below 1.
    """
    if scheduler not in SCHEDULERS:
        raise SearchError(f"scheduler must be one of {', '.join(SCHEDULERS)} (got {scheduler!r})")
    if max_trials < 1 or chunk < 1:
        raise SearchError(f"max_trials and chunk must be at least 1 (got {max_trials}, {chunk})")
    options = {"transfer_from": "auto"} if transfer else {}
    make_strategy(strategy, **options)  # refuses a strategy that cannot transfer, up front
    tune = tune_name(strategy, seed, scheduler, transfer=transfer)
    tuner = Tuner(measurer=measurer, store=store, batch_size=min(chunk, 8))
    _resume_interrupted(model, store, tuner, tune, should_stop)
    while not should_stop():
        states = task_states(model, store, tune)
        spent = sum(s.trials for s in states)
        state = next_task(states, scheduler)
        if spent >= max_trials or state is None:
            break
        size = min(_chunk_size(model, state, chunk, max_trials), max_trials - spent)
        on_step(
            f"tuning {state.task.name} ({plural(size, 'trial')}; {spent} of {max_trials} spent)"
        )
        link = _Linker(store, model.id, state.task.name, tune)
        earlier = [
            run_id for run_id, task, run_tune in store.model_runs(model.id)
            if task == state.task.name and run_tune == tune
        ]  # fmt: skip
        watch = measurer.watch_busy()
        before = tuner.run_id  # the previous chunk's
        try:
            tuner.run(
                state.task.workload, model.target, make_strategy(strategy, **options),
                max_trials=size, seed=seed * 1000 + len(earlier), should_stop=should_stop,
                on_progress=link, prior_runs=earlier,
            )  # fmt: skip
        finally:
            # A run stopped before its first batch (Ctrl-C while its baseline is timed) is
            # linked too, so that the tune resumes it instead of leaving it behind.
            if tuner.run_id is not None and tuner.run_id != before:
                link.add(tuner.run_id)
        busy = None if watch is None else round(watch.share(), 3)
        if on_progress is not None:
            states = task_states(model, store, tune)
            on_progress(
                ModelTuneProgress(tune, state.task.name, sum(s.trials for s in states),
                                  max_trials, tuple(states), busy)
            )  # fmt: skip
    return tune


class _Linker:
    """Links a chunk's run to the model tune as soon as the run exists (its first batch), so
    that a tune stopped mid-chunk finds the run again."""

    def __init__(self, store: RecordStore, model_id: int, task: str, tune: str):
        self.store, self.model_id, self.task, self.tune = store, model_id, task, tune
        self.linked: set[int] = set()

    def __call__(self, progress: TuneProgress) -> None:
        self.add(progress.run_id)

    def add(self, run_id: int) -> None:
        if run_id not in self.linked:
            self.store.link_model_run(self.model_id, run_id, self.task, self.tune)
            self.linked.add(run_id)


def _chunk_size(model: ModelRecord, state: TaskState, chunk: int, max_trials: int) -> int:
    """A task's first chunk is ``first_chunks``'s; later chunks are ``chunk`` trials."""
    if state.trials > 0:
        return chunk
    return first_chunks(model, max_trials, chunk).get(state.task.name, MIN_FIRST_CHUNK)


def first_chunks(model: ModelRecord, max_trials: int, chunk: int) -> dict[str, int]:
    """Each task's first chunk: ``MIN_FIRST_CHUNK`` trials for every task the budget holds
    (costliest untuned first), plus its share, by untuned time, of what is left of half the
    budget, at most ``chunk`` in all: a reshape that takes 0.01% of the network is not given
    the trials of its heaviest convolution, and every task gets a first chunk before any gets a
    second (MetaSchedule's gradient task scheduler, too, tunes every task once first).

    Sized by share alone (at least ``MIN_FIRST_CHUNK``), MobileNetV2's 33 tasks asked 214
    trials for their first chunks: 150 trials went to 17 of them, and 16 tasks, 65 % of the
    tuned network's time, kept their untuned schedules (2-core AMD EPYC, 2026-11-29).

    Example:
        >>> from explorer.target import Target
        >>> from explorer.workloads import get_workload
        >>> costs = {"a": 6.0, "b": 3.0, "c": 1.0}  # untuned seconds a call, one call each
        >>> tasks = tuple(ModelTask(n, get_workload("task"), 1, 1.0, s) for n, s in costs.items())
        >>> model = ModelRecord(0, "m", "", (), tasks, Target.local_cpu(), 0.0)
        >>> first_chunks(model, 40, 16), first_chunks(model, 8, 16)
        ({'a': 8, 'b': 6, 'c': 4}, {'a': 4, 'b': 4})
    """
    by_cost = sorted(model.tasks, key=lambda t: -(t.untuned_total_secs or 0.0))
    funded = by_cost[: max_trials // MIN_FIRST_CHUNK]
    spare = max(0, max_trials // 2 - MIN_FIRST_CHUNK * len(funded))
    return {
        t.name: min(chunk, MIN_FIRST_CHUNK + math.floor(spare * (model.share(t) or 0.0)))
        for t in funded
    }


def _resume_interrupted(
    model: ModelRecord,
    store: RecordStore,
    tuner: Tuner,
    tune: str,
    should_stop: Callable[[], bool],
) -> None:
    """Finish the chunks a stopped tune left running (their runs read as interrupted)."""
    for run_id, _, run_tune in store.model_runs(model.id):
        stopped = (RunStatus.INTERRUPTED, RunStatus.CANCELLED)
        if run_tune == tune and store.get_run(run_id).status in stopped:
            tuner.resume(run_id, should_stop=should_stop)
