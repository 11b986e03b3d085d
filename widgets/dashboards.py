"""Live dashboards of the current workload: convergence, strategy comparison, predicted vs
measured, knob effects.

Data flow: the store's subscription hands over every committed batch (on the writer's thread,
which only posts it to the UI thread); matching trials are queued, and a timer coalesces them
into at most one refresh per ``refresh_secs``. A refresh computes on a worker thread and draws on
the UI thread (``widgets._ui``). The first refresh of a workload loads a ``TrialTable`` from the
store's ``trial_rows`` (columns, no trace decoded: 100k decoded records would take gigabytes and
seconds); later ones append the queue to it. Every figure is redrawn from its
``explorer.analysis`` info, the runs' best-so-far curves included (computed from the table, so
re-measurements are recognised the same way everywhere). Clicking a trial in the
predicted-vs-measured or convergence plot opens it in the editor (``ctx.open_record``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets as w

from explorer import plots, report
from explorer.analysis import (
    ConvergenceInfo,
    KnobEffectsInfo,
    Metric,
    TrialTable,
    convergence_info,
    knob_effects_info,
    predicted_vs_measured_info,
    run_curve,
    shown_strategy,
    strategy_comparison_info,
)
from explorer.session import ScheduleSession
from explorer.space import KnobSpace
from explorer.storage import MANUAL, CheckSummary, TrialRecord, check_unchecked
from explorer.target import Target
from explorer.workloads import Workload
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobRunner
from widgets._panel import Panel
from widgets._plot import LiveFigure
from widgets._style import themed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Frame:
    """What one refresh computed (on a worker), for the UI thread to draw."""

    workload: Workload
    target: Target
    table: TrialTable
    infos: dict[str, Any]
    status: str
    read_at: float  # time.monotonic() before the store was read


class Dashboards(Panel):
    """The four dashboard figures of the current session's workload and target.

    Args:
        ctx: the shared context (its store, its ``"session"`` event).
        refresh_secs: the shortest time between two live refreshes.
        metric: ``"gflops"`` or ``"latency_ms"`` for the convergence and comparison plots.
        max_points: points per cost model in the predicted-vs-measured scatter.
        max_lines: trials drawn in the knob parallel-coordinates plot.

    Attributes:
        widget: the container to display.
        convergence_fig, pred_vs_meas_fig, comparison_fig, knobs_fig: the ``LiveFigure``s.
        infos: the infos of the last refresh, by plot name (for tests and notebooks).
        notice: what the last click on a point opened; ``on_open(record)`` is called after it
            (the ``Explorer`` switches to its Schedule tab).

    Example:
        >>> dash = Dashboards(Context(store="records.db"))  # doctest: +SKIP
        >>> dash  # a notebook cell ending here shows the figures  # doctest: +SKIP
    """

    def __init__(
        self,
        ctx: Context,
        *,
        refresh_secs: float = 0.5,
        poll_secs: float = 3.0,
        metric: Metric = "gflops",
        max_points: int = 2000,
        max_lines: int = 1000,
    ) -> None:
        self.ctx = ctx
        self.refresh_secs = refresh_secs
        self.poll_secs = poll_secs
        self.metric = metric
        self.max_points = max_points
        self.max_lines = max_lines
        self.infos: dict[str, Any] = {}

        # Touched on the UI thread only; a refresh's worker gets copies.
        self._workload: Workload | None = None
        self._target: Target | None = None
        self._table: TrialTable | None = None  # None: (re)load from the store
        self._pending: list[TrialRecord] = []
        self._stale = False  # the store changed behind the table's back: reload it whole
        self._timer: threading.Timer | None = None  # a refresh is due
        self._lost: threading.Timer | None = None  # fired, not started at the last poll
        self.lost_refreshes = 0  # refreshes started by the poll after their call was lost
        self._jobs = JobRunner("explorer-dashboards")
        self._last_refresh = 0.0
        self._checked_at = -math.inf  # when a check of unchecked timings last ended
        self._closed = False
        self.on_open: Callable[[TrialRecord], None] | None = None
        self._make_figures()
        self._make_controls()
        self.widget = self._layout()
        self._unsubscribe = [
            # the writer's thread (a search's) only hands the batch over
            ctx.store.subscribe(lambda records: _ui.call_soon(self._on_batch, records)),
            ctx.on("session", self._on_session),
        ]
        if ctx.session is not None:
            self._on_session(ctx.session)
        # The store's own announcements cover this process's writes only: every poll_secs the
        # panel compares the store's trial count with what it was told, and reloads when they
        # differ (another notebook or process on the same database; a batch whose announcement
        # never reached this panel: seen once on a page whose plot then stayed behind).
        self._told = ctx.store.count_trials()
        self._poll: threading.Timer | None = _ui.call_later(poll_secs, self._check_store)

    def _make_figures(self) -> None:
        self.convergence_fig = LiveFigure(plots.make_convergence_figure(convergence_info(())))
        self.comparison_fig = LiveFigure(
            plots.make_strategy_comparison_figure(strategy_comparison_info(()))
        )
        self.pred_vs_meas_fig = LiveFigure(
            plots.make_predicted_vs_measured_figure(predicted_vs_measured_info(()))
        )
        self.knobs_fig = LiveFigure(plots.make_knob_effects_figure(_no_knobs()))

    def _make_controls(self) -> None:
        """The status and click notice, Check unchecked timings, Every target, Save report."""
        self.status = w.Label(value="Open or build a schedule to see its dashboards.")
        self.status.add_class("se-dashboards-status")
        # What a click on a point did (the editor may be on another tab).
        self.notice = w.Label(value="Click a point to open its schedule in the editor.")
        self.notice.add_class("se-dashboards-notice")
        # Timings imported from MetaSchedule are unchecked until our measurer has compared the
        # output with NumPy; the button re-measures this workload's (hidden when there are none).
        self.check_button = w.Button(
            description="Check unchecked timings",
            tooltip="re-measure this workload's MetaSchedule timings, output checked vs NumPy",
            layout=w.Layout(display="none", width="auto"),
        )
        self.check_button.add_class("se-check-unchecked")
        self.check_button.on_click(lambda _button: self.check_unchecked())
        # The same workload's runs on the other targets too (a fleet's devices, say), as more
        # groups of the convergence and strategy plots; the other two plots stay per target.
        self.all_targets = w.Checkbox(
            value=False,
            description="Every target in the convergence and strategy plots",
            indent=False,
            layout=w.Layout(width="auto"),
        )
        self.all_targets.add_class("se-all-targets")
        self.all_targets.observe(lambda _change: self._schedule(immediately=True), "value")
        # "Save report": the runs shown, as one HTML file to share (explorer.report).
        self._report_jobs = JobRunner("explorer-report")
        self.report_name = w.Text(value="report.html", layout=w.Layout(width="14em"))
        self.report_name.add_class("se-report-name")
        self.report_button = w.Button(
            description="Save report",
            tooltip="write these runs' plots, best schedules and settings into one HTML file "
            "that opens in any browser",
        )
        self.report_button.add_class("se-save-report")
        self.report_button.on_click(lambda _button: self.save_report())
        self.report_status = w.Label()
        self.report_status.add_class("se-report-status")

    def _layout(self) -> w.VBox:
        box = w.VBox(
            [
                w.VBox(
                    [
                        w.HBox([self.status, self.check_button]),
                        self.notice,
                        self.all_targets,
                        w.HBox([self.report_name, self.report_button, self.report_status]),
                    ]
                ),
                # Stacked, not side by side: each plot takes the whole width.
                _boxed(self.convergence_fig, "se-convergence"),
                _boxed(self.pred_vs_meas_fig, "se-pred-vs-meas"),
                _boxed(self.comparison_fig, "se-comparison"),
                _boxed(self.knobs_fig, "se-knobs"),
            ]
        )
        box.add_class("se-dashboards")
        themed(box)
        return box

    # -- events (UI thread) -------------------------------------------------------------------
    def _on_session(self, session: ScheduleSession) -> None:
        if self._workload == session.workload and _same_target(self._target, session.target):
            return  # e.g. a record of this workload was opened: nothing to reload
        self._workload, self._target = session.workload, session.target
        self._table = None
        self._pending = []
        self._schedule(immediately=True)

    def _check_store(self) -> None:
        if self._closed:
            return
        try:
            stored = self.ctx.store.count_trials()
        except Exception:
            log.debug("dashboards: cannot count the store's trials", exc_info=True)
            stored = self._told
        if stored != self._told:
            self._told = stored
            self._stale = True  # the next refresh reads the table whole, from the store
            self._schedule(immediately=True)
        self._start_a_lost_refresh()
        self._poll = _ui.call_later(self.poll_secs, self._check_store)

    def _start_a_lost_refresh(self) -> None:
        """Start a refresh that has been due for a whole poll although its timer has fired.

        In full runs of the test suite (never alone, nor beside CPU burners) the convergence
        plot sometimes stopped after a search: the panel held a due refresh whose timer had
        fired and whose call never ran, and every later refresh waited behind it. The cause
        is not found; the panel no longer depends on it, and counts it (``lost_refreshes``).
        """
        timer = self._timer
        if timer is None or timer.is_alive():
            self._lost = None
            return
        if self._lost is not timer:
            self._lost = timer  # its call may still be queued: give it one poll
            return
        log.warning("dashboards: a refresh due since the last poll never started; starting it")
        self.lost_refreshes += 1
        self._lost = None
        self._start_refresh()

    def _on_batch(self, records: list[TrialRecord]) -> None:
        self._told += len(records)
        if self._workload is None or self._target is None:
            return
        wk, tk = self._workload.key(), self._target.key()
        mine = [
            r
            for r in records
            if r.candidate.workload.key() == wk and r.candidate.target.key() == tk
        ]
        if mine:
            self._pending.extend(mine)
            self._schedule()
        elif self.all_targets.value and any(r.candidate.workload.key() == wk for r in records):
            self._schedule()  # another target's runs are read from the store at the refresh

    def _schedule(self, *, immediately: bool = False) -> None:
        """Refresh soon; batches arriving meanwhile join that refresh."""
        if self._timer is not None or self._closed or self._jobs.busy:
            return  # a refresh is due or under way: it (or the one after it) takes them
        wait = 0.0 if immediately else self._last_refresh + self.refresh_secs - time.monotonic()
        self._timer = _ui.call_later(wait, self._start_refresh)

    def _start_refresh(self) -> None:
        self._timer = None
        if self._closed or self._workload is None or self._target is None:
            return
        workload, target = self._workload, self._target
        table = None if self._stale else self._table
        pending, self._pending, self._stale = self._pending, [], False
        every = self.all_targets.value
        self._jobs.submit(
            "dashboard refresh",
            lambda _job: self._compute(workload, target, table, pending, all_targets=every),
            on_done=self._refreshed,
        )

    def _refreshed(self, job: Job) -> None:
        failed = job.exception is not None
        if failed:  # shown, and never retried in a loop
            log.error("dashboard refresh failed: %s", job.exception)
            self.status.value = f"Dashboard refresh failed: {type(job.exception).__name__}: " + (
                f"{job.exception}"
            )
        elif not self._closed:
            self._draw(job.result)
        # Batches that arrived meanwhile get the next refresh, one interval after this one
        # (at once for a session changed meanwhile).
        reload = (self._table is None or self._stale) and not failed
        if reload or self._pending:
            self._schedule(immediately=reload)

    # -- refresh ------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Bring every figure up to date with the store now (on the UI thread; tests call it)."""
        _ui.drain()  # batches the store announced but the UI thread has not taken yet
        if self._workload is None or self._target is None:
            return
        pending, self._pending = self._pending, []
        every = self.all_targets.value
        self._draw(
            self._compute(self._workload, self._target, self._table, pending, all_targets=every)
        )

    def _compute(
        self,
        workload: Workload,
        target: Target,
        table: TrialTable | None,
        pending: list[TrialRecord],
        *,
        all_targets: bool = False,
    ) -> _Frame:
        """Everything a refresh shows, from the store (any thread; writes no widget)."""
        read_at = time.monotonic()
        if table is None:
            table = self._load(workload, target)
        if pending:
            known = table.has([r.id for r in pending])
            table = table.extend(r for r, k in zip(pending, known, strict=True) if not k)
        runs = self.ctx.store.runs(workload=workload, target=target)
        curves = [run_curve(table, run) for run in runs]
        if all_targets:  # one group per (strategy, target) in the plots
            others = self.ctx.store.runs(workload=workload)
            curves += [
                run_curve(self.ctx.store, r) for r in others if r.target.key() != target.key()
            ]
        searches = [c for c in curves if c.run.strategy != MANUAL]
        conv = convergence_info(curves, metric=self.metric)
        infos: dict[str, Any] = dict(
            convergence=conv,
            comparison=strategy_comparison_info(searches, metric=self.metric),
            pred_vs_meas=predicted_vs_measured_info(table, max_points=self.max_points),
        )
        space = self._space(workload, target)
        infos["knobs"] = (
            knob_effects_info(table, space, max_lines=self.max_lines)
            if isinstance(space, KnobSpace)
            else _no_knobs()
        )
        summary = _summary(workload, target, table, conv, space)
        return _Frame(workload, target, table, infos, summary, read_at)

    def _draw(self, frame: _Frame) -> None:
        if frame.workload is not self._workload or frame.target is not self._target:
            return  # the session changed meanwhile; its own refresh is scheduled
        self._table = frame.table
        self.infos.update(frame.infos)
        plots.update_convergence_figure(self.convergence_fig, frame.infos["convergence"])
        plots.update_strategy_comparison_figure(self.comparison_fig, frame.infos["comparison"])
        plots.update_predicted_vs_measured_figure(
            self.pred_vs_meas_fig, frame.infos["pred_vs_meas"]
        )
        plots.update_knob_effects_figure(self.knobs_fig, frame.infos["knobs"])
        # Updates may have replaced the traces: (re-)attach the click handlers.
        plots.on_point_click(self.convergence_fig, "runs|", self._on_convergence_click)
        plots.on_point_click(self.pred_vs_meas_fig, "pvm|", self._on_pred_click)
        self.status.value = frame.status
        # A frame read before the last check ended counts the timings it checked as unchecked
        # (seen: "Check 2 unchecked timings" drawn over "Checked 2: 2 ok" on a busy machine);
        # the check's trials bring a refresh of their own.
        if frame.read_at > self._checked_at:
            self._show_check_button(frame.table.num_unchecked)
        self._last_refresh = time.monotonic()

    # -- "check these" ------------------------------------------------------------------------
    def check_unchecked(self) -> Job | None:
        """Re-measure this workload's unchecked timings in the background (``explorer check``).

        The checked trials reach the figures through the store, like any other measurement.
        """
        workload, target = self._workload, self._target
        runner = self.ctx.measure_jobs
        if workload is None or target is None:
            return None
        if runner.busy:
            busy = runner.current.name if runner.current is not None else "a measurement"
            self.status.value = f"Busy ({busy}): check again when it ends."
            return None

        def check(_job: Job) -> CheckSummary:
            return check_unchecked(
                self.ctx.store, self.ctx.measurer, workload=workload, target=target
            )

        def done(job: Job) -> None:
            if job.exception is not None:
                self.status.value = f"Checking failed: {job.exception}"
                self.check_button.disabled = False
                return
            self._checked_at = time.monotonic()
            summary: CheckSummary = job.result
            self.check_button.description = (
                f"Checked {summary.checked}: {summary.ok} ok, {summary.failed} not ok"
            )

        self.check_button.disabled = True
        self.check_button.description = "Checking…"
        return runner.submit("checking unchecked timings", check, on_done=done)

    # -- "save report" ------------------------------------------------------------------------
    def save_report(self, path: str | None = None) -> Job | None:
        """Write the runs shown into one HTML file (``explorer.report.write_report``) in the
        background; ``path`` defaults to the file name field. The label says where it went."""
        name = (path if path is not None else self.report_name.value).strip()
        workload, target = self._workload, self._target
        if self._report_jobs.busy:
            return None
        runs = [] if workload is None else self.ctx.store.runs(workload=workload, target=target)
        if not runs or not name:
            self.report_status.value = (
                "Give the report a file name." if runs else "No runs to report yet."
            )
            return None
        run_ids = [r.id for r in runs]
        dest = Path(name).expanduser().absolute()

        def done(job: Job) -> None:
            self.report_button.disabled = False
            exc = job.exception
            if exc is not None:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                self.report_status.value = f"Could not write {dest}: {why}"
                return
            r: report.ReportResult = job.result
            self.report_status.value = (
                f"Wrote {r.path} ({r.size_bytes / 1e6:.1f} MB, "
                f"{r.num_runs} run{'s' * (r.num_runs != 1)})"
            )

        self.report_button.disabled = True
        self.report_status.value = f"Writing {dest}…"
        return self._report_jobs.submit(
            "saving a report",
            lambda _job: report.write_report(self.ctx.store, dest, run_ids),
            on_done=done,
        )

    def _show_check_button(self, num_unchecked: int) -> None:
        button = self.check_button
        button.layout.display = "" if num_unchecked else "none"
        if num_unchecked and not self.ctx.measure_jobs.busy:
            button.disabled = False
            button.description = f"Check {num_unchecked} unchecked timings"

    def _load(self, workload: Workload, target: Target) -> TrialTable:
        # Run by run: the status shows progress, and only one run's rows are alive at a time.
        runs = self.ctx.store.runs(workload=workload, target=target)
        table = TrialTable.empty()
        for i, run in enumerate(runs):
            text = f"Loading the trials of {workload.key()}: run {i + 1}/{len(runs)}"
            _ui.call_soon(self._say, text)
            table = table.extend(self.ctx.store.trial_rows(run_id=run.id))
        return table

    def _space(self, workload: Workload, target: Target) -> KnobSpace | str:
        try:
            return KnobSpace.of(workload, target)
        except Exception as exc:  # noqa: BLE001 - TVM refused the workload: the other plots still work
            log.warning("no knob space for %s: %s", workload.key(), exc)
            return f"no knob space: {exc}"

    # -- clicks -------------------------------------------------------------------------------
    def _on_pred_click(self, trace: Any, points: Any, state: Any = None) -> None:
        picked = _picked(trace, points)
        if picked:  # one click, one trial: the first point under the cursor
            self._open(lambda: int(picked[0]))

    def _on_convergence_click(self, trace: Any, points: Any, state: Any = None) -> None:
        picked = _picked(trace, points)
        if picked:
            run_id, seq = picked[0]
            self._open(lambda: self._trial_at(int(run_id), int(seq)))

    def _trial_at(self, run_id: int, seq: int) -> int:
        table = self._table
        trial_id = table.trial_id_at(run_id, seq) if table is not None else None
        if trial_id is None:  # not loaded yet: ask the store
            rows = self.ctx.store.trial_rows(run_id=run_id)
            trial_id = next(t.id for t in rows if t.seq == seq)
        return trial_id

    def _open(self, trial_id: Callable[[], int]) -> None:
        """Open a trial in the editor; a click must never raise into the front end."""
        try:
            record = self.ctx.store.get_trial(trial_id())
            opened = self.ctx.open_trial(record)
        except Exception as exc:
            log.exception("opening a clicked trial failed")
            self.notice.value = f"Could not open that trial: {type(exc).__name__}: {exc}"
            return
        secs = record.median_secs
        timing = f", {secs * 1e3:.4g} ms" if secs else ""
        run = self.ctx.store.get_run(record.run_id)
        self.notice.value = f"Opened {opened} ({shown_strategy(run)}{timing}; Schedule tab)."
        if self.on_open is not None:
            self.on_open(record)

    # -- lifetime -----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop listening to the store and the session; cancel a pending refresh."""
        self._closed = True
        for timer in (self._timer, self._poll):
            if timer is not None:
                timer.cancel()
        self._timer = self._poll = None
        self._jobs.shutdown()
        self._report_jobs.shutdown()
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []


def _picked(trace: Any, points: Any) -> list[Any]:
    """The ``customdata`` of the clicked points (separators of multi-run lines have none)."""
    data: Sequence[Any] = trace.customdata if trace.customdata is not None else ()
    return [data[i] for i in points.point_inds if i < len(data) and data[i] is not None]


def _boxed(fig: LiveFigure, css_class: str) -> w.Box:
    box = w.Box([fig.widget], layout=w.Layout(width="100%"))
    box.add_class(css_class)
    return box


def _same_target(a: Target | None, b: Target) -> bool:
    return a is not None and a.key() == b.key()


def _no_knobs() -> KnobEffectsInfo:
    return KnobEffectsInfo((), (), (), (), 0, 0, 0, 0, 0, 0)


def _summary(
    workload: Workload,
    target: Target,
    table: TrialTable,
    conv: ConvergenceInfo,
    space: KnobSpace | str,
) -> str:
    # A baseline is measured once per run, then re-timed with the best: its first timing is
    # "the baseline", the others re-measurements.
    baselines = len(set(table.run_ids[table.is_baseline].tolist()))
    again = table.num_remeasured - baselines
    extra = f" + {baselines} unscheduled baseline{'s' * (baselines != 1)}" if baselines else ""
    extra += f" + {again} re-measurement{'s' * (again != 1)}" if again else ""
    # Unchecked timings (MetaSchedule's) are not plotted as successes; say why they are missing.
    unchecked = table.num_unchecked
    unchecked_note = f", {unchecked} unchecked: `explorer check`" if unchecked else ""
    text = (
        f"{workload.key()} on {target.name or target.key()}: {table.num_trials} trials{extra} "
        f"({table.num_failed} failed{unchecked_note}) in {conv.num_runs} "
        f"run{'s' * (conv.num_runs != 1)}"
    )
    return text if isinstance(space, KnobSpace) else f"{text}; {space}"


__all__ = ["Dashboards"]
