"""``CostPanel``: what the current schedule should cost (cost models) and what it does cost
(a measurement), after every edit.

The panel only displays: the predictions come from ``explorer.cost_models.Predictor`` (which
trains the learned models on the store's records), a schedule's stored measurement and its rank
from the store. After each edit one background job asks both for the current schedule; a fast
answer is shown before the edit's callback returns (the handler waits up to ``sync_secs``), a
slow one arrives when ready, and edits made meanwhile collapse into one follow-up. Measurements
run on ``ctx.measure_jobs`` and are stored in the workload's ``manual`` run. Every widget write
happens on the UI thread (``widgets._ui``).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ipywidgets as w

from explorer.cost_models._predictor import MODELS, Prediction, Predictor
from explorer.machine import MachinePeak, PeakMeasureError, measured_peak
from explorer.measure import Candidate, MeasureResult, trace_key
from explorer.session import ScheduleSession, Snapshot
from explorer.storage import NewTrial, RecordStore, TrialRecord
from explorer.types import MeasureStatus
from explorer.workloads import Workload
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobRunner
from widgets._style import themed

log = logging.getLogger(__name__)

_NOTES = {
    "static": "analytical (no training)",
    "xgb-rank": "XGBoost, pairwise rank",
    "xgb-reg": "XGBoost, regression",
    "metaschedule-xgb": "MetaSchedule's XGBoost",
}
STATUS_WORDS = {
    MeasureStatus.OK: "correct: the output matches NumPy's",
    MeasureStatus.WRONG_RESULT: "wrong result: it ran, but the output differs from NumPy's",
    MeasureStatus.BUILD_ERROR: "did not compile",
    MeasureStatus.RUN_ERROR: "crashed while running (or ran out of memory)",
    MeasureStatus.TIMEOUT: "took too long and was stopped",
    MeasureStatus.INVALID: "is not a valid schedule",
    MeasureStatus.UNCHECKED: (
        "was timed by MetaSchedule, but its output was never checked against NumPy "
        "(`explorer check` checks it)"
    ),
}


@dataclass(frozen=True)
class Measurement:
    """A stored measurement of a schedule and where it ranks among this workload's records."""

    record: TrialRecord
    label: str  # which step was measured, e.g. "step 3", or "stored trial 12"
    rank: int  # 1 = the fastest correct schedule known for this workload and target
    num_ok: int
    best_secs: float | None
    peak: MachinePeak | None = None  # the CPU's measured roofline (None for a GPU)
    peak_note: str = ""  # why there is no peak, when measuring it failed

    @property
    def result(self) -> MeasureResult:
        return self.record.result


def measurement(store: RecordStore, record: TrialRecord, label: str) -> Measurement:
    """A record with its rank and the machine's roofline (blocking: store reads, and the peak
    is measured once per machine)."""
    candidate, result = record.candidate, record.result
    rank = store.rank(candidate.workload, candidate.target, result.median_secs)
    peak, note = None, ""
    if candidate.target.kind == "llvm":
        try:
            peak = measured_peak(candidate.target)
        except PeakMeasureError as exc:
            note = str(exc)
    position = rank.position if result.is_ok else 0
    return Measurement(record, label, position, rank.num_ok, rank.best_secs, peak, note)


@dataclass(frozen=True)
class _Look:
    """What a prediction job found about one schedule."""

    key: str
    predictions: dict[str, Prediction]
    stored: Measurement | None  # its latest stored measurement


class CostPanel:
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
            correctness, rank and roofline, and notices (a refused second Measure).
        predict_job, measure_job: the latest background jobs (``job.wait(t)`` in scripts).
        predictor: the ``Predictor`` the panel asks.

    Example:
        >>> from explorer.workloads import get_workload
        >>> ctx = Context(store=":memory:")
        >>> ctx.set_session(ScheduleSession(get_workload("matmul", M=64, N=64, K=64)))
        >>> panel = CostPanel(ctx)
        >>> panel.measure_button.click()  # in the background, on ctx.measure_jobs
        >>> panel.measure_job.wait(120)
        True
        >>> " ms" in panel.latency.value
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
        measured = w.HTML("<b>Measured</b> (built and timed on the target)")
        measured.add_class("se-section")
        self.widget = w.VBox(
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
            ]
        )
        self.widget.add_class("se-cost")
        themed(self.widget)

        # UI thread only: what is shown, by candidate key
        self._measured: dict[str, Measurement] = {}  # candidate key -> its latest measurement
        self._scores: tuple[str, dict[str, float]] | None = None  # candidate key -> raw scores
        self._current_key: str | None = None
        self._pending: Candidate | None = None
        self._closed = False
        self._runner = JobRunner("explorer-predict")
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
        found = (
            measurement(self.ctx.store, stored[-1], f"stored trial {stored[-1].id}")
            if stored
            else None
        )
        return _Look(candidate_key(candidate), self.predict(candidate), found)

    def _predicted(self, job: Job) -> None:
        # UI thread: show the answer if it is still about the current schedule, then ask about
        # the latest edit that arrived meanwhile (if any).
        pending, self._pending = self._pending, None
        if self._closed:
            return
        if job.exception is not None:
            self.predictions.value = _error_html("Prediction failed", job.exception)
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
            self._submit_prediction(pending)
            return
        self.prediction_status.value = ""

    # -- measurement --------------------------------------------------------------------------
    def measure(self) -> Job | None:
        """Build and time the current schedule in the background (refused while one runs)."""
        session = self.session
        if session is None:
            self._notice("Build a workload first.")
            return None
        runner = self.ctx.measure_jobs
        if runner.busy:
            current = runner.current.name if runner.current is not None else "a measurement"
            self._notice(
                f"Already busy ({current}): wait until it finishes, then press Measure again."
            )
            return None
        candidate = session.candidate()
        label = f"step {session.snapshot.step_id}"
        # Store what the models said about exactly this schedule alongside its measurement.
        known = self._scores
        scores = known[1] if known is not None and known[0] == candidate_key(candidate) else {}
        self._clear_notice()
        self.latency.value = f"<i>Measuring {html.escape(label)}\u2026</i>"
        self.measure_button.description = "Measure"
        self.details.value = ""
        self.measure_job = runner.submit(
            f"measuring {label}",
            lambda _job: self._measure(candidate, scores, label),
            on_done=self._measured_done,
        )
        return self.measure_job

    def _measure(self, candidate: Candidate, scores: dict[str, float], label: str) -> Measurement:
        # Worker thread: no widget, no session.
        (result,) = self.ctx.measurer.measure([candidate])
        record = self.ctx.record_manual(
            NewTrial(candidate, result, scores), candidate.workload, candidate.target
        )
        return measurement(
            self.ctx.store, record, label
        )  # the peak after the timing, never during

    def _measured_done(self, job: Job) -> None:
        if self._closed:
            return
        self._clear_notice()  # a "still busy" notice is moot now
        if job.exception is not None:
            self.latency.value = _error_html("Measurement failed", job.exception)
            return
        measured: Measurement = job.result
        self._measured[candidate_key(measured.record.candidate)] = measured
        self._show_measurement()
        self.refresh_predictions(wait=False)  # a new record may train the learned models
        if self.auto_measure.value:
            self._auto()

    def _auto(self) -> None:
        """Measure the current schedule unless it was measured already or a run is on."""
        if self._current_key in self._measured or self.ctx.measure_jobs.busy:
            return  # a busy runner calls back here when it is done
        self.measure()

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
        current = self._measured.get(self._current_key or "")
        noisy = current is not None and current.result.is_noisy
        # A busy machine spread the repeats: the button offers to measure again.
        self.measure_button.description = "Measure again" if noisy else "Measure"
        if current is not None:  # measured before (also after an undo back to it)
            self.latency.value = latency_html(current.result, label=current.label)
            self.details.value = details_html(current)
        elif self.measure_job is not None and not self.measure_job._settled:
            return  # "Measuring..." stays until the job reports
        else:
            # Never another schedule's number: what is shown belongs to what is displayed.
            self.latency.value = "<i>This schedule is not measured yet: press Measure.</i>"
            self.details.value = ""

    # -- misc ---------------------------------------------------------------------------------
    def _notice(self, text: str) -> None:
        self.message.value = (
            f'<div style="color:#850;background:#fff6dd;padding:2px 8px">{html.escape(text)}</div>'
        )
        self.message.layout.display = None

    def _clear_notice(self) -> None:
        self.message.layout.display = "none"
        self.message.value = ""

    def _guard(self, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as exc:
            log.exception("cost panel callback failed")
            self._notice(f"Something went wrong: {exc}")

    def close(self) -> None:
        self._closed = True
        self._unsubscribe_ctx()
        self._unsubscribe_store()
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
            self._unsubscribe_session = None
        self._runner.shutdown()
        self.predictor.close()


def candidate_key(candidate: Candidate) -> str:
    return f"{candidate.workload.key()}|{candidate.target.key()}|{trace_key(candidate.trace)}"


# -- rendering ----------------------------------------------------------------------------------
def format_secs(secs: float) -> str:
    """``"0.123 ms"``; microseconds below a microsecond-ish millisecond."""
    ms = secs * 1e3
    if ms < 0.001:
        return f"{ms * 1e3:.3f} \u00b5s"
    return f"{ms:.3f} ms"


def predictions_html(predictions: dict[str, Prediction]) -> str:
    rows = []
    for p in predictions.values():
        if p.score is None:
            value = "\u2014"
        elif p.latency_secs is not None:
            value = f"\u2248 {format_secs(p.latency_secs)}"
            if p.model == "static":
                value += f" ({p.score:.2f} GFLOPS)"
        elif p.beats is None or not p.beats[1]:
            value = f"score {p.score:.3g}"
        else:
            value = ""  # a rank model's scores only order schedules: show the order
        if p.beats is not None and p.beats[1]:
            beats = f"faster than {p.beats[0]} of {p.beats[1]} measured"
            value = f"{value}; {beats}" if value else beats
        note = p.note or _NOTES.get(p.model, "")
        style = "color:#888;" if p.score is None else ""
        # Flowing text, not table columns: a narrow panel wrapped the value and the note into
        # columns a few words wide. The note gets a line of its own.
        rows.append(
            f"<div class='se-prediction' style='{style}margin:0 0 4px 0'>"
            f"<b>{html.escape(p.model)}</b>&nbsp; {html.escape(value)}"
            f"<div style='font-size:85%;color:#777'>{html.escape(note)}</div></div>"
        )
    return "".join(rows)


def latency_html(result: MeasureResult, *, label: str | None = None) -> str:
    """The latency line; ``label`` says which measurement it is (``"step 3"``)."""
    prefix = f"Latency ({html.escape(label)}): " if label else "Latency: "
    secs = result.median_secs
    if result.is_ok and secs:
        gflops = result.gflops
        rate = f" \u00b7 {gflops:.2f} GFLOPS" if gflops is not None else ""
        line = f"{prefix}<b>{format_secs(secs)}</b> (median of {len(result.run_secs)}){rate}"
        if result.noise_note:  # correct and ranked: the spread is information
            note = html.escape(result.noise_note)
            line += f"<br><span class='se-noisy' style='color:#a60'>Note: {note}.</span>"
        return line
    words = STATUS_WORDS.get(result.status, result.status.value)
    return f"{prefix}<b style='color:#a00'>no valid timing</b>: the schedule {words}"


def details_html(m: Measurement) -> str:
    result = m.result
    lines = [f"Check: {html.escape(STATUS_WORDS.get(result.status, result.status.value))}."]
    if result.is_ok and result.median_secs:
        if m.rank == 1:
            lines.append(f"Rank: the fastest of {m.num_ok} correct schedule(s) known here.")
        elif m.best_secs:
            lines.append(
                f"Rank: #{m.rank} of {m.num_ok} correct schedules; the best known takes "
                f"{format_secs(m.best_secs)} (this one is {result.median_secs / m.best_secs:.2f}"
                "\u00d7 slower)."
            )
        lines.append(html.escape(roofline_text(m.record.candidate.workload, result, m.peak)))
        if m.peak_note:
            lines.append(html.escape(f"No roofline: {m.peak_note}."))
    if result.build_secs is not None:
        lines.append(f"Built in {result.build_secs:.2f} s.")
    body = "<br>".join(lines)
    if result.error_msg:
        body += (
            "<details><summary>Details</summary><pre style='white-space:pre-wrap'>"
            f"{html.escape(result.error_msg[:4000])}</pre></details>"
        )
    return f"<div style='font-size:90%'>{body}</div>"


def roofline_text(workload: Workload, result: MeasureResult, peak: MachinePeak | None) -> str:
    """Where the schedule sits under this CPU's measured roofline (``None``: no peak known)."""
    secs = result.median_secs or 0.0
    gflops = workload.flops() / secs / 1e9 if secs else 0.0
    intensity = workload.flops() / max(workload.bytes_moved(), 1)
    if peak is None:
        return f"Arithmetic intensity {intensity:.2f} FLOP/byte."
    return peak.describe(gflops, intensity)


def _error_html(head: str, exc: BaseException) -> str:
    return f"<span style='color:#a00'><b>{html.escape(head)}:</b> {html.escape(str(exc))}</span>"
