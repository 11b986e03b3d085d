"""The Model panel: bring your own network, in the notebook.

Import an ONNX file (its path on the kernel's machine), or pick a model already in the database;
the panel lists its tasks by their share of the network's time, untuned and now. **Tune** spends
one budget over the tasks (``explorer.model.tune_model``, the gradient scheduler by default;
**Learn from other tasks** is its ``transfer``); **Race** builds the network with every task's
best schedule and races it against ONNX Runtime and the untuned build
(``explorer.model.race_model``). Import, tune and race run one at a time on the context's search
worker (``ctx.search_jobs``: they share the machine with a schedule search) and report through
the UI thread. **Open in editor** opens the chosen task (the slowest now, at first) in the
schedule editor: its best schedule when it was tuned, else unscheduled.

Two plots: where the time goes (each task, untuned and now) and the races against trials spent
(``explorer._plots_model``, over ``explorer.analysis.model_times_info`` / ``model_race_info``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from explorer.analysis import ModelTimesInfo, model_race_info, model_times_info
from explorer.core import ModelRace, ModelRecord
from explorer.errors import CapabilityError, ModelError, RaceStopped
from explorer.extras import check_installed
from explorer.model import (
    SCHEDULERS,
    ModelTuneProgress,
    best_schedules,
    best_times,
    busy_note,
    import_busy_note,
    import_model,
    parse_input_shape,
    race_model,
    speed_note,
    tune_model,
    tune_name,
    tune_spent,
)
from explorer.plots import make_model_race_figure, make_model_tasks_figure
from explorer.search import STRATEGIES, check_capabilities
from explorer.session import ScheduleSession
from explorer.text import error_text, format_secs, plural
from explorer.types import MAX_TRIALS, TOO_MANY_TRIALS
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobState
from widgets._model_views import ms, race_html, race_summary, tasks_html
from widgets._panel import Panel
from widgets._pickers import Dropdown, refused_choice
from widgets._plot import LiveFigure
from widgets._style import tagged, themed
from widgets._whole import WholeText, parse_whole

log = logging.getLogger(__name__)

MODEL_PACKAGES = ("onnx", "onnxruntime")
IMPORT, TUNE, RACE = "Model import", "Model tune", "Model race"  # the jobs' names
POLL_SECS = 5.0  # how often the panel looks for another process's imports, trials and races
CSS = """
.se-model .widget-label.se-model-status { white-space: normal; height: auto; line-height: 1.45; }
.se-model table { border-collapse: collapse; font-size: 12px; }
.se-model td, .se-model th { padding: 2px 8px; text-align: right; }
.se-model td:nth-child(2), .se-model th:nth-child(2) { text-align: left; }
"""


class ModelPanel(Panel):
    """Import, tune and race an ONNX model; open its tasks in the editor.

    Attributes:
        widget: the panel to display.
        model: the model shown (``None`` before one is imported or picked).
        job: the last import, tune or race (``None`` before the first).
        on_open: called with the opened ``ScheduleSession`` (the ``Explorer`` switches to its
            Schedule tab).
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.model: ModelRecord | None = None
        self.job: Job | None = None
        self.on_open: Callable[[ScheduleSession], None] | None = None
        self._make_controls()
        self.status = tagged(w.Label(value="Ready."), "se-model-status")
        self.tasks_table = tagged(
            w.HTML(value="", layout=w.Layout(max_height="260px", overflow="auto")),
            "se-model-tasks",
        )
        self.race_table = tagged(w.HTML(value=""), "se-model-race")
        self.tasks_figure = LiveFigure(make_model_tasks_figure(None))
        self.race_figure = LiveFigure(make_model_race_figure(None))
        self.widget = self._layout()
        self._rereading = False  # the Model list re-read for another process: not a pick
        self._closed = False
        self.models.observe(
            lambda _: None if self._rereading else self._guard(self._on_pick), names="value"
        )
        self.import_button.on_click(lambda _: self._guard(self.import_file))
        self.tune_button.on_click(lambda _: self._guard(self.tune))
        self.race_button.on_click(lambda _: self._guard(self.race))
        self.stop_button.on_click(lambda _: self._guard(self.stop))
        self.open_button.on_click(lambda _: self._guard(self.open_task))
        self.refresh_models()
        # Another notebook or process on the same database imports, tunes and races too: the
        # panel compares what it showed with the store every POLL_SECS and re-reads it.
        self._seen = self._store_state()
        self._poll = _ui.call_later(POLL_SECS, self._check_store)

    def _make_controls(self) -> None:
        self.models = tagged(Dropdown(options=[], description="Model"), "se-model-pick")
        self.path = tagged(
            w.Text(placeholder="path/to/model.onnx", description="ONNX file"), "se-model-path"
        )
        self.inputs = tagged(
            w.Text(
                placeholder="x=1x3x224x224 (dynamic inputs only)",
                description="Inputs",
                layout=w.Layout(width="380px"),  # the placeholder whole
            ),
            "se-model-inputs",
        )
        self.import_button = tagged(
            w.Button(description="Import", icon="upload"), "se-model-import"
        )
        self.task = tagged(  # wide enough for a network's fused names, under its arrow
            Dropdown(options=[], description="Task", layout=w.Layout(width="460px")),
            "se-model-task",
        )
        self.open_button = tagged(
            w.Button(description="Open in editor", icon="edit"), "se-model-open"
        )
        self.trials = tagged(WholeText(value=64, description="Trials"), "se-model-trials")
        names = list(STRATEGIES)
        self.strategy = tagged(
            w.Dropdown(options=names, value="evolutionary", description="Strategy"),
            "se-model-strategy",
        )
        self.scheduler = tagged(
            w.Dropdown(options=list(SCHEDULERS), value="gradient", description="Scheduler"),
            "se-model-scheduler",
        )
        self.transfer = tagged(  # tune_model(transfer=True): the CLI's --transfer
            w.Checkbox(value=False, description="Learn from other tasks", indent=False),
            "se-model-transfer",
        )
        self.tune_button = tagged(
            w.Button(description="Tune", button_style="primary", icon="play"), "se-model-tune"
        )
        self.race_button = tagged(
            w.Button(description="Race", icon="flag"), "se-model-race-button"
        )
        self.stop_button = tagged(
            w.Button(description="Stop", icon="stop", disabled=True), "se-model-stop"
        )
        self.progress = tagged(
            w.IntProgress(value=0, min=0, max=1, description="Trials"), "se-model-progress"
        )

    def _layout(self) -> w.VBox:
        def row(*items: w.Widget) -> w.HBox:
            return w.HBox(list(items), layout=w.Layout(flex_flow="row wrap", align_items="center"))

        box = w.VBox(
            [
                row(self.models),
                row(self.path, self.inputs, self.import_button),
                self.tasks_table,
                row(self.task, self.open_button),
                row(self.trials, self.strategy, self.scheduler, self.transfer),
                row(self.tune_button, self.race_button, self.stop_button, self.progress),
                self.status,
                self.race_table,
                tagged(
                    w.Box([self.tasks_figure.widget], layout=w.Layout(width="100%")),
                    "se-model-tasks-plot",
                ),
                tagged(
                    w.Box([self.race_figure.widget], layout=w.Layout(width="100%")),
                    "se-model-race-plot",
                ),
                w.HTML(f"<style>{CSS}</style>", layout=w.Layout(display="none")),
            ]
        )
        box.add_class("se-model")
        themed(box)
        return box

    # -- actions ------------------------------------------------------------------------------
    def refresh_models(self, select: int | None = None) -> None:
        """Re-read the database's models into the Model list (and select ``select``)."""
        stored = self.ctx.store.models()
        self.models.options = _model_options(stored)
        if select is not None:
            self.models.value = select
        elif stored and self.models.value is None:
            self.models.value = stored[-1].id
        self._on_pick()

    def import_file(self) -> Job | None:
        """Import the ONNX file of the path box; ``None`` (and why, in the status) if refused."""
        shapes: dict[str, tuple[int, ...]] = {}
        for part in filter(None, (p.strip() for p in self.inputs.value.split(","))):
            try:
                name, shape = parse_input_shape(part)
            except ModelError as exc:
                self._say(f"Not imported: {exc}")
                return None
            shapes[name] = shape
        path = self.path.value.strip()
        if not path:
            self._say("Not imported: give the ONNX file's path (on the kernel's machine).")
            return None

        started = time.time()

        def work(_job: Job) -> ModelRecord:
            return import_model(
                path, self.ctx.store, inputs=shapes, target=self.ctx.target,
                on_step=lambda step: _ui.call_soon(self._say, f"Importing {path}: {step}..."),
            )  # fmt: skip

        return self._submit(
            IMPORT,
            work,
            # a model stored before this import began: the same file, found in the store
            lambda model: self._on_imported(model, again=model.created_at < started),
            f"Importing {path}...",
        )

    def tune(self) -> Job | None:
        """Tune the shown model's tasks with the panel's budget, strategy, scheduler and
        transfer (Learn from other tasks)."""
        model = self._need_model("tune")
        trials = parse_whole(
            "Trials", self.trials.value, 1, "at least 1 trial", MAX_TRIALS, TOO_MANY_TRIALS
        )
        if model is None:
            return None
        if isinstance(trials, str):
            self._say(f"Not started: {trials}")
            return None
        strategy, scheduler = str(self.strategy.value), str(self.scheduler.value)
        transfer = bool(self.transfer.value)
        try:
            check_capabilities(strategy, transfer=transfer)
        except CapabilityError as exc:
            self._say(f"Not started: {exc} (untick Learn from other tasks, or pick one).")
            return None
        how = f"{strategy} ({scheduler}{', learning from other tasks' if transfer else ''})"
        spent = tune_spent(
            model, self.ctx.store, tune_name(strategy, 0, scheduler, transfer=transfer)
        )
        if spent >= trials:  # Trials is the tune's total: nothing would run, and it would race
            self._say(
                f"Not started: {model.name}'s tune with {how} has spent "
                f"{plural(spent, 'trial')} already and Trials is its total: set Trials above "
                f"{spent} to tune further (Race races what it found)."
            )
            return None
        more = plural(trials, "trial")
        if spent:
            more = f"{plural(trials - spent, 'more trial')} ({trials} in all)"

        def work(job: Job) -> str:
            with self.ctx.search_measurer() as measurer:
                return tune_model(
                    model, self.ctx.store, measurer, max_trials=trials, strategy=strategy,
                    scheduler=scheduler, transfer=transfer, should_stop=job.is_cancelled,
                    on_progress=lambda p: _ui.call_soon(self._on_progress, p),
                    on_step=lambda step: _ui.call_soon(self._say, f"{model.name}: {step}..."),
                )  # fmt: skip

        self._reset_progress(trials)
        return self._submit(
            TUNE, work, self._on_tuned,
            f"Tuning {model.name}: {more} with {how}...",
        )  # fmt: skip

    def race(self, tune: str | None = None) -> Job | None:
        """Race the shown model (the best of every task in the database, or of ``tune``)."""
        model = self._need_model("race")
        if model is None:
            return None

        def work(job: Job) -> ModelRace:
            return race_model(model, self.ctx.store, tune=tune, should_stop=job.is_cancelled)

        return self._submit(
            RACE, work, self._on_raced,
            f"Racing {model.name} against ONNX Runtime (a build or two, then 3 rounds)...",
        )  # fmt: skip

    def stop(self) -> None:
        """Ask the running tune (once the trials being measured are done and its chunk's best
        is re-timed) or race (at once) to stop; an import stores its model whole or not at
        all, and runs to its end."""
        racing = self.job is not None and self.job.name == RACE
        self._stop_job(
            self.job, self.stop_button,
            idle="Nothing is running.",
            stopping=(
                "Stopping the race (nothing of it is stored)..."
                if racing
                else "Stopping once the trials being measured are done (every measured trial "
                "is kept)..."
            ),
        )  # fmt: skip

    def open_task(self) -> ScheduleSession | None:
        """Open the chosen task in the editor: its best schedule, else unscheduled."""
        model = self._need_model("open")
        if model is None or self.task.value is None:
            return None
        if (label := refused_choice(self.task)) is not None:  # from another model's list
            self._say(f"Not opened: {label} is not a task of {model.name}; pick a task again.")
            return None
        task = model.task(str(self.task.value))
        best = dict(best_schedules(model, self.ctx.store)).get(task.name)
        if best is not None:
            session = self.ctx.open_record(best)
            what = f"its best schedule ({format_secs(best.median_secs)})"
        else:
            session = ScheduleSession(task.workload, self.ctx.target)
            self.ctx.set_session(session)
            what = "unscheduled (not tuned yet)"
        self._say(f"Opened {model.name}:{task.name} in the editor (Schedule tab): {what}.")
        if self.on_open is not None:
            self.on_open(session)
        return session

    def close(self) -> None:
        self._closed = True
        self._poll.cancel()
        if self.job is not None and self.job.is_active:
            self.job.cancel()

    # -- internals (UI thread) ----------------------------------------------------------------
    def _need_model(self, what: str) -> ModelRecord | None:
        """The shown model, or ``None`` (and why, in the status). ``None`` too, silently, while
        this panel's own job runs: a second click that reached the kernel before the buttons'
        disabling reached the page, whose checks (the tune's budget spent) would overwrite
        the job's status (a new user's double-click on Tune: "Not started: ... has spent 8
        trials already" during the race that followed)."""
        if self.job is not None and self.job.is_active:
            return None
        if self.model is None:
            self._say(f"Nothing to {what}: import a model (or pick one) first.")
        return self.model

    def _submit(
        self, name: str, work: Callable[[Job], Any], done: Callable[[Any], None], saying: str
    ) -> Job | None:
        check_installed(MODEL_PACKAGES, "the Model tab", "model")
        jobs = self.ctx.search_jobs
        if jobs.busy and jobs.current is not None:
            if jobs.current is self.job:
                # this panel's own job: a second click that reached the kernel before the
                # buttons' disabling reached the page; the status stays the job's
                return None
            self._say(f"Not started: {jobs.current.name} is still running; stop it or wait.")
            return None

        def on_done(job: Job) -> None:
            self._set_running(False)
            if isinstance(job.exception, RaceStopped):
                self._say("Race stopped before it ended; nothing of it was stored.")
                return
            if job.state is JobState.ERROR:
                if name == TUNE:
                    self.progress.bar_style = "danger"
                self._say(f"{name} failed: {error_text(job.exception)}.")
                return
            done(job.result)

        # an import stores its model whole or not at all: it has no point to stop at
        self._set_running(True, stoppable=name != IMPORT)
        self._say(saying)
        self.job = jobs.submit(name, work, on_done=on_done)
        return self.job

    def _set_running(self, running: bool, *, stoppable: bool = True) -> None:
        # The Model list too: the progress and the plots stay about the model the job is on.
        controls = (
            self.import_button, self.tune_button, self.race_button, self.open_button, self.models
        )  # fmt: skip
        for control in controls:
            control.disabled = running
        self.stop_button.disabled = not (running and stoppable)

    def _on_imported(self, model: ModelRecord, again: bool = False) -> None:
        self.refresh_models(select=model.id)
        said = (
            f"{model.name} is already stored (the same file)"
            if again
            else f"Imported {model.name}"
        )
        untuned = sum(t.untuned_total_secs or 0.0 for t in model.tasks)
        note = import_busy_note(model)
        self._say(
            f"{said}: {plural(len(model.tasks), 'task')}, untuned {format_secs(untuned)} per "
            "inference." + (f" {note}" if note else "")
        )

    def _on_progress(self, p: ModelTuneProgress) -> None:
        self.progress.max, self.progress.value = p.max_trials, min(p.trials, p.max_trials)
        self._say(
            f"[{p.trials}/{p.max_trials}] tuned {p.task}; with this tune's best of each task: "
            f"{format_secs(p.estimated_secs)} per inference..."
            + (f" {p.busy_note}" if p.busy_note else "")
        )
        self._show_tasks()

    def _on_tuned(self, tune: str) -> None:
        stopped = self.job is not None and self.job.is_cancelled()
        self.progress.bar_style = "warning" if stopped else "success"
        self._show_tasks()
        if stopped:  # a stop stops: the race is the user's call (Race builds what was found)
            self._say(
                f"Tune {tune} stopped (every measured trial is kept); Race builds the network "
                "with the best schedules found so far."
            )
            return
        self._say(f"Tune {tune} done; racing the network...")
        self._submit_race_after(tune)

    def _submit_race_after(self, tune: str) -> None:
        # on_done runs before the runner is free: start the race once it is.
        unsubscribe: Callable[[], None] = lambda: None

        def start() -> None:
            unsubscribe()
            self.race(tune)

        unsubscribe = self.ctx.search_jobs.when_free(start)

    def _on_raced(self, race: ModelRace) -> None:
        self._show_races()
        races = self.ctx.store.model_races(race.model_id)
        notes = [n for n in (busy_note(race), speed_note(race, races)) if n]
        self._say(" ".join([f"Race {race.id}: {race_summary(race)}.", *notes]))

    def _reset_progress(self, trials: int = 1) -> None:
        """The Trials bar is a tune's: emptied, uncoloured, for another model or tune (a
        failed import had left it red beside the next import's and race's success)."""
        self.progress.value, self.progress.max, self.progress.bar_style = 0, trials, ""

    def _on_pick(self) -> None:
        model_id = self.models.value
        if self.job is None or not self.job.is_active:
            self._reset_progress()
        self.model = None if model_id is None else self.ctx.store.get_model(int(model_id))
        info = self._show_tasks()
        races = self._show_races()
        if self.model is None or info is None:
            return
        # The status line is about the model shown (it said the last model's race before).
        latest = races[-1] if races else None
        raced = f"latest race: {race_summary(latest)}" if latest else "not raced yet"
        notes = [n for n in (busy_note(latest), speed_note(latest, races)) if n] if latest else []
        self._say(
            " ".join([f"{self.model.name}: {plural(len(self.model.tasks), 'task')}, untuned "
                      f"{ms(info.untuned_ms)} per inference, {ms(info.tuned_ms)} with each "
                      f"task at its best; {raced}.", *notes])
        )  # fmt: skip

    def _store_state(self) -> tuple[Any, ...]:
        """What the panel shows of the store: its models, the shown model's races and the
        trials (a task's best may change with any of them)."""
        store = self.ctx.store
        races = len(store.model_races(self.model.id)) if self.model is not None else 0
        return tuple(m.id for m in store.models()), races, store.count_trials()

    def _check_store(self) -> None:
        if self._closed:
            return
        try:
            # while this panel's own job runs, its progress redraws the panel
            if not (self.job is not None and self.job.is_active):
                state = self._store_state()
                if state != self._seen:
                    self._seen = state
                    self._reread()
        except Exception:  # a store busy or gone for a moment: the next poll tries again
            log.debug("model panel: cannot re-read the store", exc_info=True)
        self._poll = _ui.call_later(POLL_SECS, self._check_store)

    def _reread(self) -> None:
        """Show what another process changed: the Model list, the shown model's tasks (the
        picked one kept) and races; with no model shown, the first listed is picked."""
        shown = self.models.value
        self._rereading = True
        try:
            self.models.options = _model_options(self.ctx.store.models())
            ids = [value for _, value in self.models.options]
            self.models.value = shown if shown in ids else None
        finally:
            self._rereading = False
        if shown is None or self.models.value != shown:  # none shown, or gone: pick anew
            self.refresh_models()
            return
        self.model = self.ctx.store.get_model(int(shown))
        self._show_tasks(keep=self.task.value)
        self._show_races()

    def _show_tasks(self, keep: str | None = None) -> ModelTimesInfo | None:
        if self.model is None:
            self.tasks_table.value, self.task.options = "", []
            _redraw(self.tasks_figure, make_model_tasks_figure(None))
            return None
        store = self.ctx.store
        bests = best_schedules(self.model, store)
        info = model_times_info(self.model, best_times(self.model, store, schedules=bests))
        own = {run_id for run_id, _, _ in store.model_runs(self.model.id)}
        self.tasks_table.value = tasks_html(
            info,
            elsewhere={name for name, trial in bests if trial.run_id not in own},
            busy=import_busy_note(self.model),
        )
        names = [t.name for t in info.tasks]
        self.task.options = names
        self.task.value = keep if keep in names else (names[0] if names else None)  # slowest
        _redraw(self.tasks_figure, make_model_tasks_figure(info))
        return info

    def _show_races(self) -> list[ModelRace]:
        races = [] if self.model is None else self.ctx.store.model_races(self.model.id)
        self.race_table.value = race_html(races[-1]) if races else ""
        info = None if self.model is None else model_race_info(self.model, races)
        _redraw(self.race_figure, make_model_race_figure(info))
        return races


def _model_options(models: list[ModelRecord]) -> list[tuple[str, int]]:
    return [(f"{m.name} ({plural(len(m.tasks), 'task')})", m.id) for m in models]


def _redraw(live: LiveFigure, fig: Any) -> None:
    """Make ``live`` draw ``fig`` (one write of its state: the page redraws once)."""
    with live.batch_update():
        live.data = ()
        live.add_traces(list(fig.data))
        live.layout = fig.layout
