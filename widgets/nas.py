"""The NAS panel: neural architecture search as program transformation, in the notebook.

Pick a network, the kinds of transformations to sample, the legality threshold tau, how many
candidates and how many trials per distinct convolution; Run calls ``explorer.nas.nas_search``
on the context's search worker (``ctx.search_jobs``: a NAS search and a schedule search share
the machine, so one waits for the other), with the context's search measurer, closed when the
search ends. ``on_progress`` moves the bar (through the UI thread, ``widgets._ui``); Stop asks the
job to cancel, which the search checks before each shape and the tuner between batches.

The result is a table (one row per network) and a Pareto ``LiveFigure`` (latency against
Fisher Potential, ``explorer.plots.make_nas_pareto_figure``), both drawn from
``explorer.analysis.nas_front_info``.
Clicking a point opens a layer of that network in the schedule editor, chosen by the info's
``LayerFocus`` (its slowest transformed layer): the best schedule its tuning found, or the
convolution unscheduled when it was not tuned. The panel says which layer it opened.

The whole-number settings (Width, Samples, Trials/shape, Seed) are ``WholeText`` boxes read by
``widgets._whole.parse_whole``, so a decimal is refused rather than read as its digits.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import ipywidgets as w

from explorer.analysis import NasFrontInfo, nas_front_info
from explorer.extras import MissingExtraError, check_installed
from explorer.nas import (
    KINDS,
    NETWORKS,
    NasProgress,
    NasResult,
    Network,
    nas_search,
)
from explorer.plots import make_nas_pareto_figure, on_point_click, update_nas_pareto_figure
from explorer.search import STRATEGIES
from explorer.session import ScheduleSession
from explorer.storage import name_trial, summarize_run
from explorer.text import error_text
from explorer.types import MAX_TRIALS, TOO_MANY_TRIALS
from widgets import _nas_views, _ui
from widgets._context import Context
from widgets._jobs import Job, JobState
from widgets._panel import Panel
from widgets._plot import LiveFigure
from widgets._style import tagged, themed
from widgets._whole import WholeText, parse_whole

log = logging.getLogger(__name__)

NAS_PACKAGES = ("jax", "sklearn")
"""What the Fisher Potential needs (the ``nas`` extra), checked before a search starts."""
DEFAULT_KINDS = KINDS
"""The kinds ticked at first: all of them, as ``explorer nas`` samples by default."""

# ipywidgets cuts a Label at one line ("..."); the status and the notice are sentences that
# must be read whole, so they wrap (still Labels: a message never becomes markup).
CSS = """
.se-nas .widget-label.se-nas-status,
.se-nas .widget-label.se-nas-note,
.se-nas .widget-label.se-nas-notice {
  white-space: normal;
  line-height: 1.45;
  height: auto;
  padding: 4px 0;
}
.se-nas .se-nas-note { color: #8a5a00; }
"""
EMPTY_PLOT = "Run a NAS search to see its candidates here"
RUNNING_PLOT = "The search's networks appear here when it ends"
NOTICE = "Click a point to open one of its layers in the editor."


class NasPanel(Panel):
    """Runs a NAS search on a network and shows its candidates, their front, and their layers.

    Args:
        ctx: the shared context (store, target, ``search_jobs``, ``search_measurer``, session).
        networks: networks offered besides the registry's (``explorer.nas.NETWORKS``), by name;
            more can be added with ``add_network``.
        fisher_batch: images in the Fisher Potential's minibatch.
        tune_batch: candidates measured per round of a shape's tuning.

    Attributes:
        widget: the panel to display.
        job: the last search job (``None`` before the first Run).
        result: the last search's ``NasResult`` (kept when it was stopped; ``None`` from the
            next Run on, which clears the table, the plot and the click notice).
        info: ``nas_front_info(result)``, what the table and the plot show.
        status: the search's progress, then its summary; ``note`` holds a refusal of Run
            while the search runs, so the progress stays in view.
        figure: the Pareto plot (a ``LiveFigure``).
        on_open: called with the opened ``ScheduleSession`` after a click opened a layer (the
            ``Explorer`` switches to its Schedule tab).

    Example:
        >>> panel = NasPanel(ctx)  # doctest: +SKIP
        >>> panel.network.value, panel.width.value = "resnet18_cifar", "8"  # doctest: +SKIP
        >>> job = panel.run()  # doctest: +SKIP
    """

    def __init__(
        self,
        ctx: Context,
        *,
        networks: dict[str, Network] | None = None,
        fisher_batch: int = 64,
        tune_batch: int = 8,
    ) -> None:
        self.ctx = ctx
        self.fisher_batch = fisher_batch
        self.tune_batch = tune_batch
        self.job: Job | None = None
        self.result: NasResult | None = None
        self.info: NasFrontInfo | None = None
        self.on_open: Callable[[ScheduleSession], None] | None = None
        self._extra: dict[str, Network] = dict(networks or {})
        self._settings: _Settings | None = None  # the running search's
        self._make_settings()
        self._make_outputs()
        self.network.observe(lambda _: self._guard(self._sync_width), names="value")
        self.run_button.on_click(lambda _: self._guard(self.run))
        self.stop_button.on_click(lambda _: self._guard(self.stop))
        self._sync_width()
        self.widget = self._layout()

    def _make_settings(self) -> None:
        """The search's settings, and Run and Stop."""
        self.network = tagged(
            w.Dropdown(
                options=self._network_names(), value="resnet18_cifar", description="Network"
            ),
            "se-nas-network",
        )
        self.width = tagged(
            WholeText(value=8, description="Width", tooltip="channels of the first stage"),
            "se-nas-width",
        )
        self.width_note = tagged(w.Label(value=""), "se-nas-width-note")
        self.kinds = {
            kind: tagged(
                w.Checkbox(
                    value=kind in DEFAULT_KINDS,
                    description=kind,
                    indent=False,
                    layout=w.Layout(width="auto", margin="0 14px 0 0"),
                ),
                f"se-nas-kind-{kind}",
            )
            for kind in KINDS
        }
        self.tau = tagged(
            w.FloatText(
                value=1.0,
                description="τ (tau)",
                tooltip="legal iff FP(candidate) >= tau x FP(original)",
            ),
            "se-nas-tau",
        )
        self.samples = tagged(WholeText(value=6, description="Samples"), "se-nas-samples")
        self.budget = tagged(
            WholeText(
                value=4,
                description="Trials/shape",
                tooltip="trials per distinct convolution (each shape is tuned once)",
            ),
            "se-nas-budget",
        )
        names = list(STRATEGIES)
        self.strategy = tagged(
            w.Dropdown(options=names, value=names[0], description="Strategy"), "se-nas-strategy"
        )
        self.seed = tagged(WholeText(value=0, description="Seed"), "se-nas-seed")
        self.run_button = tagged(
            w.Button(description="Run", button_style="primary", icon="play"), "se-nas-run"
        )
        self.stop_button = tagged(
            w.Button(description="Stop", disabled=True, icon="stop"), "se-nas-stop"
        )

    def _make_outputs(self) -> None:
        """Progress, status, the front's table and plot."""
        self.progress = tagged(
            w.IntProgress(value=0, min=0, max=1, description="Shapes"), "se-nas-progress"
        )
        self.status = tagged(w.Label(value="Ready."), "se-nas-status")
        # A refusal while this panel's search runs goes here: the status keeps its progress.
        self.note = tagged(w.Label(value="", layout=w.Layout(display="none")), "se-nas-note")
        self.table = tagged(w.HTML(value=""), "se-nas-table")
        self.table.layout.max_height = "320px"
        self.table.layout.overflow = "auto"
        self.figure = LiveFigure(make_nas_pareto_figure(None))
        self._draw(None)
        self.notice = tagged(w.Label(value=NOTICE), "se-nas-notice")

    def _layout(self) -> w.VBox:
        kinds_row = w.HBox(
            [w.Label(value="Transformations:"), *self.kinds.values()],
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )
        buttons = w.HBox([self.run_button, self.stop_button])
        buttons.add_class("se-buttons")
        figure_box = w.Box([self.figure.widget], layout=w.Layout(width="100%"))
        figure_box.add_class("se-nas-pareto")
        box = w.VBox(
            [
                _fields(self.network, self.width, self.width_note),
                kinds_row,
                _fields(self.tau, self.samples, self.budget),
                _fields(self.strategy, self.seed),
                buttons,
                self.progress,
                self.status,
                self.note,
                self.table,
                figure_box,
                self.notice,
                w.HTML(f"<style>{CSS}</style>", layout=w.Layout(display="none")),
            ]
        )
        box.add_class("se-nas")
        themed(box)
        return box

    # -- actions ------------------------------------------------------------------------------
    def add_network(self, name: str, network: Network) -> None:
        """Offer ``network`` under ``name`` in the Network list (and select it)."""
        self._extra[name] = network
        self.network.options = self._network_names()
        self.network.value = name

    def selected_network(self) -> Network | str:
        """The network the settings describe, or why they describe none (one sentence)."""
        name = str(self.network.value)
        if name in self._extra:
            return self._extra[name]
        kwargs: dict[str, int] = {}
        if "width" in NETWORKS.parameters(name):
            width = parse_whole("Width", self.width.value, 1, "at least 1 channel")
            if isinstance(width, str):
                return width
            kwargs["width"] = width
        return NETWORKS.make(name, **kwargs)

    def run(self) -> Job | None:
        """Start a NAS search with the panel's settings; ``None`` (and one sentence saying why)
        when refused. Never raises."""
        try:
            return self._run()
        except Exception as exc:
            log.exception("starting a NAS search failed")
            self._say(f"Not started: {type(exc).__name__}: {exc}")
            return None

    def _run(self) -> Job | None:
        jobs = self.ctx.search_jobs
        if jobs.busy and jobs.current is not None:
            refusal = (
                f"Not started: {jobs.current.name} is still running; stop it (or wait) before "
                "starting another."
            )
            if jobs.current is self.job:
                self._note(refusal)  # the status line keeps this search's progress
            else:
                self._say(refusal)
            return None
        settings = self._check()
        if isinstance(settings, str):
            self._say(f"Not started: {settings}")
            return None
        network, target = settings.network, self.ctx.target

        def search(job: Job) -> NasResult:
            # Worker thread: progress reaches the widgets through the UI thread.
            with self.ctx.search_measurer() as measurer:
                return nas_search(
                    network,
                    samples=settings.samples,
                    budget=settings.budget,
                    store=self.ctx.store,
                    measurer=measurer,
                    target=target,
                    strategy=settings.strategy,
                    tau=settings.tau,
                    seed=settings.seed,
                    batch_size=self.fisher_batch,
                    kinds=settings.kinds,
                    tune_batch=self.tune_batch,
                    should_stop=job.is_cancelled,
                    on_progress=lambda p: _ui.call_soon(self._on_progress, p),
                )

        self._settings = settings
        # The last search's table, plot and click note would pass for this one's: cleared.
        self.result = self.info = None
        self._draw(None, empty=RUNNING_PLOT)
        with _held(*self._lines()):
            self.table.value = ""
            self.notice.value = NOTICE
            self._note("")
            self.progress.value, self.progress.max, self.progress.bar_style = 0, 1, "info"
            self._set_running(True)
            n = settings.samples
            self._say(
                f"Scoring {n} candidate{'s' * (n != 1)} of {network.name} by their "
                "Fisher Potential (JAX compiles on first use: tens of seconds)..."
            )
        self.job = jobs.submit("NAS search", search, on_done=self._on_done)
        return self.job

    def stop(self) -> None:
        """Ask the running search to stop before its next shape (tuned shapes are kept)."""
        self._stop_job(
            self.job, self.stop_button,
            idle="No NAS search is running.",
            stopping="Stopping (after the current batch of the current shape)...",
        )  # fmt: skip

    def open_point(self, index: int) -> ScheduleSession | None:
        """Open the layer ``info.points[index]`` focuses on in the editor: its tuning's best
        schedule, else its convolution unscheduled. Says what it opened in ``notice``."""
        if self.info is None or not 0 <= index < len(self.info.points):
            self.notice.value = "No such point: run a search first."
            return None
        point = self.info.points[index]
        focus = point.focus
        best = None
        if focus.run_id is not None:
            summary = summarize_run(focus.run_id, self.ctx.store.trial_rows(run_id=focus.run_id))
            if summary.best_trial_id is not None:
                best = self.ctx.store.get_trial(summary.best_trial_id)
        if best is not None:
            session = self.ctx.open_record(best)
            secs = best.median_secs
            # named in its run ("trial 3 of run 7"), never by its database-wide id
            timing = name_trial(self.ctx.store, best) + (f", {secs * 1e3:.4g} ms" if secs else "")
            if point.is_timed:
                what = f"its tuning's best schedule ({timing})"
            elif point.is_legal:  # a stopped search: the network, not this shape, is untimed
                what = f"the best schedule of run {focus.run_id} ({timing})"
            else:  # never tuned: the shape was, for another network (or by an earlier run)
                what = (
                    f"the best schedule of run {focus.run_id}, which tuned the same shape "
                    f"({timing}); this network itself was not tuned"
                )
        else:
            session = ScheduleSession(focus.conv.workload(), self.ctx.target)
            self.ctx.set_session(session)
            what = "unscheduled (it was not tuned)"
        pieces = f" ({focus.conv.label()})" if focus.steps != "dense" else ""
        self.notice.value = (
            f"Opened {point.name}'s layer {focus.layer} [{focus.steps}]{pieces}, "
            f"{focus.reason}, in the editor (Schedule tab): {what}."
        )
        if self.on_open is not None:
            self.on_open(session)
        return session

    def close(self) -> None:
        """Ask a running search to stop (the context's runner ends with the context)."""
        if self.job is not None and self.job.is_active:
            self.job.cancel()

    # -- callbacks (UI thread) ----------------------------------------------------------------
    def _on_progress(self, p: NasProgress) -> None:
        if self.job is None or self.job.is_settled or self.job.is_cancelled():
            return  # a late report of a search that has ended, or is stopping (says so)
        settings = self._settings
        self.progress.max = max(p.total, 1)
        self.progress.value = min(p.done, p.total)
        if p.conv is None:
            self._say(f"Tuned {p.done}/{p.total} distinct convolutions; ranking the networks...")
            return
        how = "found in the store" if p.is_cached else "tuning"
        trials = "" if settings is None else f", {settings.budget} trials with {settings.strategy}"
        self._say(f"Shape {p.done + 1}/{p.total}: conv2d {p.conv.label()} ({how}{trials})...")

    def _on_done(self, job: Job) -> None:
        self._settings = None
        if job.state is JobState.ERROR:
            self._draw(None)  # nothing to show: the hint says to run a search again
            with _held(*self._lines()):
                self._set_running(False)
                self._note("")
                self.progress.bar_style = "danger"
                self._say(f"NAS search failed: {error_text(job.exception)}.")
            return
        result: NasResult = job.result
        info = nas_front_info(result)
        stopped = job.state is JobState.CANCELLED or result.stopped
        table, summary = _nas_views.table(info), _nas_views.summary(info, stopped)
        self.result, self.info = result, info
        self._draw(info)
        on_point_click(self.figure, "nas|", self._on_click)
        # One update: Run comes back with the results, not before them.
        with _held(*self._lines()):
            self.table.value = table
            self.progress.bar_style = "warning" if stopped else "success"
            if not stopped:
                self.progress.value = self.progress.max
            self._note("")
            self._say(summary)
            self._set_running(False)

    def _on_click(self, trace: Any, points: Any, state: Any = None) -> None:
        data: Sequence[Any] = trace.customdata if trace.customdata is not None else ()
        picked = [data[i] for i in points.point_inds if i < len(data)]
        if picked:  # one click, one network: the first point under the cursor
            self._guard(lambda: self._open_clicked(int(picked[0])))

    def _open_clicked(self, index: int) -> None:
        try:
            self.open_point(index)
        except Exception as exc:
            log.exception("opening a clicked network's layer failed")
            self.notice.value = f"Could not open that layer: {type(exc).__name__}: {exc}"

    # -- helpers ------------------------------------------------------------------------------
    def _check(self) -> _Settings | str:
        """The search's settings, or what is wrong with them (one sentence naming the field,
        checked before anything runs)."""
        try:
            check_installed(NAS_PACKAGES, "the NAS search", "nas")
        except MissingExtraError as exc:
            return f"{exc}."
        tau = self.tau.value
        if not isinstance(tau, (int, float)) or not math.isfinite(tau) or tau < 0:
            return f"τ must be a finite number >= 0 (got {tau})."
        samples = parse_whole("Samples", self.samples.value, 1, "at least 1 candidate")
        if isinstance(samples, str):
            return samples
        budget = parse_whole(
            "Trials/shape", self.budget.value, 1, "at least 1", MAX_TRIALS, TOO_MANY_TRIALS
        )
        if isinstance(budget, str):
            return budget
        seed = parse_whole("Seed", self.seed.value, 0, "a whole number >= 0")
        if isinstance(seed, str):
            return seed
        kinds = tuple(k for k, box in self.kinds.items() if box.value)
        if not [k for k in kinds if k != "keep"]:
            return "tick at least one transformation (besides keep) to sample."
        network = self.selected_network()
        if isinstance(network, str):
            return network
        strategy = str(self.strategy.value)
        return _Settings(network, kinds, samples, budget, strategy, seed, float(tau))

    def _network_names(self) -> list[str]:
        return [*NETWORKS, *(n for n in self._extra if n not in NETWORKS)]

    def _sync_width(self) -> None:
        name = str(self.network.value)
        takes = name not in self._extra and "width" in NETWORKS.parameters(name)
        self.width.disabled = not takes
        self.width_note.value = "" if takes else "(fixed by this network)"

    def _set_running(self, running: bool) -> None:
        self.run_button.disabled = running
        self.stop_button.disabled = not running

    def _note(self, text: str) -> None:
        self.note.value = text
        self.note.layout.display = "" if text else "none"

    def _lines(self) -> tuple[w.DOMWidget, ...]:
        """The widgets a run's start and end rewrite together."""
        return (
            self.run_button,
            self.stop_button,
            self.progress,
            self.status,
            self.note,
            self.table,
            self.notice,
        )

    def _draw(self, info: NasFrontInfo | None, *, empty: str = EMPTY_PLOT) -> None:
        """Redraw the plot for ``info``; without one, no axes (plotly would draw -1 to 4 for
        nothing), only ``empty`` in the middle."""
        fig = self.figure
        update_nas_pareto_figure(fig, info)
        with fig.batch_update():
            for axis in ("xaxis", "xaxis2", "yaxis", "yaxis2"):
                fig.layout[axis].visible = info is not None
            fig.layout.showlegend = info is not None
            for note in fig.layout.annotations:
                if note.name == "empty":
                    note.text = empty


@dataclass(frozen=True)
class _Settings:
    """What a search runs with, checked (``NasPanel._check``)."""

    network: Network
    kinds: tuple[str, ...]
    samples: int
    budget: int
    strategy: str
    seed: int
    tau: float


@contextmanager
def _held(*widgets: w.Widget) -> Iterator[None]:
    """Send what the block writes to ``widgets`` together, when it ends (``hold_sync``)."""
    with ExitStack() as stack:
        for widget in widgets:
            stack.enter_context(widget.hold_sync())
        yield


def _fields(*children: w.Widget) -> w.HBox:
    """Fields side by side, wrapping onto the next line where the panel is narrower."""
    return w.HBox(list(children), layout=w.Layout(flex_flow="row wrap"))


__all__ = ["NasPanel"]
