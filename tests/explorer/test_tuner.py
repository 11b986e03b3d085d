"""The batch loop end to end: real design space, real measurer, real SQLite file."""

from __future__ import annotations

import re

import pytest

from explorer.errors import RunInUseError, SearchError, SettingError, SettingTypeError
from explorer.machine import CACHE_ENV, MachinePeak, cached_peak
from explorer.machine._peak import _cache_key, _write_cache
from explorer.measure import trace_key
from explorer.search import RandomSearch
from explorer.storage import summarize_run
from explorer.tuner import Tuner
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

WORKLOAD = get_workload("matmul", M=32, N=32, K=32)


def test_a_run_stores_every_trial_and_reports_a_confirmed_best(measurer, store, cpu_target):
    progress = []
    tuner = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=2, confirm_rounds=3)
    result = tuner.run(
        WORKLOAD, cpu_target, "random", max_trials=8, seed=1, on_progress=progress.append
    )
    assert result.stopped_because == "budget" and result.num_trials == 8
    assert [p.num_trials for p in progress] == [4, 8]
    assert result.run.status == "finished" and result.run.ended_at is not None
    trials = store.trials(run_id=result.run.id)
    # the unscheduled baseline, 8 search trials, then the confirmation: the 2 best and the
    # baseline re-timed side by side in 3 rounds, round-robin, one batch (one created_at); a
    # schedule 3x slower than a round's fastest (the baseline may be) sits out later rounds
    confirmation = trials[9:]
    assert [t.seq for t in trials] == list(range(len(trials)))
    assert trials[0].candidate.decisions == {"baseline": True} and trials[0].is_remeasure
    assert all(t.is_remeasure for t in confirmation) and 3 <= len(confirmation) <= 9
    assert len({t.created_at for t in confirmation}) == 1
    keys = [trace_key(t.candidate.trace) for t in confirmation]
    assert len(set(keys[:3])) == 3 and set(keys) == set(keys[:3])  # round 1 first, complete
    assert all(t.status is MeasureStatus.OK for t in trials)
    assert result.best is not None and result.best_secs > 0
    assert result.best_gflops == pytest.approx(WORKLOAD.flops() / result.best_secs / 1e9)
    assert result.run.settings["seed"] == 1 and result.run.settings["max_trials"] == 8
    curve = store.best_so_far(result.run.id)
    assert list(curve.best_secs) == sorted(curve.best_secs, reverse=True)


def test_should_stop_cancels_between_batches_and_keeps_the_records(measurer, store, cpu_target):
    calls = []

    def stop_after_first_batch() -> bool:
        calls.append(1)
        return len(calls) > 1

    result = Tuner(measurer=measurer, store=store, batch_size=3, confirm_top=0).run(
        WORKLOAD, cpu_target, "random", max_trials=12, should_stop=stop_after_first_batch
    )
    assert result.stopped_because == "cancelled"
    assert result.run.status == "cancelled"
    assert store.count_trials(run_id=result.run.id, remeasures=False) == 3


def test_time_budget_stops_the_run(measurer, store, cpu_target):
    result = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0).run(
        WORKLOAD, cpu_target, "random", max_trials=1000, max_secs=0.0
    )
    assert result.stopped_because == "time" and result.num_trials == 0


def test_an_interrupted_run_keeps_its_trials_and_resumes_without_repeats(
    measurer, store, cpu_target
):
    def interrupt(progress) -> None:
        if progress.num_trials >= 4:
            raise KeyboardInterrupt

    tuner = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0)
    with pytest.raises(KeyboardInterrupt):
        tuner.run(WORKLOAD, cpu_target, "random", max_trials=10, seed=3, on_progress=interrupt)
    (run,) = store.runs()
    assert run.status == "interrupted" and run.owner is None  # Ctrl-C: resumable, released
    assert store.count_trials(run_id=run.id, remeasures=False) == 4

    result = tuner.run(WORKLOAD, cpu_target, "random", max_trials=10, seed=3, resume_run_id=run.id)
    assert result.num_trials == 10 and result.run.id == run.id
    trials = store.trials(run_id=run.id)
    keys = [trace_key(t.candidate.trace) for t in trials if not t.is_remeasure]
    assert len(keys) == 10 and len(set(keys)) == 10
    # one baseline, measured by the first session only (confirm_top=0: never re-timed)
    assert sum(t.candidate.decisions == {"baseline": True} for t in trials) == 1


def test_resume_refuses_a_different_workload(measurer, store, cpu_target):
    tuner = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0)
    result = tuner.run(WORKLOAD, cpu_target, "random", max_trials=2)
    other = get_workload("matmul", M=16, N=16, K=16)
    with pytest.raises(SearchError, match="cannot be resumed"):
        tuner.run(other, cpu_target, "random", max_trials=4, resume_run_id=result.run.id)
    with pytest.raises(SearchError, match="at least 1"):
        tuner.run(WORKLOAD, cpu_target, "random", max_trials=0)


def test_resume_does_not_count_the_re_timings_of_a_stopped_run(measurer, store, cpu_target):
    tuner = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=2, confirm_rounds=1)
    calls = []
    first = tuner.run(
        WORKLOAD, cpu_target, "random", max_trials=12, seed=5,
        should_stop=lambda: calls.append(1) or len(calls) > 1,
    )  # fmt: skip
    # the baseline, 4 trials, then the 2 best and the baseline re-timed and stored beside them
    assert first.num_trials == 4 and store.count_trials(run_id=first.run.id) == 8
    with pytest.raises(SearchError, match="max_trials=12, not 8"):  # a run keeps its budget
        tuner.run(WORKLOAD, cpu_target, "random", max_trials=8, seed=5, resume_run_id=first.run.id)
    resumed = tuner.resume(first.run.id)
    assert resumed.num_trials == 12 and resumed.run.status == "finished"
    trials = store.trials(run_id=first.run.id)
    searched = [t for t in trials if not t.is_remeasure]
    assert len({trace_key(t.candidate.trace) for t in searched}) == len(searched) == 12
    # re-timed twice (once per session that searched), each time the 2 best and the baseline,
    # which was measured once
    assert sum(t.is_remeasure for t in trials) == 1 + 2 * 3
    assert store.count_trials(run_id=first.run.id, remeasures=False) == 12


def test_runs_and_tune_agree_and_a_finished_run_is_not_re_timed_again(measurer, store, cpu_target):
    tuner = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=2, confirm_rounds=1)
    result = tuner.run(WORKLOAD, cpu_target, "random", max_trials=8, seed=2)
    summary = summarize_run(result.run.id, store.trial_rows(run_id=result.run.id))
    # re-measurements: the baseline, then it and the 2 best re-timed
    assert summary.num_trials == result.num_trials == 8 and summary.num_remeasured == 4
    assert summary.best_trial_id == result.best.id and summary.best_secs == result.best_secs
    # the best is its schedule's first measurement, never a re-timing (when no schedule beat
    # the unscheduled program, that first measurement is the baseline's)
    assert summary.is_confirmed and (not result.best.is_remeasure or result.best_is_baseline)
    assert result.best.id == min(
        t.id
        for t in store.trials(run_id=result.run.id)
        if trace_key(t.candidate.trace) == trace_key(result.best.candidate.trace)
    )
    count = store.count_trials(run_id=result.run.id)
    again = tuner.resume(result.run.id)  # nothing left to search: nothing measured, no re-timing
    assert store.count_trials(run_id=result.run.id) == count == 12
    assert again.num_trials == 8 and again.best.id == result.best.id
    assert again.best_secs == result.best_secs and again.run.status == "finished"


class _RefusesToStart(RandomSearch):
    name = "random"

    def _start(self, history):
        raise SearchError("this start point is refused")


def test_a_start_that_fails_creates_no_run(measurer, store, cpu_target):
    tuner = Tuner(measurer=measurer, store=store)
    with pytest.raises(SearchError, match="refused"):
        tuner.run(WORKLOAD, cpu_target, _RefusesToStart(), max_trials=4)
    with pytest.raises(SearchError, match="max_secs"):
        tuner.run(WORKLOAD, cpu_target, "random", max_trials=4, max_secs=float("nan"))
    assert store.runs() == []


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_trials": 2.5}, SettingTypeError, "max_trials must be a whole number (got 2.5)"),
        ({"max_trials": True}, SettingTypeError, "max_trials must be a whole number"),
        ({"max_trials": 0}, SettingError, "max_trials must be at least 1 (got 0)"),
        ({"seed": "x"}, SettingTypeError, "seed must be a whole number (got 'x')"),
        ({"seed": -1}, SettingError, "seed must be at least 0 (got -1)"),
        ({"max_secs": "1"}, SettingTypeError, "max_secs must be a number of seconds or None"),
        ({"max_secs": float("nan")}, SettingError, "max_secs must be a number >= 0"),
    ],
)
def test_bad_run_settings_are_one_sentence_before_any_run(
    measurer, store, cpu_target, kwargs, error, message
):
    # Before: max_trials=2.5 ran 3 trials and seed='x' failed inside NumPy's SeedSequence.
    tuner = Tuner(measurer=measurer, store=store, confirm_top=0)
    with pytest.raises(error) as info:
        tuner.run(WORKLOAD, cpu_target, "random", **{"max_trials": 2, **kwargs})
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
    assert isinstance(info.value, SearchError) and isinstance(info.value, ValueError)
    assert isinstance(info.value, TypeError) == (error is SettingTypeError)
    assert store.runs() == [] and tuner.run_id is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confirm_top": -1}, "confirm_top must be at least 0 (got -1)"),
        ({"confirm_top": 1.5}, "confirm_top must be a whole number"),
        ({"batch_size": 0}, "batch_size must be at least 1 (got 0)"),
        ({"batch_size": "4"}, "batch_size must be a whole number"),
    ],
)
def test_bad_tuner_settings_are_refused(measurer, store, kwargs, message):
    with pytest.raises(SettingError, match=re.escape(message)):
        Tuner(measurer=measurer, store=store, **kwargs)


def test_resume_names_a_bad_run_id_plainly(measurer, store, cpu_target):
    tuner = Tuner(measurer=measurer, store=store)
    with pytest.raises(SettingTypeError, match=r"run_id must be a whole number \(got 1\.5\)"):
        tuner.resume(1.5)
    with pytest.raises(SettingError, match="run_id must be at least 1"):
        tuner.resume(0)
    with pytest.raises(SearchError) as info:  # the store by its file, not an object's repr
        tuner.resume(7)
    assert str(info.value) == f"there is no run 7 in {store.path}"
    assert store.runs() == []


def test_one_owner_per_run_within_a_process(measurer, store, cpu_target):
    tuner = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0)
    attempts = []

    def resume_meanwhile(progress) -> None:
        with pytest.raises(RunInUseError, match="already running .in this process"):
            Tuner(measurer=measurer, store=store).resume(progress.run_id)
        attempts.append(progress.run_id)

    result = tuner.run(WORKLOAD, cpu_target, "random", max_trials=2, on_progress=resume_meanwhile)
    assert attempts == [result.run.id] and store.get_run(result.run.id).owner is None
    with pytest.raises(SearchError, match="no run 99"):
        tuner.resume(99)


def test_a_time_budget_counts_every_session_of_a_run(measurer, store, cpu_target):
    tuner = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0)
    first = tuner.run(WORKLOAD, cpu_target, "random", max_trials=50, max_secs=0.2)
    # a batch or a few (schedules the shared measurer built before are not built again)
    assert first.stopped_because == "time" and 2 <= first.num_trials < 50
    spent = store.get_run(first.run.id).active_secs
    assert spent >= 0.2
    again = tuner.resume(first.run.id)  # the budget was spent in the first session
    assert again.stopped_because == "time" and again.num_trials == first.num_trials
    assert store.get_run(first.run.id).active_secs >= spent


def test_a_run_records_where_it_measured_and_the_peak_kept_for_it(
    measurer, store, cpu_target, tmp_path, monkeypatch
):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "peak.json"))
    tuner = Tuner(measurer=measurer, store=store, batch_size=2)
    first = tuner.run(WORKLOAD, cpu_target, "random", max_trials=2, seed=0).run
    # none kept: none recorded, and none measured behind the user's back
    assert store.get_run(first.id).environment["peak"] is None
    assert cached_peak(cpu_target) is None
    kept = MachinePeak(
        gflops_f32=123.0,
        bandwidth_gbs=45.0,
        target_key=cpu_target.key(),
        cpu_model="the CPU",
        tvm_version="0.27",
        num_threads=cpu_target.num_cores,
        measured_at=1.0,
        busy_elsewhere=0.0,
    )
    _write_cache({_cache_key(cpu_target): kept})
    second = tuner.run(WORKLOAD, cpu_target, "random", max_trials=2, seed=0).run
    environment = store.get_run(second.id).environment
    assert environment["measured_on"] == "this machine"
    assert MachinePeak.from_json(environment["peak"]) == kept
