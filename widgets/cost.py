"""``CostPanel``: what the current schedule should cost (cost models) and what it does cost
(a measurement), after every edit.

The panel only displays: the predictions come from ``explorer.cost_models.Predictor`` (which
trains the learned models on the store's records), a schedule's stored measurement and its rank
from the store. After each edit one background job asks both for the current schedule; a fast
answer is shown before the edit's callback returns (the handler waits up to ``sync_secs``), a
slow one arrives when ready, and edits made meanwhile collapse into one follow-up. Measurements
run on ``ctx.measure_jobs`` and are stored in the workload's ``manual`` run. Every widget write
happens on the UI thread (``widgets._ui``).

What the panel promises about Measure:

* A reading on screen belongs to the schedule on screen: the latency line is about the
  schedule the editor shows, never about the one a running measurement was started for.
* "Measuring step N" stays on screen until step N's reading arrives (in the status line when
  another schedule is shown meanwhile), and says so when it does.
* A click measures the schedule on screen when the click is handled: in a kernel that is after
  every earlier click, an Apply clicked just before it included.
* A click while another measurement runs is queued, and the panel says so ("Queued: step 4"):
  the user asked for that schedule's reading, and it comes without a second click. A click on a
  schedule that is being measured or is queued already is refused with a notice saying so: a
  second reading of it is not what the click can have meant while the first is on its way.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ipywidgets as w

from explorer.cost_models import MODELS, Prediction, Predictor
from explorer.measure import Candidate
from explorer.session import ScheduleSession, Snapshot
from explorer.storage import NewTrial, TrialRecord, name_trial
from explorer.text import format_secs
from widgets import _ui
from widgets._context import Context
from widgets._cost_views import (
    Measurement,
    candidate_key,
    details_html,
    error_html,
    latency_html,
    latency_text,
    measurement,
    predictions_html,
    rank_text,
)
from widgets._jobs import Job, JobRunner
from widgets._panel import Panel
from widgets._style import themed
from widgets.code_view import CodeView

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Order:
    """One accepted Measure: the schedule on screen when the click was handled."""

    candidate: Candidate
    key: str  # candidate_key(candidate)
    label: str  # "step 3"
    scores: dict[str, float]  # what the models predicted for it (stored with the reading)
    is_auto: bool = False  # asked by "Measure after every edit" (only the latest edit counts)


@dataclass(frozen=True)
class _Look:
    """What a prediction job found about one schedule."""

    key: str
    predictions: dict[str, Prediction]
    stored: Measurement | None  # its stored measurement to show (``_shown_of``)


class CostPanel(Panel):
    """Predicted and measured cost of the current schedule.

    Args:
        ctx: the shared explorer state (session, store, measurer, measure jobs).
        models: the cost models to ask (names of ``explorer.cost_models.COST_MODELS``).
        sync_secs: how long an edit waits for its prediction before leaving it to the
            background.

    Attributes:
        widget: the container to display.
        predictions: ``HTML`` table of the models' predictions.
        measure_button, auto_measure: the Measure button and the measure-after-every-edit box.
        latency, details, message: the current schedule's measurement (latency, GFLOPS), its
            correctness, rank and roofline, and notices (a refused Measure).
        measure_status: measurements that are not of the schedule on screen: one running, the
            queued ones, and the last reading that arrived for another schedule.
        predict_job, measure_job: the latest background jobs (``job.wait(t)`` in scripts).
        code: the generated code of the schedule on screen and its instruction mix
            (``widgets.code_view.CodeView``).
        predictor: the ``Predictor`` the panel asks.

    Example:
        >>> from explorer.workloads import get_workload
        >>> ctx = Context(store=":memory:")
        >>> ctx.set_session(ScheduleSession(get_workload("matmul", M=64, N=64, K=64)))
        >>> panel = CostPanel(ctx)
        >>> panel.measure_button.click()  # in the background, on ctx.measure_jobs
        >>> panel.measure_job.wait(120)
        True
        >>> panel.latency.value.startswith("Latency (step 0): <b>")  # then e.g. "46.4 µs"
        True
        >>> ctx.close()
    """

    def __init__(
        self, ctx: Context, *, models: Sequence[str] = MODELS, sync_secs: float = 1.0
    ) -> None:
        self.ctx = ctx
        self.models = tuple(models)
        self.sync_secs = sync_secs
        self.session: ScheduleSession | None = None
        self.predict_job: Job | None = None
        self.measure_job: Job | None = None
        self.last_predictions: dict[str, Prediction] = {}
        self.predictor = Predictor(ctx.store, models=self.models)
        self.code = CodeView(ctx, latency_of=self._latency_of)
        self.widget = self._make_widgets()

        # UI thread only: what is shown, by candidate key
        self._measured: dict[str, Measurement] = {}  # candidate key -> its latest measurement
        self._scores: tuple[str, dict[str, float]] | None = None  # candidate key -> raw scores
        self._current_key: str | None = None
        self._pending: Candidate | None = None
        self._running: _Order | None = None  # this panel's measurement on ctx.measure_jobs
        self._queue: list[_Order] = []  # accepted while busy, measured in click order
        self._failed: dict[str, tuple[str, BaseException]] = {}  # key -> (label, why)
        self._arrived = ""  # the last reading that arrived for a schedule not on screen
        self._notice_about: str | None = None  # the schedule a refusal on screen was about
        self._closed = False
        self._runner = JobRunner("explorer-predict")
        self._unsubscribe_free = ctx.measure_jobs.when_free(lambda: self._guard(self._next))
        self._unsubscribe_session: Callable[[], None] | None = None
        self._unsubscribe_store = ctx.store.subscribe(
            lambda records: _ui.call_soon(self._on_records, records)
        )
        self._unsubscribe_ctx = ctx.on("session", self.set_session)
        self.measure_button.on_click(lambda _b: self._guard(self.measure))
        self.auto_measure.observe(lambda c: self._guard(lambda: self._on_auto(c)), names="value")
        if ctx.session is not None:
            self.set_session(ctx.session)
        else:
            self.predictions.value = "<i>No workload yet.</i>"

    def _make_widgets(self) -> w.VBox:
        """Predicted (the cost models' scores), then Measured (the button and the reading)."""
        self.predictions = w.HTML()
        self.predictions.add_class("se-predictions")
        self.prediction_status = w.HTML()
        self.measure_button = w.Button(
            description="Measure",
            button_style="primary",
            icon="bolt",
            layout=w.Layout(width="auto", flex="0 0 auto"),
        )
        self.measure_button.add_class("se-measure")
        self.auto_measure = w.Checkbox(
            value=False,
            description="Measure after every edit",
            indent=False,
            layout=w.Layout(width="auto", margin="0 0 0 12px"),
        )
        self.auto_measure.add_class("se-auto-measure")
        self.latency = w.HTML("<i>Not measured yet.</i>")
        self.latency.add_class("se-latency")
        self.details = w.HTML()
        self.details.add_class("se-measure-details")
        self.message = w.HTML(layout=w.Layout(display="none"))
        self.message.add_class("se-cost-message")
        self.measure_status = w.HTML()
        self.measure_status.add_class("se-measure-status")
        measured = w.HTML("<b>Measured</b> (built and timed on the target)")
        measured.add_class("se-section")
        box = w.VBox(
            [
                w.HTML("<b>Predicted</b> (cost models, nothing is compiled or run)"),
                self.predictions,
                self.prediction_status,
                measured,
                w.HBox(
                    [self.measure_button, self.auto_measure],
                    layout=w.Layout(flex_flow="row wrap", align_items="center"),
                ),
                self.message,
                self.latency,
                self.details,
                self.measure_status,
                w.HTML("<b>Generated code</b> (what the CPU runs)"),
                self.code.widget,
            ]
        )
        box.add_class("se-cost")
        themed(box)
        return box

    @property
    def num_fits(self) -> int:
        """How many times a learned model was trained (an edit alone never retrains)."""
        return self.predictor.num_fits

    # -- session ------------------------------------------------------------------------------
    def set_session(self, session: ScheduleSession) -> None:
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
        self.session = session
        self._unsubscribe_session = session.on_change(self._on_change)
        self._on_change(session.snapshot)

    def _on_change(self, snapshot: Snapshot) -> None:
        # Runs inside session.apply/undo/...: an exception here would reach their caller.
        self._guard(lambda: self._changed(snapshot))

    def _changed(self, snapshot: Snapshot) -> None:
        assert self.session is not None
        candidate = self.session.candidate()
        self._current_key = candidate_key(candidate)
        self._clear_notice()  # a refusal was about the schedule on screen before
        self._show_measurement()
        self.refresh_predictions()
        if self.auto_measure.value:
            self._auto()

    # -- predictions --------------------------------------------------------------------------
    def refresh_predictions(self, *, wait: bool = True) -> Job | None:
        """Predict the current schedule (and find its stored measurement) in the background;
        wait up to ``sync_secs`` for the answer."""
        if self.session is None:
            return None
        candidate = self.session.candidate()
        if self._runner.busy:
            self._pending = candidate  # only the latest edit matters
            return self.predict_job
        job = self._submit_prediction(candidate)
        if wait and self.sync_secs > 0:
            job.wait(self.sync_secs)
        return job

    def _submit_prediction(self, candidate: Candidate) -> Job:
        self.prediction_status.value = "<i>predicting\u2026</i>"
        job = self._runner.submit(
            "predict", lambda _job: self._look(candidate), on_done=self._predicted
        )
        self.predict_job = job
        return job

    def predict(self, candidate: Candidate) -> dict[str, Prediction]:
        """Every model's prediction for ``candidate`` (blocking; ``Predictor.predict``)."""
        return self.predictor.predict(candidate)

    def _look(self, candidate: Candidate) -> _Look:
        # Worker thread: no widget, no session.
        stored = self.ctx.store.measurements_of(candidate)
        found = None
        if stored:
            record, label = _shown_of(stored, lambda r: name_trial(self.ctx.store, r))
            found = measurement(self.ctx.store, record, label)
        return _Look(candidate_key(candidate), self.predict(candidate), found)

    def _predicted(self, job: Job) -> None:
        # UI thread: show the answer if it is still about the current schedule, then ask about
        # the latest edit that arrived meanwhile (if any).
        pending, self._pending = self._pending, None
        if self._closed:
            return
        if job.exception is not None:
            self.predictions.value = error_html("Prediction failed", job.exception)
        else:
            look: _Look = job.result
            scores = {n: p.score for n, p in look.predictions.items() if p.score is not None}
            self._scores = (look.key, scores)
            known = self._measured.get(look.key)
            if look.stored is not None and (
                known is None or known.record.id < look.stored.record.id
            ):
                self._measured[look.key] = look.stored
            if look.key == self._current_key:
                self.last_predictions = look.predictions
                self.predictions.value = predictions_html(look.predictions)
                self._show_measurement()
        if pending is not None:
            if self._runner.busy:
                # A prediction started meanwhile (an edit handled while this callback waited
                # on the UI's queue): it answers next, and asks about what is still pending.
                self._pending = self._pending or pending
                return
            self._submit_prediction(pending)
            return
        self.prediction_status.value = ""

    # -- measurement --------------------------------------------------------------------------
    def measure(self) -> Job | None:
        """Build and time the schedule on screen in the background, or queue it behind the
        measurement that runs; a schedule being measured or queued already is refused. Every
        outcome is said on screen. Returns the job when one started now (``None``: queued,
        refused, or no workload)."""
        session = self.session
        if session is None:
            self._notice("Build a workload first.")
            return None
        return self._ask(self._order(session))

    def _order(self, session: ScheduleSession, *, is_auto: bool = False) -> _Order:
        candidate = session.candidate()
        key = candidate_key(candidate)
        # Store what the models said about exactly this schedule alongside its measurement.
        known = self._scores
        scores = known[1] if known is not None and known[0] == key else {}
        return _Order(candidate, key, f"step {session.snapshot.step_id}", scores, is_auto)

    def _ask(self, order: _Order) -> Job | None:
        same = (
            self._running if self._running is not None and self._running.key == order.key else None
        )
        if same is not None:
            self._notice(
                f"Not measured twice: {same.label} is being measured now"
                f"{self._same_schedule(same, order)}; its reading shows here when it arrives.",
                about=order.key,
            )
            return None
        queued = next((q for q in self._queue if q.key == order.key), None)
        if queued is not None:
            self._notice(
                f"Not queued twice: {queued.label} is queued already"
                f"{self._same_schedule(queued, order)}; it is measured when its turn comes.",
                about=order.key,
            )
            return None
        self._clear_notice()
        self._arrived = ""
        self._failed.pop(order.key, None)
        if order.is_auto:  # only the latest edit's schedule is worth measuring automatically
            self._queue = [q for q in self._queue if not q.is_auto]
        self._queue.append(order)
        self._next()
        self._show_measurement()
        return self.measure_job if self._running is order else None

    @staticmethod
    def _same_schedule(earlier: _Order, order: _Order) -> str:
        # " (step 5 is the same schedule)" when the click was on another step of it
        return "" if earlier.label == order.label else f" ({order.label} is the same schedule)"

    def _next(self) -> None:
        """Start the first queued measurement when ``ctx.measure_jobs`` is free (it is shared:
        the dashboards' check of unchecked timings may hold it)."""
        if self._closed or not self._queue or self.ctx.measure_jobs.busy:
            return
        order = self._queue.pop(0)
        self._running = order
        self.measure_job = self.ctx.measure_jobs.submit(
            f"measuring {order.label}",
            lambda _job: self._measure(order),
            on_done=lambda job: self._measured_done(order, job),
        )
        self._show_measurement()

    def _measure(self, order: _Order) -> Measurement:
        # Worker thread: no widget, no session.
        candidate = order.candidate
        watch = self.ctx.measurer.watch_busy()  # a busy machine can slow a reading evenly
        (result,) = self.ctx.measurer.measure([candidate])
        busy = None if watch is None else watch.share()
        record = self.ctx.record_manual(
            NewTrial(candidate, result, order.scores), candidate.workload, candidate.target
        )
        return measurement(self.ctx.store, record, order.label, busy)  # the peak after timing

    def _measured_done(self, order: _Order, job: Job) -> None:
        self._running = None
        if self._closed:
            return
        if job.exception is not None:
            self._failed[order.key] = (order.label, job.exception)
            reading = "failed"
        else:
            measured: Measurement = job.result
            self._measured[order.key] = measured
            reading = latency_text(measured.result)
        if order.key != self._current_key:
            self._arrived = f"{order.label[0].upper()}{order.label[1:]} measured: {reading}."
        if self._notice_about == order.key:  # "not measured twice": the reading is here now
            self._clear_notice()
        self._next()
        self._show_measurement()
        self.code.refresh()  # a comparison of two measured schedules says which ran faster
        self.refresh_predictions(wait=False)  # a new record may train the learned models
        if self.auto_measure.value:
            self._auto()

    def _latency_of(self, key: str) -> float | None:
        measured = self._measured.get(key)
        return measured.result.median_secs if measured and measured.result.is_ok else None

    def _auto(self) -> None:
        """Measure the schedule on screen unless it was measured already (or is on its way)."""
        if self.session is None or self._current_key in self._measured:
            return
        if self._running is not None and self._running.key == self._current_key:
            return
        if any(q.key == self._current_key for q in self._queue):
            return
        self._ask(self._order(self.session, is_auto=True))

    def _on_auto(self, change: dict[str, object]) -> None:
        if change["new"]:
            self._auto()

    def _on_records(self, records: list[TrialRecord]) -> None:
        # A measurement of the schedule on display (stored by a notebook cell, a search, the
        # CLI): look again, so the panel shows it.
        if self._closed or self._current_key is None:
            return
        if any(candidate_key(r.candidate) == self._current_key for r in records):
            self.refresh_predictions(wait=False)

    def _show_measurement(self) -> None:
        """The latency line for the schedule on screen; the status line for the others."""
        key = self._current_key or ""
        current = self._measured.get(key)
        running = self._running
        noisy = current is not None and (current.result.is_noisy or current.was_busy)
        # A busy machine spread the repeats or shared the CPUs: the button offers to measure
        # again.
        self.measure_button.description = "Measure again" if noisy else "Measure"
        queued = next((q for q in self._queue if q.key == key), None)
        if running is not None and running.key == key:
            self.latency.value = f"<i>Measuring {html.escape(running.label)}\u2026</i>"
            self.details.value = ""
        elif queued is not None:
            ahead = running.label if running is not None else "the measurement that runs"
            self.latency.value = (
                f"<i>Queued: {html.escape(queued.label)} is measured after "
                f"{html.escape(ahead)}.</i>"
            )
            self.details.value = ""
        elif key in self._failed:
            label, exc = self._failed[key]
            self.latency.value = error_html(f"Measuring {label} failed", exc)
            self.details.value = ""
        elif current is not None:  # measured before (also after an undo back to it)
            self.latency.value = latency_html(
                current.result, label=current.label, reference=current.reference
            )
            self.details.value = details_html(current)
        else:
            # Never another schedule's number: what is shown belongs to what is displayed.
            self.latency.value = "<i>This schedule is not measured yet: press Measure.</i>"
            self.details.value = ""
        self.measure_status.value = self._status_html(key)

    def _status_html(self, key: str) -> str:
        """What is measured besides the schedule on screen, and the last reading that arrived
        for another schedule ("" when there is nothing to say)."""
        parts = []
        running = self._running
        if running is not None and running.key != key:
            parts.append(f"Measuring {running.label}\u2026 (not the schedule on screen)")
        elif running is None and self.ctx.measure_jobs.busy:
            other = self.ctx.measure_jobs.current
            parts.append(f"Waiting for {other.name if other else 'another job'}\u2026")
        others = [q.label for q in self._queue if q.key != key]
        if others:
            parts.append(f"Queued: {', '.join(others)}.")
        if self._arrived:
            parts.append(self._arrived)
        if not parts:
            return ""
        text = " ".join(html.escape(p) for p in parts)
        return f"<div style='font-size:90%;color:#555'>{text}</div>"

    # -- misc ---------------------------------------------------------------------------------
    def _notice(self, text: str, about: str | None = None) -> None:
        """Show ``text``; ``about``: the schedule (key) whose reading makes it out of date."""
        self.message.value = (
            f'<div style="color:#850;background:#fff6dd;padding:2px 8px">{html.escape(text)}</div>'
        )
        self.message.layout.display = None
        self._notice_about = about

    def _clear_notice(self) -> None:
        self.message.layout.display = "none"
        self.message.value = ""
        self._notice_about = None

    def _show_error(self, exc: Exception) -> None:
        self._notice(f"Something went wrong: {exc}")

    def close(self) -> None:
        self._closed = True
        self._queue.clear()
        self._unsubscribe_free()
        self._unsubscribe_ctx()
        self._unsubscribe_store()
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
            self._unsubscribe_session = None
        self._runner.shutdown()
        self.predictor.close()
        self.code.close()


def _shown_of(
    stored: Sequence[TrialRecord], name: Callable[[TrialRecord], str]
) -> tuple[TrialRecord, str]:
    """Which of a schedule's stored measurements (oldest first) to show, and its label: the
    fastest correct one, as a search's best is re-timed several times and another process
    only ever adds time to a reading (the latest re-timing of a search's best once read 1.2x
    its fastest, and ranked it below schedules it beat); the latest when none is correct."""
    ok = [r for r in stored if r.result.is_ok and r.median_secs is not None]
    if not ok:
        return stored[-1], f"stored: {name(stored[-1])}"
    secs = {r.id: r.median_secs or 0.0 for r in ok}
    shown = min(ok, key=lambda r: (secs[r.id], -r.id))
    if len(ok) == 1:
        return shown, f"stored: {name(shown)}"
    spread = f"{format_secs(secs[shown.id])} to {format_secs(max(secs.values()))}"
    return shown, f"stored: {name(shown)}; the fastest of its {len(ok)} timings, {spread}"


__all__ = [
    "MODELS",
    "CostPanel",
    "Measurement",
    "candidate_key",
    "details_html",
    "latency_html",
    "latency_text",
    "measurement",
    "predictions_html",
    "rank_text",
]
