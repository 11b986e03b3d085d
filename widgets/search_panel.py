"""The search launcher: pick a strategy, its cost model and a budget, run it in the background.

The search runs on ``ctx.search_jobs`` (one worker thread) through ``Tuner.run``; the panel only
polls nothing: the tuner's ``on_progress`` moves the bar, ``Stop`` asks the job to cancel (the
tuner checks between batches), and the job's ``on_done`` reports how it ended. Trials reach the
dashboards through the store's subscription, not through this panel.

"Measure on" picks where: this machine (the context's measurer), a fleet, a TVM RPC tracker's
devices of one key (``RemoteMeasurer``), or a recording of earlier measurements, where the
search gives way to a race of several strategies and seeds, answered from the recording
(``widgets.race``). A fleet search's target is the one its devices report,
asked on the search's worker before anything is stored (so a tracker that does not answer or a
key without devices is one sentence, and no run is created); the panel closes the
``RemoteMeasurer`` it made when the search ends.
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import ipywidgets as w

from explorer.errors import FleetError, FleetNotReady
from explorer.fleet import TrackerAddress, devices_target, read_fleet
from explorer.measure import MeasureConfig, Measurer, RemoteMeasurer
from explorer.search import (
    STRATEGIES,
    SearchStrategy,
    capabilities,
    make_strategy,
    transfer_note,
)
from explorer.session import ScheduleSession
from explorer.space import StartMapping, start_mapping
from explorer.storage import trial_name
from explorer.target import Target
from explorer.text import format_secs
from explorer.tuner import TuneProgress, Tuner, TuneResult
from explorer.types import MAX_SECS, MAX_TRIALS, TOO_LONG, TOO_MANY_TRIALS
from explorer.workloads import Workload
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobState
from widgets._panel import Panel
from widgets._style import tagged, themed
from widgets._whole import WholeText, parse_whole
from widgets.race import RacePanel

log = logging.getLogger(__name__)

NO_MODEL = "(none)"
THIS_MACHINE = "local"
FLEET = "fleet"
RECORDING = "recording"


class SearchPanel(Panel):
    """Starts, follows and stops a search of the current session's workload.

    Args:
        ctx: the shared context (store, target, session, ``search_jobs``, ``make_measurer``).
        batch_size: candidates measured per round (the ``Tuner``'s; Stop acts between rounds).
        fleet_config: timing settings of the ``RemoteMeasurer`` a fleet search makes (default:
            ``MeasureConfig()``).
        fleet_state: the local fleet's state file, whose tracker the fleet option proposes
            (default: ``explorer fleet``'s).

    Attributes:
        widget: the panel to display.
        job: the last search job (``None`` before the first Start).
        result: the last finished search's ``TuneResult``.
        fleet_target: the target the devices of the last fleet search reported.

    Example:
        >>> panel = SearchPanel(ctx)  # doctest: +SKIP
        >>> panel.strategy.value, panel.trials.value = "autotvm", 128  # doctest: +SKIP
        >>> job = panel.start()  # doctest: +SKIP
    """

    def __init__(
        self,
        ctx: Context,
        *,
        batch_size: int = 8,
        fleet_config: MeasureConfig | None = None,
        fleet_state: str | os.PathLike[str] | None = None,
    ) -> None:
        self.ctx = ctx
        self.batch_size = batch_size
        self.fleet_config = fleet_config
        self.fleet_state = fleet_state
        self.job: Job | None = None
        self.result: TuneResult | None = None
        self.fleet_target: Target | None = None
        self._make_settings(ctx.target)
        self._make_where()
        self._make_controls()
        self.race = RacePanel(ctx)
        self.strategy.observe(lambda _: self._guard(self._sync_options), names="value")
        self.measure_on.observe(lambda _: self._guard(self._sync_measure_on), names="value")
        self.fleet_key.observe(lambda _: self._guard(self._sync_measure_on), names="value")
        self.start_button.on_click(lambda _: self._guard(self.start))
        self.stop_button.on_click(lambda _: self._guard(self.stop))
        self.open_best_button.on_click(lambda _: self._guard(self.open_best))
        self._unsubscribe = ctx.on("session", lambda _: self._guard(self._sync_options))
        self._sync_options()
        self.widget = self._layout()

    def _make_settings(self, target: Target) -> None:
        """What to search with, for how long, and for which target."""
        names = list(STRATEGIES)
        self.strategy = tagged(
            w.Dropdown(options=names, value=names[0], description="Strategy"), "se-strategy"
        )
        self.cost_model = tagged(
            w.Dropdown(options=[NO_MODEL], value=NO_MODEL, description="Cost model"),
            "se-cost-model",
        )
        # Not IntText: see widgets._whole (a typed "2.5" must be refused, not read as 25).
        self.trials = tagged(WholeText(value=64, description="Max trials"), "se-trials")
        self.secs = tagged(
            w.FloatText(
                value=0.0,
                description="Max secs (0: no limit)",
                tooltip="the search's time limit in seconds; 0 = no time limit",
                style={"description_width": "initial"},
            ),
            "se-secs",
        )
        self.seed = tagged(WholeText(value=0, description="Seed"), "se-seed")
        self.target = tagged(
            w.Dropdown(
                options=[(target.name or target.key(), target)],
                value=target,
                description="Target",
            ),
            "se-target",
        )

    def _make_where(self) -> None:
        """Where to measure (this machine or a fleet), and where to start from."""
        self.measure_on = tagged(
            w.Dropdown(
                options=[
                    ("this machine", THIS_MACHINE),
                    ("a fleet (TVM RPC tracker)", FLEET),
                    ("a recording (race strategies, replayed)", RECORDING),
                ],
                value=THIS_MACHINE,
                description="Measure on",
            ),
            "se-measure-on",
        )
        self.fleet_tracker = tagged(
            w.Text(value="", placeholder="HOST:PORT", description="Tracker"), "se-search-tracker"
        )
        self.fleet_key = tagged(w.Text(value="local", description="Key"), "se-search-key")
        self.target_note = tagged(w.Label(value=""), "se-target-note")
        self.fleet_row = w.HBox(
            [self.fleet_tracker, self.fleet_key], layout=w.Layout(display="none")
        )
        self.from_session = tagged(
            w.Checkbox(value=False, description="Start from my schedule", indent=False),
            "se-from-session",
        )
        self.from_session_note = tagged(w.Label(value=""), "se-from-session-note")
        # `explorer tune --transfer`: the model learns from other workloads' trials first.
        self.transfer = tagged(
            w.Checkbox(value=False, description="Learn from other workloads", indent=False),
            "se-transfer",
        )
        self.transfer_note = tagged(w.Label(value=""), "se-transfer-note")
        # Where "Start from my schedule" put it in the space (what `explorer tune --start`
        # prints): a hand-made schedule is approximated, and the notes say how.
        self.start_mapping = tagged(w.HTML(value=""), "se-start-mapping")

    def _make_controls(self) -> None:
        """Start, Stop, Open best, and the search's progress."""
        self.start_button = tagged(
            w.Button(description="Start", button_style="primary", icon="play"), "se-start"
        )
        self.stop_button = tagged(
            w.Button(description="Stop", disabled=True, icon="stop"), "se-stop"
        )
        self.open_best_button = tagged(
            w.Button(description="Open best in editor", disabled=True), "se-open-best"
        )
        self.progress = tagged(
            w.IntProgress(value=0, min=0, max=1, description="Trials"), "se-progress"
        )
        self.status = tagged(w.Label(value="Ready."), "se-search-status")

    def _layout(self) -> w.VBox:
        self.search_settings = w.VBox(
            [
                w.HBox([self.strategy, self.cost_model]),
                w.HBox([self.trials, self.secs]),
                w.HBox([self.seed, self.target]),
            ]
        )
        self.search_controls = w.VBox(
            [
                w.HBox([self.from_session, self.from_session_note]),
                self.start_mapping,
                w.HBox([self.transfer, self.transfer_note]),
                w.HBox([self.start_button, self.stop_button, self.open_best_button]),
                self.progress,
                self.status,
            ]
        )
        self.race.widget.layout.display = "none"
        box = w.VBox(
            [
                w.HBox([self.measure_on, self.target_note]),
                self.search_settings,
                self.fleet_row,
                self.search_controls,
                self.race.widget,
            ]
        )
        box.add_class("se-search")
        themed(box)
        return box

    # -- actions ------------------------------------------------------------------------------
    def start(self) -> Job | None:
        """Start a search with the panel's settings; ``None`` (and a message) when refused.

        Never raises: a bad setting (e.g. a schedule droplet cannot start from) is shown in the
        status text, and so is anything the search itself raises later.
        """
        try:
            return self._start()
        except Exception as exc:
            log.exception("starting a search failed")
            self._say(f"Not started: {type(exc).__name__}: {exc}")
            return None

    def _start(self) -> Job | None:
        current = self.ctx.search_jobs.current
        if self.ctx.search_jobs.busy and current is not None:
            self._say(
                f"A search is already running ({current.name}): stop it (or wait) before "
                "starting another."
            )
            return None
        session = self.ctx.session
        if session is None:
            self._say("Build a workload (or open a record) first: the search tunes its workload.")
            return None
        request = self._request(session)
        if isinstance(request, str):
            self._say(request)
            return None
        run, where = self._job_function(request, session.workload)
        self.result = None
        self.start_mapping.value = (
            f"<i>Mapping your schedule (step {request.start_step}) into the search space\u2026</i>"
            if request.start_step is not None
            else ""
        )
        self.progress.max, self.progress.value = request.max_trials, 0
        self.progress.bar_style = "info"
        self._set_running(True)
        name = request.name
        self._say(f"Searching {session.workload.key()} with {name}: {where}")
        self.job = self.ctx.search_jobs.submit(f"{name} search", run, on_done=self._on_done)
        return self.job

    def _request(self, session: ScheduleSession) -> _Request | str:
        """The search the settings ask for, or why they ask for none (one sentence)."""
        max_trials = parse_whole(
            "Max trials", self.trials.value, 1, "at least 1", MAX_TRIALS, TOO_MANY_TRIALS
        )
        if isinstance(max_trials, str):
            return max_trials
        seed = parse_whole("Seed", self.seed.value, 0, "a whole number >= 0")
        if isinstance(seed, str):
            return seed
        max_secs = float(self.secs.value) or None
        if max_secs is not None and not 0 < max_secs <= MAX_SECS:
            if max_secs > MAX_SECS:
                return f"Max secs must be at most {MAX_SECS:.0f}{TOO_LONG} (got {max_secs:g})."
            return f"Max secs must be 0 (no limit) or positive (got {max_secs:g})."
        name = str(self.strategy.value)
        options: dict[str, Any] = {}
        if not self.cost_model.disabled:  # one the strategy declares (capabilities)
            options["cost_model"] = str(self.cost_model.value)
        if not self.transfer.disabled:  # a strategy that declares it (capabilities)
            options["transfer_from"] = "auto" if self.transfer.value else None
        start_step = None
        if self.from_session.value and not self.from_session.disabled:
            options["start"] = session.candidate()
            start_step = session.snapshot.step_id
        strategy = make_strategy(name, **options)  # a bad setting is refused here, not later
        fleet = self._fleet_choice()
        if isinstance(fleet, str):
            return f"Not started: {fleet}"
        return _Request(name, options, strategy, start_step, max_trials, max_secs, seed, fleet)

    def _job_function(
        self, request: _Request, workload: Workload
    ) -> tuple[Callable[[Job], TuneResult], str]:
        """What the search job runs (on a worker thread: progress reaches the widgets through
        the UI thread), and what the panel says it does first."""
        start = request.options.get("start")

        def tune(
            job: Job, measurer: Measurer, target: Target, strategy: SearchStrategy
        ) -> TuneResult:
            if start is not None:  # said before the search measures anything
                mapping = start_mapping(replace(start, target=target))
                _ui.call_soon(self._show_start_mapping, request.start_step, mapping)
            tuner = Tuner(measurer=measurer, store=self.ctx.store, batch_size=self.batch_size)
            return tuner.run(
                workload,
                target,
                strategy,
                max_trials=request.max_trials,
                max_secs=request.max_secs,
                seed=request.seed,
                should_stop=job.is_cancelled,
                on_progress=lambda p: _ui.call_soon(self._on_progress, p),
            )

        if request.fleet is None:
            target = self.target.value

            def run(job: Job) -> TuneResult:
                with self.ctx.search_measurer() as measurer:
                    return tune(job, measurer, target, request.strategy)

            return run, "starting the measurer..."
        address, key = request.fleet
        config = self.fleet_config

        def run_on_fleet(job: Job) -> TuneResult:
            # The panel made this measurer: it closes it, whatever happens.
            measurer = RemoteMeasurer(address, key, config)
            try:
                target, assumed = devices_target(measurer)
                _ui.call_soon(self._show_fleet_target, target, key, assumed)
                chosen = request.strategy
                if start is not None:  # the start point, built for the devices' target
                    options = {**request.options, "start": replace(start, target=target)}
                    chosen = make_strategy(request.name, **options)
                return tune(job, measurer, target, chosen)
            finally:
                measurer.close()

        return run_on_fleet, f"asking the devices of key {key} at {address} for their target..."

    def stop(self) -> None:
        """Ask the running search to stop after its current batch."""
        self._stop_job(
            self.job, self.stop_button,
            idle="No search is running.",
            stopping="Stopping after the current batch (the best is then re-measured)...",
        )  # fmt: skip

    def open_best(self) -> None:
        """Open the last search's best schedule in the editor."""
        if self.result is None or self.result.best is None:
            self._say("No successful trial to open yet.")
            return
        self._say(f"Opened the search's best, {self.ctx.open_trial(self.result.best)}.")

    def close(self) -> None:
        self._unsubscribe()
        self.race.close()

    # -- callbacks (UI thread) ----------------------------------------------------------------
    def _on_progress(self, p: TuneProgress) -> None:
        if self.job is None or self.job.is_settled:
            return  # a late report of a search that has ended
        self.progress.value = min(p.num_trials, self.progress.max)
        best = "none yet" if p.best_secs is None else f"{p.best_secs * 1e3:.4g} ms"
        text = f"{p.num_trials}/{p.max_trials} trials in {p.elapsed_secs:.1f} s, best {best}"
        if p.num_trials >= p.max_trials:
            text += "; re-measuring the best..."
        self._say(text)

    def _on_done(self, job: Job) -> None:
        self._set_running(False)
        if isinstance(job.exception, FleetNotReady):
            self.progress.value, self.progress.bar_style = 0, ""
            self._say(f"Not started: {job.exception}")
            return
        if job.state is JobState.ERROR:
            self.progress.bar_style = "danger"
            exc = job.exception
            self._say(f"Search failed: {type(exc).__name__}: {exc}")
            return
        result: TuneResult = job.result
        self.result = result
        if job.state is JobState.FINISHED:
            self.progress.value = self.progress.max
        self.progress.bar_style = "success" if job.state is JobState.FINISHED else "warning"
        self.open_best_button.disabled = result.best is None
        best = (
            "no trial succeeded"
            if result.best_secs is None
            else f"best {format_secs(result.best_secs)} ({result.best_gflops or 0:.3g} GFLOPS)"
        )
        how = "Stopped" if job.state is JobState.CANCELLED else "Done"
        rows = self.ctx.store.trial_rows(run_id=result.run.id)
        verdicts = result.verdicts(lambda trial_id: trial_name(rows, trial_id))
        versus = "".join(f" {line[0].upper()}{line[1:]}." for line in verdicts)
        transfer = transfer_note(self.ctx.store.get_run(result.run.id).settings)
        versus += f" {transfer[0].upper()}{transfer[1:]}." if transfer else ""
        self._say(f"{how}: {result.num_trials} trials ({result.why_stopped}), {best}." + versus)

    def _show_start_mapping(self, step: int | None, mapping: StartMapping) -> None:
        point = html.escape(mapping.point.key())
        if mapping.exact:
            self.start_mapping.value = (
                f"Your schedule (step {step}) is the point {point} of the search space: the "
                "search starts there, nothing of it changed."
            )
            return
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in mapping.notes)
        self.start_mapping.value = (
            f"Your schedule (step {step}) is measured first, as the run's reference; the "
            f"search starts at the nearest point of its space, {point}"
            + (f", which differs from it:<ul style='margin:2px 0'>{notes}</ul>" if notes else ".")
        )

    def _show_fleet_target(self, target: Target, key: str, assumed: bool) -> None:
        self.fleet_target = target
        if assumed:
            self.target_note.value = (
                f"target: {target.key()} (assumed: the devices of key {key} do not report "
                "theirs, this machine's CPU is taken)"
            )
        else:
            self.target_note.value = f"target: {target.key()} (reported by key {key})"
        if self.job is not None and not self.job.is_settled:
            self._say(f"Searching on {target.key()} (key {key}): building the first batch...")

    # -- helpers ------------------------------------------------------------------------------
    def _fleet_choice(self) -> tuple[TrackerAddress, str] | str | None:
        """``None`` for this machine, ``(tracker, key)`` for a fleet, or why the fleet fields
        are not usable (one sentence)."""
        if self.measure_on.value != FLEET:
            return None
        typed = self.fleet_tracker.value.strip()
        if not typed:
            return "type the fleet's tracker as HOST:PORT (`explorer fleet up` prints it)."
        try:
            address = TrackerAddress.parse(typed)
        except ValueError as exc:
            return f"{exc}."
        key = self.fleet_key.value.strip()
        if not key or any(c.isspace() for c in key):
            return f"the device key is one word, such as local (got {key!r})."
        return address, key

    def _sync_measure_on(self) -> None:
        """The fleet's fields show with the fleet choice, its target is the devices'; a
        recording shows the race instead of the search."""
        replay = self.measure_on.value == RECORDING
        for box in (self.search_settings, self.search_controls):
            box.layout.display = "none" if replay else None
        self.race.widget.layout.display = None if replay else "none"
        fleet = self.measure_on.value == FLEET
        self.fleet_row.layout.display = None if fleet else "none"
        self.target.disabled = fleet
        self.fleet_target = None
        if not fleet:
            self.target_note.value = ""
            return
        if not self.fleet_tracker.value.strip():
            try:
                local = read_fleet(self.fleet_state)  # a file and a process check: no network
            except FleetError:
                local = None
            if local is not None:
                self.fleet_tracker.value = str(local.tracker)
        key = self.fleet_key.value.strip() or "?"
        self.target_note.value = f"target: what the devices of key {key} report (asked at Start)"

    def _sync_options(self) -> None:
        """Cost models and the start option follow the chosen strategy."""
        name = str(self.strategy.value)
        options = list(capabilities(name).cost_models)  # the strategy's default first
        current = self.cost_model.value
        self.cost_model.options = options or [NO_MODEL]
        self.cost_model.value = current if current in options else (options or [NO_MODEL])[0]
        self.cost_model.disabled = len(options) < 2  # nothing to choose (shown all the same)
        can_start = [n for n in STRATEGIES if capabilities(n).start]
        if name not in can_start:
            self.from_session.value = False
            self.from_session.disabled = True
            self.from_session_note.value = (
                f"Only {', '.join(can_start) or 'no strategy'} can start from a given schedule."
            )
        elif self.ctx.session is None:
            self.from_session.disabled = True
            self.from_session_note.value = "Build or open a schedule first."
        else:
            self.from_session.disabled = False
            self.from_session_note.value = ""
        can_transfer = [n for n in STRATEGIES if capabilities(n).transfer]
        self.transfer.disabled = name not in can_transfer
        self.transfer_note.value = (
            ""
            if name in can_transfer
            else f"Only {', '.join(can_transfer)} learn from other workloads' trials."
        )

    def _set_running(self, running: bool) -> None:
        self.start_button.disabled = running
        self.stop_button.disabled = not running
        if running:
            self.open_best_button.disabled = True


@dataclass(frozen=True)
class _Request:
    """A search as the panel's settings ask for it."""

    name: str  # the strategy's
    options: dict[str, Any]  # make_strategy's (the cost model, the start, transfer)
    strategy: SearchStrategy
    start_step: int | None  # the session's step the search starts from
    max_trials: int
    max_secs: float | None
    seed: int
    fleet: tuple[TrackerAddress, str] | None  # the tracker's address and the devices' key


__all__ = ["SearchPanel"]
