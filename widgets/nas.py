"""The NAS panel: neural architecture search as program transformation, in the notebook.

Pick a network, the kinds of transformations to sample, the legality threshold tau, how many
candidates and how many trials per distinct convolution; Run calls ``explorer.nas.nas_search``
on the context's search worker (``ctx.search_jobs``: a NAS search and a schedule search share
the machine, so one waits for the other), with the context's search measurer, closed when the
search ends. ``on_progress`` moves the bar (through the UI thread, ``widgets._ui``); Stop asks the
job to cancel, which the search checks before each shape and the tuner between batches.

The result is a table (one row per network) and a Pareto ``FigureWidget`` (latency against
Fisher Potential, ``explorer._plots_nas``), both drawn from ``explorer.analysis.nas_front_info``.
Clicking a point opens a layer of that network in the schedule editor, chosen by the info's
``LayerFocus`` (its slowest transformed layer): the best schedule its tuning found, or the
convolution unscheduled when it was not tuned. The panel says which layer it opened.
"""

from __future__ import annotations

import html
import importlib.util
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import ipywidgets as w

from explorer._plots_nas import make_nas_pareto_figure, update_nas_pareto_figure
from explorer.analysis import NasFrontInfo, NasPointInfo, format_count, format_ms, nas_front_info
from explorer.nas import (
    KINDS,
    NETWORKS,
    NasProgress,
    NasResult,
    Network,
    format_ratio,
    nas_search,
)
from explorer.plots import on_point_click
from explorer.search import STRATEGIES
from explorer.session import ScheduleSession
from explorer.storage import summarize_run
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobState
from widgets._panel import Panel
from widgets._style import themed

log = logging.getLogger(__name__)

NAS_PACKAGES = ("jax", "sklearn")
"""What the Fisher Potential needs (the ``nas`` extra), checked before a search starts."""
INSTALL_HINT = "pip install 'schedule-explorer[nas]'"
DEFAULT_KINDS = ("keep", "group", "bottleneck", "split_group")
"""The kinds ticked at first: cheap to score and to tune, and each changes the network."""

# ipywidgets cuts a Label at one line ("..."); the status and the notice are sentences that
# must be read whole, so they wrap (still Labels: a message never becomes markup).
CSS = """
.se-nas .widget-label.se-nas-status,
.se-nas .widget-label.se-nas-notice {
  white-space: normal;
  line-height: 1.45;
  height: auto;
  padding: 4px 0;
}
"""


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
        result: the last search's ``NasResult`` (kept when it was stopped).
        info: ``nas_front_info(result)``, what the table and the plot show.
        figure: the Pareto ``FigureWidget``.
        on_open: called with the opened ``ScheduleSession`` after a click opened a layer (the
            ``Explorer`` switches to its Schedule tab).

    Example:
        >>> panel = NasPanel(ctx)  # doctest: +SKIP
        >>> panel.network.value, panel.width.value = "resnet18_cifar", 8  # doctest: +SKIP
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

        self.network = _tagged(
            w.Dropdown(
                options=self._network_names(), value="resnet18_cifar", description="Network"
            ),
            "se-nas-network",
        )
        self.width = _tagged(
            w.IntText(value=8, description="Width", tooltip="channels of the first stage"),
            "se-nas-width",
        )
        self.width_note = _tagged(w.Label(value=""), "se-nas-width-note")
        self.kinds = {
            kind: _tagged(
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
        self.tau = _tagged(
            w.FloatText(
                value=1.0,
                description="τ (tau)",
                tooltip="legal iff FP(candidate) >= tau x FP(original)",
            ),
            "se-nas-tau",
        )
        self.samples = _tagged(w.IntText(value=6, description="Samples"), "se-nas-samples")
        self.budget = _tagged(
            w.IntText(
                value=4,
                description="Trials/shape",
                tooltip="trials per distinct convolution (each shape is tuned once)",
            ),
            "se-nas-budget",
        )
        names = list(STRATEGIES)
        self.strategy = _tagged(
            w.Dropdown(options=names, value=names[0], description="Strategy"), "se-nas-strategy"
        )
        self.seed = _tagged(w.IntText(value=0, description="Seed"), "se-nas-seed")
        self.run_button = _tagged(
            w.Button(description="Run", button_style="primary", icon="play"), "se-nas-run"
        )
        self.stop_button = _tagged(
            w.Button(description="Stop", disabled=True, icon="stop"), "se-nas-stop"
        )
        self.progress = _tagged(
            w.IntProgress(value=0, min=0, max=1, description="Shapes"), "se-nas-progress"
        )
        self.status = _tagged(w.Label(value="Ready."), "se-nas-status")
        self.table = _tagged(w.HTML(value=""), "se-nas-table")
        self.table.layout.max_height = "320px"
        self.table.layout.overflow = "auto"
        self.figure = make_nas_pareto_figure(None)
        self.notice = _tagged(
            w.Label(value="Click a point to open one of its layers in the editor."),
            "se-nas-notice",
        )

        self.network.observe(lambda _: self._guard(self._sync_width), names="value")
        self.run_button.on_click(lambda _: self._guard(self.run))
        self.stop_button.on_click(lambda _: self._guard(self.stop))
        self._sync_width()

        kinds_row = w.HBox(
            [w.Label(value="Transformations:"), *self.kinds.values()],
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )
        buttons = w.HBox([self.run_button, self.stop_button])
        buttons.add_class("se-buttons")
        figure_box = w.Box([self.figure], layout=w.Layout(width="100%"))
        figure_box.add_class("se-nas-pareto")
        self.widget = w.VBox(
            [
                w.HBox([self.network, self.width, self.width_note]),
                kinds_row,
                w.HBox([self.tau, self.samples, self.budget]),
                w.HBox([self.strategy, self.seed]),
                buttons,
                self.progress,
                self.status,
                self.table,
                figure_box,
                self.notice,
                w.HTML(f"<style>{CSS}</style>", layout=w.Layout(display="none")),
            ]
        )
        self.widget.add_class("se-nas")
        themed(self.widget)

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
            width = int(self.width.value)
            if width < 1:
                return f"Width must be at least 1 channel (got {width})."
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
            self._say(
                f"Not started: {jobs.current.name} is still running; stop it (or wait) before "
                "starting another."
            )
            return None
        problem = self._check()
        if isinstance(problem, str):
            self._say(f"Not started: {problem}")
            return None
        network, kinds = problem
        samples, budget, tau = int(self.samples.value), int(self.budget.value), self.tau.value
        strategy, seed, target = str(self.strategy.value), int(self.seed.value), self.ctx.target

        def search(job: Job) -> NasResult:
            # Worker thread: progress reaches the widgets through the UI thread.
            with self.ctx.search_measurer() as measurer:
                return nas_search(
                    network,
                    samples=samples,
                    budget=budget,
                    store=self.ctx.store,
                    measurer=measurer,
                    target=target,
                    strategy=strategy,
                    tau=float(tau),
                    seed=seed,
                    batch_size=self.fisher_batch,
                    kinds=kinds,
                    tune_batch=self.tune_batch,
                    should_stop=job.is_cancelled,
                    on_progress=lambda p: _ui.call_soon(self._on_progress, p),
                )

        self.progress.value, self.progress.max, self.progress.bar_style = 0, 1, "info"
        self._set_running(True)
        self._say(
            f"Scoring {samples} candidate{'s' * (samples != 1)} of {network.name} by their "
            "Fisher Potential (JAX compiles on first use: tens of seconds)..."
        )
        self.job = jobs.submit("NAS search", search, on_done=self._on_done)
        return self.job

    def stop(self) -> None:
        """Ask the running search to stop before its next shape (tuned shapes are kept)."""
        if self.job is None or not self.job.is_active:
            self._say("No NAS search is running.")
            return
        self.job.cancel()
        self.stop_button.disabled = True
        self._say("Stopping (after the current batch of the current shape)...")

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
            timing = f", {secs * 1e3:.4g} ms" if secs else ""
            what = f"its tuning's best schedule (trial {best.id}{timing})"
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
        if self.job is None or self.job._settled:
            return  # a late report of a search that has ended
        self.progress.max = max(p.total, 1)
        self.progress.value = min(p.done, p.total)
        if p.conv is None:
            self._say(f"Tuned {p.done}/{p.total} distinct convolutions; ranking the networks...")
            return
        how = "found in the store" if p.is_cached else "tuning"
        self._say(
            f"Shape {p.done + 1}/{p.total}: conv2d {p.conv.label()} ({how}, "
            f"{int(self.budget.value)} trials with {self.strategy.value})..."
        )

    def _on_done(self, job: Job) -> None:
        self._set_running(False)
        if job.state is JobState.ERROR:
            self.progress.bar_style = "danger"
            self._say(f"NAS search failed: {_sentence(job.exception)}")
            return
        result: NasResult = job.result
        self.result = result
        self.info = info = nas_front_info(result)
        update_nas_pareto_figure(self.figure, info)
        on_point_click(self.figure, "nas|", self._on_click)
        self.table.value = _table(info)
        stopped = job.state is JobState.CANCELLED or result.stopped
        self.progress.bar_style = "warning" if stopped else "success"
        if not stopped:
            self.progress.value = self.progress.max
        self._say(_summary(info, stopped))

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
    def _check(self) -> tuple[Network, tuple[str, ...]] | str:
        """The network and kinds to search, or what is wrong with the settings (one sentence,
        checked before anything runs)."""
        missing = [name for name in NAS_PACKAGES if importlib.util.find_spec(name) is None]
        if missing:
            return (
                f"the NAS search needs {' and '.join(missing)} (the nas extra), which "
                f"{'is' if len(missing) == 1 else 'are'} not installed: {INSTALL_HINT}."
            )
        tau = self.tau.value
        if not isinstance(tau, (int, float)) or not math.isfinite(tau) or tau < 0:
            return f"τ must be a finite number >= 0 (got {tau})."
        if int(self.samples.value) < 1:
            return f"Samples must be at least 1 candidate (got {self.samples.value})."
        if int(self.budget.value) < 1:
            return f"Trials/shape must be at least 1 (got {self.budget.value})."
        kinds = tuple(k for k, box in self.kinds.items() if box.value)
        if not [k for k in kinds if k != "keep"]:
            return "tick at least one transformation (besides keep) to sample."
        network = self.selected_network()
        if isinstance(network, str):
            return network
        return network, kinds

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


def _summary(info: NasFrontInfo, stopped: bool) -> str:
    legal = info.num_candidates - info.num_illegal
    text = (
        f"{'Stopped' if stopped else 'Done'}: {info.num_candidates} candidates, {legal} legal; "
        f"{info.num_shapes} distinct convolutions ({info.num_cached} found in the store); "
        f"Fisher Potentials {info.fisher_secs:.1f} s, tuning {info.tuning_secs:.1f} s."
    )
    if info.fastest is not None and info.speedup is not None:
        fastest = info.points[info.fastest]
        if fastest.is_original:
            text += " No legal candidate beat the original."
        else:
            text += f" Fastest legal: {fastest.name}, {info.speedup:.2f}x the original's speed."
    if info.num_untimed:
        text += f" {info.num_untimed} legal network(s) not timed."
    return text


_COLUMNS = (
    "network",
    "transformations",
    "FP ratio",
    "legal",
    "MACs",
    "params",
    "tuned latency",
    "on front",
)


def _table(info: NasFrontInfo) -> str:
    """The HTML table of the networks (escaped text), the front's rows in bold, the illegal
    ones greyed."""
    head = "".join(f"<th style='{_CELL}text-align:left'>{c}</th>" for c in _COLUMNS)
    rows = [_row(p) for p in info.points]
    return (
        "<table class='se-nas-rows' style='border-collapse:collapse;font-size:12px'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


_CELL = "padding:2px 12px 2px 0;border-bottom:1px solid #eee;"


def _row(p: NasPointInfo) -> str:
    cells = [
        p.name,
        p.changes,
        format_ratio(p.fisher_ratio),
        "yes" if p.is_legal else "no",
        format_count(p.macs),
        format_count(p.params),
        format_ms(p.latency_ms) if p.is_legal else "not tuned",
        "yes" if p.is_on_front else "",
    ]
    style = "font-weight:600;" if p.is_on_front else ("color:#999;" if not p.is_legal else "")
    tds = "".join(f"<td style='{_CELL}'>{html.escape(c)}</td>" for c in cells)
    return f"<tr class='se-nas-row' data-index='{p.index}' style='{style}'>{tds}</tr>"


def _sentence(exc: BaseException | None) -> str:
    """What a failed search raised, as one sentence (a missing extra names its install)."""
    if exc is None:
        return "unknown error."
    text = str(exc).rstrip()
    name = "" if isinstance(exc, (ImportError, ValueError)) else f"{type(exc).__name__}: "
    return f"{name}{text}" + ("" if text.endswith(".") else ".")


def _tagged(widget: Any, css_class: str) -> Any:
    widget.add_class(css_class)
    return widget


__all__ = ["NasPanel"]
