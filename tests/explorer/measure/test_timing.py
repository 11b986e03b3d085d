"""Trustworthy timings (issues 9, 21): the timing gate, warm-up, re-timing rounds, noisy readings.

The kernels are real: ``hooks``' ``jitter`` kernel pauses 10 ms and 50 ms on alternate calls
(every round spreads wide), ``settle`` does so only in its first round. With
``min_repeat_secs=0`` each repeat is one call, so the spreads are deterministic.
"""

from __future__ import annotations

import math
import random
import statistics
import threading
import time
from dataclasses import replace

import pytest
from _measure_cases import FAST, hook, tiled, unscheduled
from hypothesis import given
from hypothesis import strategies as st

from explorer.core._gate import TIMING_GATE, GateEvent, TimingGate
from explorer.cost_models import make_cost_model
from explorer.measure import (
    LocalMeasurer,
    MeasureConfig,
    MeasureResult,
    _timing,
)
from explorer.measure._batch import CUT_MIN_CALL_SECS
from explorer.measure._timing import repeats_that_fit, warm_up
from explorer.measure._timing import timed_rounds as _timed_rounds
from explorer.storage import NewTrial, get_store, summarize_run
from explorer.testing.hooks import SLOW_CALL_SECS
from explorer.tuner import Tuner
from explorer.types import CacheFlush, MeasureStatus
from explorer.workloads import get_workload

ONE_CALL_PER_REPEAT = MeasureConfig(
    repeat=5, min_repeat_secs=0, warmup_secs=0, num_threads=1, run_timeout_secs=20
)

# Timing-sensitive: run alone after the parallel part of `make test` (the `serial` marker).
pytestmark = pytest.mark.serial


def overlaps(events: list[GateEvent]) -> int:
    """How many steps happened while work and a timing were both inside the gate."""
    inside = {"timing": 0, "work": 0}
    bad = 0
    for e in events:
        inside[e.kind] += {"enter": 1, "leave": -1}.get(e.phase, 0)
        bad += bool(inside["timing"] and inside["work"])
    return bad


def wait_for_step(events: list[GateEvent], thread: str, kind: str, phase: str) -> None:
    """Until ``thread`` has logged that step in the gate (a handshake, never a fixed sleep)."""
    deadline = time.monotonic() + 30
    while not any((e.thread, e.kind, e.phase) == (thread, kind, phase) for e in list(events)):
        assert time.monotonic() < deadline, f"{thread} never logged {kind} {phase}: {events}"
        time.sleep(0.001)


# -- the gate ---------------------------------------------------------------------------------
def test_work_waits_for_a_timing_and_a_timing_for_work_in_progress():
    gate = TimingGate()
    in_work, release_work = threading.Event(), threading.Event()

    def work():
        with gate.work():
            in_work.set()
            release_work.wait(10)

    with gate.recording() as events:
        worker = threading.Thread(target=work, name="trainer")
        worker.start()
        assert in_work.wait(10)
        timed = threading.Event()
        late_entered = threading.Event()

        def late_work():
            with gate.work():
                late_entered.set()

        late = threading.Thread(target=late_work, name="late")

        def time_it():
            with gate.timing():
                timed.set()
                late.start()
                wait_for_step(events, "late", "work", "wait")  # it arrived, and waits
                # Checked after the timing, not asserted in a thread.
                timed_alone.append(not late_entered.is_set())

        timed_alone: list[bool] = []

        timer = threading.Thread(target=time_it, name="timer")
        timer.start()
        wait_for_step(events, "timer", "timing", "wait")  # it arrived, and waits
        assert not timed.is_set(), "the timing started while work was in progress"
        release_work.set()
        worker.join(10)
        timer.join(10)
        late.join(10)
        assert timed.is_set() and late_entered.is_set()
        assert timed_alone == [True], "work started while a kernel was timed"
    phases = [(e.thread, e.kind, e.phase) for e in events]
    assert ("timer", "timing", "wait") in phases and ("late", "work", "wait") in phases
    assert phases.index(("trainer", "work", "leave")) < phases.index(("timer", "timing", "enter"))
    assert overlaps(events) == 0


def test_nested_work_passes_a_waiting_timing_and_timing_inside_work_raises():
    gate = TimingGate()
    in_work, entered_inner = threading.Event(), threading.Event()

    with gate.recording() as events:

        def trainer():
            with gate.work():
                in_work.set()
                wait_for_step(events, "timer", "timing", "wait")  # a timing waits meanwhile
                with gate.work():  # update() calling predict(): must not wait for the timer
                    entered_inner.set()

        inner_first: list[bool] = []

        def time_it():
            with gate.timing():
                inner_first.append(entered_inner.is_set())

        t = threading.Thread(target=trainer, name="trainer")
        t.start()
        assert in_work.wait(30)
        timer = threading.Thread(target=time_it, name="timer")
        timer.start()
        t.join(30)
        timer.join(30)
        assert inner_first == [True], "the nested work waited for the timing"
    with gate.work(), pytest.raises(RuntimeError, match="inside TimingGate.work"):
        gate.timing().__enter__()


def test_cost_model_training_is_gated():
    model = make_cost_model("xgb-rank")
    with TIMING_GATE.recording() as events:
        model.predict([])
    assert [(e.kind, e.phase) for e in events] == [("work", "enter"), ("work", "leave")]


# -- the reproduction: training next to a measurement -----------------------------------------
def test_training_during_a_measurement_never_overlaps_a_timed_kernel(mm, target):
    """Issue 9's cause: the cost panel trains XGBoost while the runner times a kernel. Under the
    gate, every training waits for the kernel being timed (and the reverse), so they never
    overlap; timings themselves are not asserted (the machine is shared)."""
    from explorer.testing import recordings

    store = recordings.open_recording()
    records = recordings.recorded_trials(store, recordings.SMALL)[:60]
    cands = [tiled(mm, target, t, t) for t in (4, 8, 16, 32)]
    stop, fits = threading.Event(), [0]

    def train():
        while not stop.is_set():
            model = make_cost_model("xgb-reg")
            model.update(records)
            model.predict([r.candidate for r in records])
            fits[0] += 1

    with LocalMeasurer(FAST) as m:
        m.measure(cands[:1])  # workers started
        with TIMING_GATE.recording() as events:
            trainer = threading.Thread(target=train, name="trainer")
            trainer.start()
            try:
                while fits[0] == 0:  # training is under way
                    time.sleep(0.01)
                for _ in range(3):
                    results = m.measure(cands)
            finally:
                stop.set()
                trainer.join(120)
    assert all(r.status is MeasureStatus.OK for r in results)
    timings = [e for e in events if e.kind == "timing" and e.phase == "enter"]
    works = [e for e in events if e.kind == "work" and e.phase == "enter"]
    assert len(timings) == 3 * len(cands) and works
    assert overlaps(events) == 0
    assert any(e.phase == "wait" for e in events), "training and timing never met"


# -- re-timing rounds ---------------------------------------------------------------------------
def test_warm_up_counts_the_check_call_it_follows(monkeypatch):
    # A clock that only the kernel moves, 1/8 s a call (exact in binary): the counts are exact.
    clock = [0.0]
    monkeypatch.setattr(_timing.time, "perf_counter", lambda: clock[0])
    calls: list[float] = []

    def kernel() -> None:
        calls.append(clock[0])
        clock[0] += 0.125

    def count(secs: float, done_secs: float = 0.0) -> int:
        clock[0] = 0.0
        calls.clear()
        warm_up(kernel, [], secs, done_secs=done_secs)
        return len(calls)

    assert count(0.0) == 1  # at least once, when nothing ran before
    assert count(0.5) == 4
    assert count(0.5, done_secs=0.25) == 2  # only the rest
    # A kernel that just ran for longer than the warm-up (the check call of a slow, unscheduled
    # program) is not run once more: on matmul 1024 that call cost seconds of the run timeout.
    assert count(0.25, done_secs=2.0) == 0


def test_timed_rounds_keeps_the_lowest_round_whole():
    # A round slowed evenly throughout (another process held a core) is tight and wrong:
    # interference only adds time, so the lowest round is kept, whole, however it spreads.
    rounds = iter([[1.0, 3.0, 1.0], [2.0, 2.1, 2.0], [1.0, 1.5, 1.2]])
    secs, n = _timed_rounds(lambda: next(rounds), max_rounds=3, max_spread=0.01, budget_secs=60)
    assert (secs, n) == ([1.0, 3.0, 1.0], 3)  # median 1.0, the tighter of the two at 1.0
    rounds = iter([[1.0, 3.0, 1.0], [1.0, 1.0, 1.0], [9.0, 9.0, 9.0]])
    secs, n = _timed_rounds(lambda: next(rounds), max_rounds=3, max_spread=0.25, budget_secs=60)
    assert (secs, n) == ([1.0, 1.0, 1.0], 2)  # stops at the first tight round
    rounds = iter([[1.0, 3.0, 1.0], [1.0, 1.0, 1.0]])
    secs, n = _timed_rounds(lambda: next(rounds), max_rounds=3, max_spread=0.25, budget_secs=0)
    assert n == 1  # no time left for another round


def test_a_wide_first_round_is_timed_again(target):
    with LocalMeasurer(ONE_CALL_PER_REPEAT, num_build_workers=1) as m:
        (r,) = m.measure([hook("settle", target)])
        calls = m._pool.call("explorer.testing.hooks:uneven_calls", "settle", num_threads=1)
    # The check (which is also the warm-up), then at least two rounds.
    assert isinstance(calls, dict) and calls["value"] >= 1 + 2 * 5
    # The kept round's median is the steady 10 ms, whatever the shared machine did.
    assert r.is_ok and len(r.run_secs) == 5 and statistics.median(r.run_secs) < 0.04


def test_a_correct_kernel_that_stays_noisy_is_ok_stored_and_ranked(mm, target, tmp_path):
    """Issue 21: noise is a property of a reading, never a failure. A kernel whose every round
    spreads wide is OK, says so (``is_noisy``, ``noise_note``), is stored as OK, ranks, and
    can be a run's best."""
    with LocalMeasurer(ONE_CALL_PER_REPEAT, num_build_workers=1) as m:
        (jittery,) = m.measure([hook("jitter", target)])
    assert jittery.status is MeasureStatus.OK and jittery.is_ok and jittery.error_msg is None
    assert len(jittery.run_secs) == 5 and jittery.is_noisy
    assert "spread" in (jittery.noise_note or "")
    tight = MeasureResult(MeasureStatus.OK, (1e-3, 1e-3, 1e-3))
    assert not tight.is_noisy and tight.noise_note is None
    fast_noisy = MeasureResult(MeasureStatus.OK, (1e-4, 9e-4, 1e-4))
    store = get_store(tmp_path / "t.db")
    run = store.create_run(mm, target, "manual")
    slow, fast = tiled(mm, target, 16, 16), tiled(mm, target, 8, 8)
    store.add_trials(run.id, [NewTrial(slow, tight), NewTrial(fast, fast_noisy)])
    (again,) = [t for t in store.trials(run_id=run.id) if t.candidate == fast]
    assert again.status is MeasureStatus.OK and again.result.run_secs == fast_noisy.run_secs
    assert summarize_run(run.id, store.trial_rows(run_id=run.id)).best_secs == 1e-4
    assert store.best(mm, target)[0].candidate == fast


def test_a_legacy_noisy_trial_reads_back_as_ok(mm, target, tmp_path):
    """A database written when "noisy" was a status is upgraded: its rows rank as OK."""
    import sqlite3

    path = tmp_path / "old.db"
    store = get_store(path)
    run = store.create_run(mm, target, "manual")
    store.add_trials(
        run.id, [NewTrial(tiled(mm, target, 8, 8), MeasureResult(MeasureStatus.OK, (2e-3,)))]
    )
    store.close()
    # Back to schema 4 with the row as "noisy", as that version wrote it (without the
    # tables later versions added).
    conn = sqlite3.connect(path)
    for table in ("model_races", "model_runs", "models"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("ALTER TABLE trials DROP COLUMN cache_flush")
    conn.execute("DROP TRIGGER trials_no_update")
    conn.execute("UPDATE trials SET status = 'noisy'")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.execute(
        "CREATE TRIGGER trials_no_update BEFORE UPDATE ON trials "
        "BEGIN SELECT RAISE(ABORT, 'trials are append-only'); END"
    )
    conn.commit()
    conn.close()
    store = get_store(path)
    (trial,) = store.trials(run_id=run.id)
    assert trial.status is MeasureStatus.OK and store.best(mm, target)[0].id == trial.id
    assert trial.result.cache_flush is CacheFlush.NONE  # as every trial then was timed
    assert MeasureStatus("noisy") is MeasureStatus.OK  # JSON Lines and CSV exports too
    store.close()


# -- fewer repeats: hopeless kernels, and kernels too slow for all of them ---------------------
def test_a_hopeless_kernel_stops_after_two_repeats_when_measured_not_when_re_timed(target):
    # Issue 9 (throughput): on matmul 1024 most of a search's time went to 5 repeats of random
    # kernels 3-100x slower than its best so far. The unscheduled matmul 256 is some 30x
    # slower than its tiled schedule.
    w = get_workload("matmul", M=256, N=256, K=256)
    fast, slow = tiled(w, target, 16, 16), unscheduled(w, target)
    config = MeasureConfig(max_spread=math.inf)  # about repeats, not about noise
    with LocalMeasurer(config, num_build_workers=1) as m:
        (best,) = m.measure([fast])
        (full,) = m.measure([slow])  # no best given: all its repeats
        assert best.median_secs and full.median_secs
        # The bar, a tenth of the slow kernel's own time: whatever the machine's load did to
        # the fast kernel's reading, the slow one is hopeless against it.
        bar = full.median_secs / 10
        (hopeless,) = m.measure([slow], best_secs=bar)
        (faster,) = m.measure([fast], best_secs=full.median_secs)  # not slower: all repeats
        (retimed,) = m.remeasure([slow], rounds=1)  # re-timing: never cut short
        # ... nor beside the fast one while a call of it takes under 0.1 s (see below).
        _, [beside] = m.measure_paired([fast, slow], rounds=1)
        with pytest.raises(ValueError, match="best_secs"):
            m.measure([fast], best_secs=-1.0)
    assert [len(r.run_secs) for r in (best, full, faster, retimed)] == [5] * 4
    # Beside the fast one, cut only from 0.1 s a call (it takes milliseconds on a quiet
    # machine, and more beside another test's kernels on the same cores).
    assert len(beside.run_secs) == 5 or min(beside.run_secs) >= CUT_MIN_CALL_SECS, beside
    assert hopeless.is_ok and len(hopeless.run_secs) == 2
    assert min(hopeless.run_secs) >= 3 * bar
    with LocalMeasurer(replace(config, hopeless_ratio=None), num_build_workers=1) as m:
        (every,) = m.measure([slow], best_secs=best.median_secs)
    assert len(every.run_secs) == 5


def test_a_search_cuts_short_only_kernels_three_times_slower_than_its_best_so_far(target):
    w = get_workload("matmul", M=128, N=128, K=128)
    config = MeasureConfig(max_spread=math.inf, min_repeat_secs=0.005)
    with LocalMeasurer(config) as m, get_store(":memory:") as store:
        result = Tuner(measurer=m, store=store, batch_size=8, confirm_top=0).run(
            w, target, "random", max_trials=24, seed=0
        )
        trials = [t for t in store.trials(run_id=result.run.id) if not t.is_remeasure]
    assert len(trials) == 24
    # The bar, as the measurer sets it for each kernel of a batch (batches of 8, timed in
    # order): 3 times the faster of the run's best median before the batch and the fastest
    # sample of the batch's kernels timed before this one. (On a busy machine a kernel's
    # fastest sample can be far below its median: the bar is not the medians'.)
    best_before = math.inf
    cut = 0
    for start in range(0, len(trials), 8):
        batch = [t.result for t in trials[start : start + 8]]
        fastest_sample = math.inf
        for r in batch:
            if len(r.run_secs) == 2:
                cut += 1
                bar = 3 * min(best_before, fastest_sample)
                assert min(r.run_secs) >= bar, (r.run_secs, bar)
            elif r.run_secs:
                assert len(r.run_secs) == 5
            if r.is_ok and r.run_secs:
                fastest_sample = min(fastest_sample, *r.run_secs)
        medians = [r.median_secs for r in batch if r.is_ok and r.median_secs]
        best_before = min([best_before, *medians])
    assert cut > 0, "random matmul 128 schedules 3x slower than the best are common"


def test_a_re_timing_cuts_a_kernel_of_a_tenth_of_a_second_within_its_first_round(target):
    # A BERT layer's unscheduled tasks take 0.1-1 s a call, and a model tune's every chunk
    # re-timed one in full (5 repeats) beside kernels of milliseconds before leaving it out.
    w = get_workload("matmul", M=512, N=512, K=512)
    config = MeasureConfig(max_spread=math.inf)
    with LocalMeasurer(config, num_build_workers=1) as m:
        fast_rounds, slow_rounds = m.measure_paired(
            [tiled(w, target, 16, 16), unscheduled(w, target)]
        )
    assert len(fast_rounds) == 3 and all(len(r.run_secs) == 5 for r in fast_rounds)
    [slow] = slow_rounds  # cut within round 1, then left out
    assert min(slow.run_secs) >= max(CUT_MIN_CALL_SECS, 3 * fast_rounds[0].median_secs)
    assert len(slow.run_secs) == 2


def test_a_run_carried_over_cuts_its_baseline_short_against_the_earlier_best(target):
    # Issue 24 (throughput): a model tune timed its task's unscheduled program in full before
    # every chunk (a BERT layer's largest matmul: 5 repeats of 1.1 s each time, 1/6 of the
    # tune with its re-timings). The earlier chunks' best makes it a hopeless kernel.
    w = get_workload("matmul", M=256, N=256, K=256)
    config = MeasureConfig(max_spread=math.inf, min_repeat_secs=0.005)
    with LocalMeasurer(config) as m, get_store(":memory:") as store:
        tuner = Tuner(measurer=m, store=store, batch_size=4, confirm_top=1)
        first = tuner.run(w, target, "random", max_trials=8, seed=0)
        second = tuner.run(w, target, "random", max_trials=4, seed=1, prior_runs=[first.run.id])
        rows = store.trial_rows(run_id=second.run.id)
    assert first.baseline is not None and second.baseline is not None
    assert first.best_secs and first.baseline_secs
    # Precondition: the unscheduled program is far more than 3x the best of 8 random schedules.
    assert min(first.baseline.result.run_secs) >= 3 * first.best_secs
    assert len(first.baseline.result.run_secs) == 5  # no earlier best: all its repeats
    assert len(second.baseline.result.run_secs) == 2  # hopeless against the earlier best
    # ... and still re-timed beside the run's best, which decides.
    assert second.is_conclusive and second.baseline_secs
    assert sum(r.trace_hash == rows[0].trace_hash for r in rows) > 1


def test_a_run_times_its_baseline_of_a_tenth_of_a_second_as_a_reference(target):
    # Issue 24 (throughput): a run timed its unscheduled program in full before its search
    # (matmul 512: the check's call and 5 repeats of 0.3 s; matmul 1024: two calls of 5 s),
    # though its confirmation re-times it beside the best, cut short, and that decides.
    w = get_workload("matmul", M=512, N=512, K=512)
    slow, fast = unscheduled(w, target), tiled(w, target, 16, 16)
    config = MeasureConfig(max_spread=math.inf)
    with LocalMeasurer(config, num_build_workers=1) as m:
        (plain,) = m.measure([slow])
        (reference,) = m.measure([slow], reference=True)
        (quick,) = m.measure([fast], reference=True)  # under 0.1 s a call: every repeat
        with pytest.raises(TypeError, match="reference"):
            m.measure([fast], reference="yes")
        with get_store(":memory:") as store:
            run = Tuner(measurer=m, store=store, confirm_top=1).run(
                w, target, "random", max_trials=2, seed=0
            )
    assert min(plain.run_secs) >= CUT_MIN_CALL_SECS and len(plain.run_secs) == 5
    assert reference.is_ok and len(reference.run_secs) == 2
    assert min(reference.run_secs) >= CUT_MIN_CALL_SECS
    assert quick.is_ok and len(quick.run_secs) == 5
    assert run.baseline is not None and len(run.baseline.result.run_secs) == 2
    assert run.baseline_secs  # re-timed in the confirmation all the same


def test_a_kernel_too_slow_for_its_repeats_is_timed_with_those_that_fit(target):
    # 1 s a call and a 5 s run timeout (half of it for timing): the check, TVM's untimed first
    # call and 5 repeats took 7 s and the kernel was a TIMEOUT, with no time at all. Now it
    # gets the repeats that fit in 2.5 s, timed call by call, the check's call the first: 3
    # repeats, 3 calls in all.
    with LocalMeasurer(_slow_calls_config(5, run_timeout_secs=5), num_build_workers=1) as m:
        (r,) = m.measure([hook("slow", target)])
        calls = _slow_calls(m)
    assert r.is_ok, r.error_msg
    assert len(r.run_secs) == 3 and min(r.run_secs) >= SLOW_CALL_SECS
    assert calls == 3


def _slow_calls_config(repeat: int, *, run_timeout_secs: float) -> MeasureConfig:
    """Repeats of one call each, no warm-up: the `slow` hook's calls are counted."""
    return MeasureConfig(
        repeat=repeat,
        min_repeat_secs=0,
        warmup_secs=0,
        run_timeout_secs=run_timeout_secs,
        max_spread=math.inf,
        num_threads=1,  # the runner the count is asked of (another count restarts it)
    )


def _slow_calls(m: LocalMeasurer) -> int:
    """How many times the measurer's runner has called the `slow` hook."""
    reply = m._pool.call("explorer.testing.hooks:uneven_calls", "slow", num_threads=1)
    assert isinstance(reply, dict)
    return int(reply["value"])


def test_a_hopeless_kernel_of_a_second_a_call_is_read_by_its_check_call_alone(target):
    # Issue 24 (throughput): the unscheduled matmul 1024 (6-7 s a call) was timed twice in
    # the confirmation of every run beside kernels of milliseconds, 2 calls each time; the
    # first call already says it is hopeless. The `slow` hook takes 1 s every call.
    slow, ok = hook("slow", target), hook("ok", target)
    with LocalMeasurer(_slow_calls_config(3, run_timeout_secs=20), num_build_workers=1) as m:
        (cut,) = m.measure([slow], best_secs=SLOW_CALL_SECS / 10)  # a search's: hopeless
        calls_cut = _slow_calls(m)
        (full,) = m.measure([slow], best_secs=SLOW_CALL_SECS)  # within 3x of the best
        calls_full = _slow_calls(m) - calls_cut
        # A confirmation: round 1 reads it by its check's call, beside the fast kernel timed
        # before it; later rounds leave it out (`Batch.settled`).
        fast_rounds, slow_rounds = m.measure_paired([ok, slow], rounds=3)
        calls_paired = _slow_calls(m) - calls_cut - calls_full
        # Timed first, nothing faster seen yet: all its repeats.
        [[first]] = m.measure_paired([slow], rounds=1)
        calls_before = _slow_calls(m)
        (reference,) = m.measure([slow], reference=True)  # a run's baseline: that call alone
        calls_reference = _slow_calls(m) - calls_before
    assert cut.is_ok and len(cut.run_secs) == 1 and calls_cut == 1
    assert min(cut.run_secs) >= SLOW_CALL_SECS
    assert len(full.run_secs) == 3 and calls_full == 3
    assert len(fast_rounds) == 3 and all(len(r.run_secs) == 3 for r in fast_rounds)
    assert len(slow_rounds) == 1 and len(slow_rounds[0].run_secs) == 1 and calls_paired == 1
    assert slow_rounds[0].is_ok and min(slow_rounds[0].run_secs) >= SLOW_CALL_SECS
    assert len(first.run_secs) == 3
    assert reference.is_ok and len(reference.run_secs) == 1 and calls_reference == 1


@given(
    repeat=st.integers(1, 20),
    call_secs=st.floats(0, 100, allow_nan=False),
    budget=st.floats(0, 100, allow_nan=False) | st.just(math.inf),
    extra=st.sampled_from([-1, 0, 1]),
)
def test_repeats_that_fit_are_between_two_and_all_and_fit_when_they_can(
    repeat, call_secs, budget, extra
):
    n = repeats_that_fit(repeat, call_secs, budget, extra_calls=extra)
    assert min(repeat, 2) <= n <= repeat
    if call_secs * (repeat + extra) <= budget:
        assert n == repeat  # everything fits: nothing is taken away
    elif n > 2:
        assert call_secs * (n + extra) <= budget  # fewer, and those fit


class _ScriptedKernel:
    """A timer for ``_Sampler``'s sizing rules alone: each call takes ``fast`` seconds when it
    is undisturbed (a ``clean`` fraction of calls, at random) and ``slow`` otherwise, on a
    simulated clock (``now``), which the sampler's deadlines read. Real kernels cannot be
    disturbed on cue."""

    def __init__(self, fast: float, slow: float, clean: float) -> None:
        self.fast, self.slow, self.clean = fast, slow, clean
        self.now, self.random = 0.0, random.Random(0)

    def time_evaluator(self, name, dev, *, number, repeat, **options):
        def run(*args):
            results = []
            for _ in range(repeat):
                took = 0.0
                for _ in range(number):
                    took += self.fast if self.random.random() < self.clean else self.slow
                self.now += took
                results.append(took / number)
            return type("Results", (), {"results": results})

        return run


def _sampler(kernel: _ScriptedKernel, monkeypatch, *, fastest: float) -> _timing._Sampler:
    monkeypatch.setattr(_timing.time, "perf_counter", lambda: kernel.now)
    return _timing._Sampler(
        kernel,
        None,
        [],
        window=0.02,
        flush=0,
        fastest=fastest,
        long_calls=False,
        carried=[],
        deadline=10.0,
    )


def test_a_kernel_whose_calls_stay_disturbed_is_timed_within_its_top_up(monkeypatch):
    """Beside one busy core a 2-thread kernel's warm-up met one 3 us call and then every call
    took 4 ms: the first chunk, sized from the 3 us call, held 200 samples of 34 calls a repeat
    (the run's 20 s timeout went by: a 2-trial tune took 46 s instead of 8)."""
    kernel = _ScriptedKernel(fast=3e-6, slow=4e-3, clean=0.0)
    sampler = _sampler(kernel, monkeypatch, fastest=3e-6)
    repeats = sampler.repeats(5)
    assert len(repeats) == 5 and min(repeats) >= 4e-3
    # a first sample of 34 calls a repeat, a window each, then the top-up's windows at most
    most = 5 * 34 * 4e-3 + 5 * 0.02 * (1 + _timing.TOP_UP_WINDOWS) + 5 * 4e-3
    assert kernel.now <= most, kernel.now  # it was 130 s: 200 samples of 34 calls a repeat


def test_a_disturbed_repeat_is_topped_up_until_it_meets_an_undisturbed_call(monkeypatch):
    """One call in 20 runs undisturbed (0.2 ms against 4 ms), as beside two CPU burners:
    every repeat reads it."""
    kernel = _ScriptedKernel(fast=2e-4, slow=4e-3, clean=0.05)
    sampler = _sampler(kernel, monkeypatch, fastest=2e-4)
    repeats = sampler.repeats(5)
    assert statistics.median(repeats) == 2e-4 and repeats.count(2e-4) >= 4, repeats
    assert kernel.now <= 5 * 0.02 * (1 + _timing.TOP_UP_WINDOWS) + 5 * 2e-4


def test_a_quiet_kernel_fills_each_window_and_no_more(monkeypatch):
    kernel = _ScriptedKernel(fast=1e-5, slow=1e-5, clean=1.0)
    sampler = _sampler(kernel, monkeypatch, fastest=1e-5)
    assert sampler.repeats(5) == pytest.approx([1e-5] * 5)
    assert 5 * 0.02 * 0.9 <= kernel.now <= 5 * 0.02 * 1.2


def test_a_quiet_millisecond_kernel_fills_each_window_with_single_calls(monkeypatch):
    """A 1 ms call is a sample of its own (``number`` 1): the first chunk's one sample a
    repeat must not end the repeats, which ``one call fills a window`` once did."""
    kernel = _ScriptedKernel(fast=1e-3, slow=1e-3, clean=1.0)
    sampler = _sampler(kernel, monkeypatch, fastest=1e-3)
    assert sampler.repeats(5) == pytest.approx([1e-3] * 5)
    assert 5 * 0.02 * 0.9 <= kernel.now <= 5 * 0.02 * 1.2, kernel.now
