"""What the cost panel shows: a measurement with its rank and roofline, and the HTML of the
predictions, the latency line and the details (pure rendering, no widget)."""

from __future__ import annotations

import html
from dataclasses import dataclass

from explorer.cost_models import Prediction
from explorer.machine import BUSY, MachinePeak, PeakMeasureError, measured_peak, roofline_text
from explorer.measure import Candidate, MeasureResult, trace_key
from explorer.storage import RecordStore, TrialRecord
from explorer.text import format_secs
from explorer.types import MeasureStatus

_NOTES = {
    "static": "analytical (no training)",
    "xgb-rank": "XGBoost, pairwise rank",
    "xgb-reg": "XGBoost, regression",
    "metaschedule-xgb": "MetaSchedule's XGBoost",
}


def status_words(status: MeasureStatus, reference: str = "NumPy") -> str:
    """What a check's verdict says of a schedule; ``reference``: whose output it is checked
    against (``OperatorFamily.reference_name``: NumPy, or a model task's unscheduled program)."""
    words = {
        MeasureStatus.OK: f"correct: the output matches {reference}'s",
        MeasureStatus.WRONG_RESULT: (
            f"wrong result: it ran, but the output differs from {reference}'s"
        ),
        MeasureStatus.BUILD_ERROR: "did not compile",
        MeasureStatus.RUN_ERROR: "crashed while running (or ran out of memory)",
        MeasureStatus.TIMEOUT: "took too long and was stopped",
        MeasureStatus.INVALID: "is not a valid schedule",
        MeasureStatus.UNCHECKED: (
            f"was timed by MetaSchedule, but its output was never checked against {reference} "
            "(`explorer check` checks it)"
        ),
    }
    return words.get(status, status.value)


@dataclass(frozen=True)
class Measurement:
    """A stored measurement of a schedule and where it ranks among this workload's records."""

    record: TrialRecord
    label: str  # which step was measured, e.g. "step 3", or "stored: trial 12 of run 5"
    rank: int  # 1 = the fastest correct timing stored for this workload and target; 0: none
    num_ok: int  # correct timings stored for it (this one included when it is correct)
    best_secs: float | None
    peak: MachinePeak | None = None  # the CPU's measured roofline (None for a GPU)
    peak_note: str = ""  # why there is no peak, when measuring it failed
    busy_elsewhere: float | None = None  # others' share of the CPUs while it was timed

    @property
    def was_busy(self) -> bool:
        """Whether other processes used ``BUSY`` or more of the CPUs while it was timed: a
        reading that can be slower than the kernel is, though its repeats agree."""
        return self.busy_elsewhere is not None and self.busy_elsewhere >= BUSY

    @property
    def result(self) -> MeasureResult:
        return self.record.result

    @property
    def reference(self) -> str:
        """Whose output the schedule's was checked against (NumPy, or a task's program)."""
        return self.record.candidate.workload.spec.reference_name


def measurement(
    store: RecordStore, record: TrialRecord, label: str, busy_elsewhere: float | None = None
) -> Measurement:
    """A record with its rank and the machine's roofline (blocking: store reads, and the peak
    is measured once per machine); ``busy_elsewhere``: others' share of the CPUs meanwhile
    (``None``: not watched)."""
    candidate, result = record.candidate, record.result
    rank = store.rank_of(record) if result.is_ok and result.median_secs else None
    peak, note = None, ""
    if candidate.target.kind == "llvm":
        secs = result.median_secs if result.is_ok else None
        reached = candidate.workload.flops() / secs / 1e9 if secs else None
        try:
            peak = measured_peak(candidate.target, at_least=reached)
        except PeakMeasureError as exc:
            note = str(exc)
    if rank is None:
        return Measurement(record, label, 0, 0, None, peak, note, busy_elsewhere)
    return Measurement(
        record, label, rank.position, rank.num_ok, rank.best_secs, peak, note, busy_elsewhere
    )


# -- rendering ----------------------------------------------------------------------------------
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


def latency_text(result: MeasureResult) -> str:
    """A reading in a few plain words: ``"0.123 ms"``, or what went wrong."""
    secs = result.median_secs
    if result.is_ok and secs:
        return format_secs(secs)
    if secs:
        return f"{format_secs(secs)}, {result.status.value}"
    return f"no valid timing ({result.status.value})"


def latency_html(
    result: MeasureResult, *, label: str | None = None, reference: str = "NumPy"
) -> str:
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
    words = status_words(result.status, reference)
    return f"{prefix}<b style='color:#a00'>no valid timing</b>: the schedule {words}"


def details_html(m: Measurement) -> str:
    result = m.result
    lines = [f"Check: {html.escape(status_words(result.status, m.reference))}."]
    if m.was_busy:
        lines.append(
            f"<b>Other processes used {m.busy_elsewhere:.0%} of the CPUs while it was timed</b>: "
            "it may read slower than on a quiet machine (Measure again when they are done)."
        )
    if result.is_ok and result.median_secs:
        lines.append(html.escape(rank_text(m)))
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


def rank_text(m: Measurement) -> str:
    """Where a correct measurement ranks among the correct timings stored for its workload and
    target (``RecordStore.rank_of``: it is one of them, so there is always at least one)."""
    secs = m.result.median_secs or 0.0
    if m.num_ok <= 1:
        return "Rank: the only correct timing stored for this workload here."
    if m.rank == 1:
        return f"Rank: the fastest of the {m.num_ok} correct timings stored for this workload."
    slower = f" (this one is {secs / m.best_secs:.2f}\u00d7 slower)" if m.best_secs else ""
    best = format_secs(m.best_secs) if m.best_secs else "?"
    return (
        f"Rank: #{m.rank} of the {m.num_ok} correct timings stored for this workload; the "
        f"fastest takes {best}{slower}."
    )


def error_html(head: str, exc: BaseException) -> str:
    return f"<span style='color:#a00'><b>{html.escape(head)}:</b> {html.escape(str(exc))}</span>"


def candidate_key(candidate: Candidate) -> str:
    """What identifies a schedule on screen: its workload, target and trace."""
    return f"{candidate.workload.key()}|{candidate.target.key()}|{trace_key(candidate.trace)}"
