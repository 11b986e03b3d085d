"""CostPanel, headless: instant predictions, background measurement, ranks, refusal, auto."""

from __future__ import annotations

import html
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace

import pytest

from explorer.machine import MachinePeak, cached_peak, roofline_text
from explorer.measure import LocalMeasurer, Measurer, MeasureResult, ReplayMeasurer
from explorer.session import ScheduleSession
from explorer.storage import MANUAL, NewTrial
from explorer.text import format_secs
from explorer.types import MeasureStatus
from explorer.workloads import get_workload
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobState
from widgets.cost import MODELS, CostPanel
from widgets.editor import ScheduleEditor

WAIT = 120.0

DURATION = r"\d+(?:\.\d+)? (?:s|ms|\u00b5s|ns)\b"  # as explorer.text.format_secs writes


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def finish(job: Job | None) -> Job:
    assert job is not None
    assert job.wait(WAIT), f"job {job.name!r} did not finish"
    assert job.state is JobState.FINISHED, job.exception
    return job


def settle(panel: CostPanel) -> None:
    """Wait for the prediction chain (a follow-up job may start when one ends)."""
    _ui.drain()  # e.g. the store's news of a record, which may start a prediction
    for _ in range(10):
        job = panel.predict_job
        finish(job)
        if panel.predict_job is job:
            return
    raise AssertionError("predictions never settled")


def measure(panel: CostPanel) -> Job:
    job = panel.measure()
    return finish(job)


def test_dom_classes(ctx: Context, session: ScheduleSession) -> None:
    p = CostPanel(ctx)
    expected = {
        p.widget: "se-cost",
        p.measure_button: "se-measure",
        p.auto_measure: "se-auto-measure",
        p.latency: "se-latency",
        p.predictions: "se-predictions",
    }
    for widget, css in expected.items():
        assert css in widget._dom_classes, css
    assert p.measure_button.description == "Measure"
    p.close()


def test_the_static_model_predicts_a_latency_and_learned_models_say_untrained(
    ctx: Context, session: ScheduleSession
) -> None:
    p = CostPanel(ctx)
    settle(p)
    assert list(p.last_predictions) == list(MODELS)
    static = p.last_predictions["static"]
    assert static.score is not None and static.score > 0
    assert static.latency_secs == pytest.approx(session.workload.flops() / (static.score * 1e9))
    shown = text_of(p.predictions.value)
    assert format_secs(static.latency_secs) in shown
    for name in MODELS[1:]:
        assert p.last_predictions[name].score is None
        assert "untrained" in p.last_predictions[name].note
    assert shown.count("untrained") == len(MODELS) - 1
    p.close()


def test_edits_update_the_prediction(ctx: Context, session: ScheduleSession) -> None:
    p = CostPanel(ctx)
    settle(p)
    before = p.last_predictions["static"].score
    session.apply("split", loop="j", factors=[None, 16])
    session.apply("reorder", loops=["j_0", "k", "j_1"])
    session.apply("vectorize", loop="j_1")
    settle(p)
    after = p.last_predictions["static"].score
    assert after is not None and after != before
    assert after == pytest.approx(float(p.predict(session.candidate())["static"].score))
    p.close()


def test_slow_predictions_go_to_the_background_and_the_latest_is_shown(
    ctx: Context, session: ScheduleSession
) -> None:
    p = CostPanel(ctx, sync_secs=0)  # as if every prediction were slow
    for factor in (2, 4, 8, 16):
        session.reset()
        session.apply("split", loop="i", factors=[None, factor])
    settle(p)
    expected = p.predict(session.candidate())["static"].score
    assert p.last_predictions["static"].score == pytest.approx(expected)
    assert p.prediction_status.value == ""
    p.close()


def test_measure_shows_latency_gflops_check_rank_roofline_and_stores_it(
    ctx: Context, session: ScheduleSession
) -> None:
    p = CostPanel(ctx)
    settle(p)
    records: list = []
    ctx.store.subscribe(records.extend)
    job = measure(p)
    result = job.result.result
    assert result.status is MeasureStatus.OK
    latency = text_of(p.latency.value)
    assert re.search(DURATION, latency)
    assert format_secs(result.median_secs) in latency
    assert f"{result.gflops:.2f} GFLOPS" in latency
    details = text_of(p.details.value)
    assert "correct" in details
    assert "the only correct timing stored" in details
    # against the CPU's measured roofline (measured on first use, then kept)
    peak = cached_peak(session.target)
    assert peak is not None and "Roofline:" in details and "% of " in details
    assert f"measured fp32 peak {peak.gflops_f32:.0f} GFLOPS" in details
    # Stored as a manual trial, with the models' predictions of this very schedule.
    (record,) = records
    assert ctx.store.get_run(record.run_id).strategy == MANUAL
    assert record.candidate.trace == session.candidate().trace
    assert set(record.predicted) == {"static"}
    assert record.predicted["static"] == pytest.approx(p.last_predictions["static"].score)
    p.close()


def test_a_rate_above_the_measured_peak_is_never_a_silent_percentage(matmul64) -> None:
    peak = MachinePeak(10.0, 5.0, "llvm:znver4:2", "AMD EPYC", "0.27.0", 2, 0.0, 0.0)
    secs = matmul64.flops() / 20e9  # 20 GFLOPS, twice the peak
    text = roofline_text(matmul64, MeasureResult(MeasureStatus.OK, run_secs=(secs,)), peak)
    assert "above this CPU's measured fp32 peak" in text and "--remeasure" in text
    assert "%" not in text
    assert roofline_text(matmul64, MeasureResult(MeasureStatus.OK, run_secs=(secs,)), None) == (
        f"Arithmetic intensity {matmul64.flops() / matmul64.bytes_moved():.2f} FLOP/byte."
    )


def test_rank_against_the_best_known(ctx: Context, session: ScheduleSession) -> None:
    p = CostPanel(ctx)
    measure(p)  # the unscheduled program: the fastest under the replay rule
    session.apply("split", loop="i", factors=[None, 16])
    assert "not measured yet" in text_of(p.latency.value)
    assert not re.search(DURATION, text_of(p.latency.value))  # never another schedule's
    measure(p)
    details = text_of(p.details.value)
    assert "#2 of the 2 correct timings" in details and "100 \u00b5s" in details
    assert "slower" in details
    session.undo()  # back to a measured schedule: its measurement shows again
    assert "Latency (step 0):" in text_of(p.latency.value)
    assert "100 \u00b5s" in text_of(p.latency.value)
    p.close()
    p.close()  # twice: nothing left to unsubscribe, no error


def test_what_is_shown_belongs_to_what_is_displayed(
    ctx: Context, session: ScheduleSession
) -> None:
    """Issue 10, symptom 1: after opening a stored trial, building another workload, or a
    notebook cell storing a measurement, the panel shows that schedule's own stored number."""
    p = CostPanel(ctx)
    session.apply("split", loop="i", factors=[None, 16])
    job = measure(p)
    measured = job.result.record
    # another workload: nothing of the matmul 64 is shown
    other = ScheduleSession(get_workload("matmul", M=32, N=32, K=32), ctx.target)
    ctx.set_session(other)
    settle(p)
    assert "not measured yet" in text_of(p.latency.value) and p.details.value == ""
    ctx.open_record(measured)  # measured here before: the panel's own measurement
    settle(p)
    assert format_secs(measured.result.median_secs) in text_of(p.latency.value)
    # a search's trial opened ("Open best in editor"): its stored measurement
    searched = ScheduleSession(session.workload, ctx.target)
    searched.apply("split", loop="j", factors=[None, 8])
    timed = MeasureResult(MeasureStatus.OK, run_secs=(5e-4,) * 3, flops=session.workload.flops())
    run = ctx.store.create_run(session.workload, ctx.target, "random")
    (best,) = ctx.store.add_trials(run.id, [NewTrial(searched.candidate(), timed)])
    ctx.open_record(best)
    settle(p)
    latency = text_of(p.latency.value)
    # named in its run, never by its database-wide id
    assert f"stored: trial 1 of run {run.id}" in latency and "500 \u00b5s" in latency
    assert "#2 of the 2" in text_of(p.details.value)  # ranked among the stored ones
    # a measurement of the schedule on display stored by someone else (a notebook cell)
    ctx.set_session(other)
    settle(p)
    candidate = other.candidate()
    timed = MeasureResult(MeasureStatus.OK, run_secs=(2e-4,) * 3, flops=other.workload.flops())
    record = ctx.record_manual(NewTrial(candidate, timed), other.workload)
    settle(p)
    assert f"stored: trial 1 of run {record.run_id}" in text_of(p.latency.value)
    p.close()


def test_learned_models_train_on_this_workloads_records_once(
    ctx: Context, session: ScheduleSession
) -> None:
    p = CostPanel(ctx)
    measure(p)
    session.apply("split", loop="i", factors=[None, 16])
    measure(p)
    settle(p)
    learned = [n for n in MODELS if n != "static"]
    for name in learned:
        prediction = p.last_predictions[name]
        assert prediction.score is not None, prediction.note
        assert prediction.beats is not None and prediction.beats[1] == 2
        # what it trained on, counted as the rank counts: correct timings apart
        assert "trained on 2 measurement(s) of this workload: 2 correct" in prediction.note
    fits = p.num_fits
    assert fits == len(learned)
    session.apply("split", loop="j", factors=[None, 8])  # an edit: no new records, no refit
    settle(p)
    assert p.num_fits == fits
    assert p.last_predictions["xgb-reg"].latency_secs is not None
    measure(p)  # a new record: each learned model retrains once
    settle(p)
    assert p.num_fits == 2 * fits
    # Another workload has no records: untrained again.
    ctx.set_session(ScheduleSession(get_workload("matmul", M=32, N=32, K=32), ctx.target))
    settle(p)
    assert all(p.last_predictions[n].score is None for n in learned)
    p.close()


def gated_panel(
    make_ctx: Callable[..., Context], make_replay: Callable[..., Measurer]
) -> tuple[CostPanel, ScheduleSession, threading.Event]:
    """A panel whose measurements wait until the test sets the returned gate."""
    gate = threading.Event()
    ctx = make_ctx(make_replay(gate=gate))
    session = ScheduleSession(get_workload("matmul", M=64, N=64, K=64), ctx.target)
    ctx.set_session(session)
    return CostPanel(ctx), session, gate


def test_clicks_while_busy_are_refused_or_queued_and_said_so(
    make_ctx: Callable[..., Context], make_replay: Callable[..., Measurer]
) -> None:
    """Issue 21: nine clicks while busy made seven trials with no word on screen."""
    p, session, gate = gated_panel(make_ctx, make_replay)
    p.measure_button.click()
    first = p.measure_job
    assert first is not None and first.is_active
    assert "Measuring step 0" in text_of(p.latency.value)
    for _ in range(3):  # the same schedule again while it measures: refused, and said why
        p.measure_button.click()
    assert p.measure_job is first
    assert p.message.layout.display is None
    notice = text_of(p.message.value)
    assert "Not measured twice: step 0 is being measured now" in notice
    # A new user's: the notice stayed beside the reading once it arrived.
    other_p, _, other_gate = gated_panel(make_ctx, make_replay)
    other_p.measure_button.click()
    other_p.measure_button.click()
    assert "Not measured twice" in text_of(other_p.message.value)
    other_gate.set()
    finish(other_p.measure_job)
    assert "Latency (step 0)" in text_of(other_p.latency.value)
    assert other_p.message.layout.display == "none" and other_p.message.value == ""
    other_p.close()
    # another schedule while busy: queued, and said so
    session.apply("split", loop="i", factors=[None, 16])
    assert "not measured yet" in text_of(p.latency.value)
    assert "Measuring step 0" in text_of(p.measure_status.value)
    p.measure_button.click()
    assert "Queued: step 1 is measured after step 0" in text_of(p.latency.value)
    p.measure_button.click()  # a queued schedule is not queued twice
    assert "Not queued twice: step 1 is queued already" in text_of(p.message.value)
    gate.set()
    finish(first)
    second = p.measure_job
    assert second is not first  # the queued one started when the first ended
    finish(second)
    assert "Latency (step 1)" in text_of(p.latency.value)
    assert p.message.layout.display == "none"  # "Not queued twice" went with its reading
    assert len(p.ctx.store.trials()) == 2  # one per accepted click
    p.close()


def test_a_reading_on_screen_belongs_to_the_schedule_on_screen(
    make_ctx: Callable[..., Context], make_replay: Callable[..., Measurer]
) -> None:
    """Issue 21: "Latency (step 28): 11.269 ms" was shown while step 29 was measuring."""
    p, session, gate = gated_panel(make_ctx, make_replay)
    gate.set()
    measure(p)  # step 0 has a reading
    gate.clear()
    session.apply("split", loop="i", factors=[None, 16])
    job = p.measure()
    assert job is not None and "Measuring step 1" in text_of(p.latency.value)
    session.undo()  # a measured schedule: its own reading, and step 1 still named as running
    assert "Latency (step 0)" in text_of(p.latency.value)
    assert "Measuring step 1" in text_of(p.measure_status.value)
    session.redo()  # step 1 again: "Measuring", never step 0's number
    assert text_of(p.latency.value).strip() == "Measuring step 1\u2026"
    assert p.measure_status.value == ""
    session.undo()
    gate.set()
    finish(job)  # step 1's reading arrives while step 0 is on screen: said, not shown as 0's
    assert "Latency (step 0)" in text_of(p.latency.value)
    reading = format_secs(job.result.result.median_secs)
    assert f"Step 1 measured: {reading}." in text_of(p.measure_status.value)
    session.redo()
    assert "Latency (step 1)" in text_of(p.latency.value)
    p.close()


def test_a_click_waits_for_another_panels_job_on_the_shared_runner(
    ctx: Context, session: ScheduleSession
) -> None:
    """``ctx.measure_jobs`` is shared (the dashboards check timings on it): a Measure while it
    is held is queued and starts when it is free."""
    p = CostPanel(ctx)
    gate = threading.Event()
    other = ctx.measure_jobs.submit("checking 3 timings", lambda _job: gate.wait(WAIT))
    assert p.measure() is None
    assert "Queued: step 0" in text_of(p.latency.value)
    assert "Waiting for checking 3 timings" in text_of(p.measure_status.value)
    gate.set()
    finish(other)
    assert p.measure_job is not None
    finish(p.measure_job)
    assert "Latency (step 0)" in text_of(p.latency.value)
    p.close()


def test_apply_then_measure_measures_the_applied_schedule(
    ctx: Context, session: ScheduleSession
) -> None:
    """Issue 21: Apply and Measure clicked together measured the schedule before the Apply
    (the browser test clicks both at once in a real JupyterLab)."""
    p = CostPanel(ctx)
    e = ScheduleEditor(ctx)
    e.params["loop"].value, e.params["factors"].value = "i", "None, 16"
    e.apply_button.click()
    p.measure_button.click()
    job = finish(p.measure_job)
    assert job.result.record.candidate.trace == session.candidate().trace
    assert "Latency (step 1)" in text_of(p.latency.value)
    p.close()


def test_a_re_measurement_ranks_as_one_of_the_stored_timings(
    ctx: Context, session: ScheduleSession
) -> None:
    """Issue 21: "The fastest of 0 correct schedule(s)" (a re-timing is not counted by
    ``RecordStore.rank``; the one on screen always is)."""
    p = CostPanel(ctx)
    run = ctx.store.create_run(session.workload, ctx.target, "random")
    timed = MeasureResult(MeasureStatus.OK, run_secs=(3e-4,) * 3, flops=session.workload.flops())
    (again,) = ctx.store.add_trials(
        run.id, [NewTrial(session.candidate(), timed, is_remeasure=True)]
    )
    ctx.open_record(again)
    settle(p)
    details = text_of(p.details.value)
    assert "the only correct timing stored for this workload" in details, details
    assert "of 0" not in details
    p.close()


def test_a_re_timed_best_shows_its_fastest_timing_and_ranks_first(
    ctx: Context, session: ScheduleSession
) -> None:
    """A new user opened a tune's best in the editor: the panel showed its latest re-timing
    (41.4 us, the slowest of its four) and ranked it "#3 ... 1.15x slower" than a schedule
    the same tune had beaten, while "Compare with" listed its 34.5 us as the fastest."""
    p = CostPanel(ctx)
    flops = session.workload.flops()
    run = ctx.store.create_run(session.workload, ctx.target, "evolutionary")
    best, other = session.candidate(), ScheduleSession(session.workload, ctx.target)
    other.apply("split", loop="j", factors=[None, 8])

    def timed(secs: float) -> MeasureResult:
        return MeasureResult(MeasureStatus.OK, run_secs=(secs,) * 3, flops=flops)

    records = ctx.store.add_trials(
        run.id,
        [
            NewTrial(best, timed(37.2e-6)),
            NewTrial(other.candidate(), timed(36.1e-6)),
            *(NewTrial(best, timed(s), is_remeasure=True) for s in (36.3e-6, 34.5e-6, 41.4e-6)),
        ],
    )
    ctx.open_record(records[-1])  # what "Open in editor" opens: the run's latest reading of it
    settle(p)
    latency = text_of(p.latency.value)
    assert "34.5 \u00b5s" in latency and "41.4 \u00b5s:" not in latency, latency
    assert "the fastest of its 4 timings, 34.5 \u00b5s to 41.4 \u00b5s" in latency, latency
    details = text_of(p.details.value)
    assert "Rank: the fastest of the 3 correct timings" in details, details
    p.close()


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (MeasureStatus.WRONG_RESULT, "wrong result"),
        (MeasureStatus.BUILD_ERROR, "did not compile"),
        (MeasureStatus.TIMEOUT, "took too long"),
    ],
)
def test_failures_in_plain_words(
    make_ctx: Callable[..., Context],
    make_replay: Callable[..., Measurer],
    status: MeasureStatus,
    words: str,
) -> None:
    ctx = make_ctx(make_replay(status))
    ctx.set_session(ScheduleSession(get_workload("matmul", M=64, N=64, K=64), ctx.target))
    p = CostPanel(ctx)
    measure(p)
    assert words in text_of(p.latency.value)
    assert "no valid timing" in text_of(p.latency.value)
    assert words in text_of(p.details.value)
    assert f"replayed {status.value}" in p.details.value  # the raw message, folded away
    p.close()


def test_a_noisy_measurement_is_a_ranked_latency_with_a_note_and_offers_measuring_again(
    make_ctx: Callable[..., Context],
) -> None:
    # Issue 21: a busy machine spreads a correct kernel's repeats; that is information about
    # the reading, shown beside it, never a verdict that hides the latency.
    spread = MeasureResult(MeasureStatus.OK, run_secs=(1e-3, 3e-3, 1.1e-3), flops=1)
    ctx = make_ctx(ReplayMeasurer(lambda candidate: spread))
    ctx.set_session(ScheduleSession(get_workload("matmul", M=64, N=64, K=64), ctx.target))
    p = CostPanel(ctx)
    assert p.measure_button.description == "Measure"
    job = measure(p)
    assert job.result.result.status is MeasureStatus.OK and job.result.result.is_noisy
    (stored,) = ctx.store.trials()
    assert stored.status is MeasureStatus.OK and stored.result.run_secs == spread.run_secs
    latency = text_of(p.latency.value)
    assert format_secs(spread.median_secs) in latency and "<b>" in p.latency.value
    assert "spread 182%" in latency and "something else was using the cores" in latency
    assert job.result.rank == 1
    assert ctx.store.best(stored.candidate.workload, ctx.target)[0].id == stored.id
    assert p.measure_button.description == "Measure again"
    p.close()


def test_auto_measure_after_every_edit(ctx: Context, session: ScheduleSession) -> None:
    p = CostPanel(ctx)
    e = ScheduleEditor(ctx)
    p.auto_measure.value = True  # measures the current schedule at once
    finish(p.measure_job)
    e.params["loop"].value, e.params["factors"].value = "i", "None, 16"
    e.apply_button.click()
    finish(p.measure_job)
    assert len(ctx.store.trials()) == 2
    assert "#2 of the 2" in text_of(p.details.value)
    e.undo_button.click()  # known schedule: shown from memory, not measured again
    assert "Latency (step 0):" in text_of(p.latency.value)
    assert p.measure_job is not None and not p.measure_job.is_active
    assert len(ctx.store.trials()) == 2
    p.close()


def test_without_a_session(ctx: Context) -> None:
    p = CostPanel(ctx)
    assert p.measure() is None
    assert "Build a workload first" in p.message.value
    p.close()


def test_real_local_measurement(local_ctx: Context) -> None:
    ctx = local_ctx
    session = ScheduleSession(get_workload("matmul", M=64, N=64, K=64), ctx.target)
    ctx.set_session(session)
    session.apply("split", loop="j", factors=[None, 16])
    session.apply("reorder", loops=["j_0", "k", "j_1"])
    session.apply("vectorize", loop="j_1")
    p = CostPanel(ctx)
    job = measure(p)
    result = job.result.result
    assert result.status is MeasureStatus.OK, result.error_msg
    assert len(result.run_secs) == 3
    assert re.search(DURATION, text_of(p.latency.value))
    assert "correct: the output matches NumPy" in text_of(p.details.value)
    (record,) = ctx.store.trials()
    assert record.result == result
    p.close()


def test_a_model_task_is_checked_against_its_unscheduled_program_and_says_so(
    local_ctx: Context,
) -> None:
    # A new user's fused convolution, opened from the Model tab and measured: "Check: correct:
    # the output matches NumPy's.", where no NumPy formula exists for a task.
    ctx = local_ctx
    ctx.set_session(ScheduleSession(get_workload("task"), ctx.target))
    p = CostPanel(ctx)
    job = measure(p)
    assert job.result.result.status is MeasureStatus.OK, job.result.result.error_msg
    details = text_of(p.details.value)
    assert "correct: the output matches its unscheduled program's" in details
    assert "NumPy" not in details
    p.close()


def test_a_reading_taken_beside_other_processes_says_so(local_ctx: Context, burners) -> None:
    """Beside a CPU burner a new user's kernel read 65 us against 47 us quiet, its repeats in
    agreement: the panel showed it without a word. The share of the CPUs other processes took
    while it was timed is said beside it, and the button offers to measure again."""
    ctx = local_ctx
    ctx.set_session(ScheduleSession(get_workload("matmul", M=64, N=64, K=64), ctx.target))
    p = CostPanel(ctx)
    # The first measurement also starts the measurer's workers: it read 0 % busy in 2 runs of
    # 8 of a parallel run (2026-12-07). One way that happens, found since and fixed: the fork
    # server an earlier measurer of the process started (0.9 s of CPU time) was not among the
    # helpers when the window opened and was at its end, and its whole life's CPU time counted
    # as the panel's own (tests/explorer/machine/test_busy.py). Not confirmed as that run's
    # cause (it did not fail in 4 runs here without the fix): read from the second, as after a
    # click on "Measure again".
    measure(p)
    job = measure(p)
    assert job.result.result.status is MeasureStatus.OK
    assert job.result.busy_elsewhere is not None and job.result.was_busy, job.result
    details = text_of(p.details.value)
    assert re.search(r"Other processes used \d+% of the CPUs while it was timed", details)
    assert p.measure_button.description == "Measure again"
    stored = ctx.store.trials()[-1]  # stored and ranked all the same: information, not a verdict
    assert stored.result == job.result.result
    p.close()


def test_a_kept_peak_below_a_measured_rate_is_measured_again(
    local_ctx: Context, tmp_path, monkeypatch
) -> None:
    """A peak measured in a slow minute (a virtual machine's host busy with other guests,
    unseen from inside) said "above this CPU's measured fp32 peak" under every fast kernel
    until the user re-measured it by hand: a measured rate above it now measures it again."""
    from explorer.machine import CACHE_ENV
    from explorer.machine._peak import _cache_key, _write_cache

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "peak.json"))
    ctx, target = local_ctx, local_ctx.target
    slow = MachinePeak(0.001, 1.0, target.key(), "?", "?", target.num_cores, 0.0, 0.0)
    _write_cache({_cache_key(target): slow})
    ctx.set_session(ScheduleSession(get_workload("matmul", M=64, N=64, K=64), target))
    p = CostPanel(ctx)
    result = measure(p).result.result
    assert result.status is MeasureStatus.OK, result.error_msg
    peak = cached_peak(target)
    assert peak is not None and peak.measured_at > 0 and peak.gflops_f32 > result.gflops
    details = text_of(p.details.value)
    assert "above this CPU's measured fp32 peak" not in details, details
    assert f"measured fp32 peak {peak.gflops_f32:.0f} GFLOPS" in details, details
    # measured again at most once every BUSY_RETRY_SECS: a peak just measured is kept as it is
    _write_cache({_cache_key(target): replace(slow, measured_at=time.time())})
    measure(p)
    assert cached_peak(target).gflops_f32 == 0.001
    assert "above this CPU's measured fp32 peak" in text_of(p.details.value)
    p.close()


def test_a_measurer_failure_is_shown_not_lost(make_ctx: Callable[..., Context]) -> None:
    closed = LocalMeasurer()
    closed.close()  # misuse: measuring with it raises, which the panel must report
    ctx = make_ctx(closed)
    ctx.set_session(ScheduleSession(get_workload("matmul", M=64, N=64, K=64), ctx.target))
    p = CostPanel(ctx)
    p.measure_button.click()
    job = p.measure_job
    assert job is not None and job.wait(WAIT)
    assert job.state is JobState.ERROR
    assert "Measuring step 0 failed" in p.latency.value and "closed" in p.latency.value
    assert ctx.store.trials() == []
    p.close()


def test_an_edit_handled_inside_a_predictions_callback_never_breaks_the_next(
    ctx: Context, session: ScheduleSession
) -> None:
    """Seen once in a full CI run: a prediction's callback waited on the UI's queue, an edit
    handled there started its own prediction, and the callback then submitted its pending edit
    too: "'predict' is still running", a traceback in the notebook. The pending edit now waits
    for the running prediction."""
    p = CostPanel(ctx, sync_secs=0)
    settle(p)
    done = p.predict_job
    assert done is not None
    session.apply("split", loop="i", factors=[None, 4])  # the edit's prediction starts
    running = p.predict_job
    assert running is not done and p._runner.busy  # its end not yet seen by the UI
    p._pending = session.candidate()
    p._predicted(done)  # the first prediction's callback, after the edit's prediction began
    assert p._pending is not None  # kept for the running prediction to pick up
    settle(p)
    expected = p.predict(session.candidate())["static"].score
    assert p.last_predictions["static"].score == pytest.approx(expected)
    p.close()
