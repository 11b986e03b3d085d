"""A run carried over from earlier runs of its workload (``Tuner.run(prior_runs=...)``, what a
model tune's chunks do): its strategy is told their trials first, it measures none of their
schedules again, they spend none of its budget, and a resume tells them again. Measured with
the shipped recording, so every run sees the same timings."""

from __future__ import annotations

import pytest

from explorer.errors import SearchError
from explorer.measure import trace_key
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.testing.recordings import (
    SMALL,
    TINY,
    open_recording,
    recorded_trials,
    replay_measurer,
)
from explorer.tuner import PRIOR_RUNS, Tuner

AUTOTVM = {"plan_size": 8, "parallel_size": 16, "n_iter": 40, "early_stop": 10}


@pytest.fixture
def setting(tmp_path):
    (tmp_path / "recording").mkdir()
    recording = open_recording(tmp_path / "recording")
    target = recorded_trials(recording, TINY)[0].candidate.target
    store = get_store(tmp_path / "records.db")
    yield store, replay_measurer(recording, TINY), target
    store.close()
    recording.close()


def keys(store, run_id: int) -> list[str]:
    return [
        trace_key(t.candidate.trace) for t in store.trials(run_id=run_id) if not t.is_remeasure
    ]


@pytest.mark.parametrize("strategy", ["random", "autotvm", "evolutionary"])
def test_a_carried_over_run_measures_none_of_the_earlier_schedules(setting, strategy) -> None:
    store, measurer, target = setting
    tuner = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=1)
    options = AUTOTVM if strategy == "autotvm" else {}
    first = tuner.run(TINY, target, make_strategy(strategy, **options), max_trials=8, seed=0)
    second = tuner.run(
        TINY, target, make_strategy(strategy, **options), max_trials=8, seed=1,
        prior_runs=[first.run.id],
    )  # fmt: skip
    before, after = keys(store, first.run.id), keys(store, second.run.id)
    assert len(after) == second.num_trials == 8  # the earlier 8 spent none of its budget
    assert not set(before) & set(after)
    assert second.run.settings[PRIOR_RUNS] == [first.run.id]
    # its best is one of its own measurements (a trial, or its baseline), never an earlier run's
    assert second.best is not None and second.best.run_id == second.run.id


def test_without_carrying_over_a_new_seed_can_measure_earlier_schedules_again(setting) -> None:
    """What the carry-over prevents: the recording's small space, searched twice afresh."""
    store, measurer, target = setting
    tuner = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=0)
    first = tuner.run(TINY, target, "random", max_trials=8, seed=0)
    second = tuner.run(TINY, target, "random", max_trials=8, seed=1)
    assert set(keys(store, first.run.id)) & set(keys(store, second.run.id))


def test_a_stopped_carried_over_run_resumes_as_if_never_stopped(setting) -> None:
    store, measurer, target = setting
    tuner = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=0)
    first = tuner.run(TINY, target, "random", max_trials=8, seed=0)
    whole = tuner.run(TINY, target, "random", max_trials=8, seed=3, prior_runs=[first.run.id])
    calls = []
    stopped = tuner.run(
        TINY, target, "random", max_trials=8, seed=3, prior_runs=[first.run.id],
        should_stop=lambda: calls.append(1) or len(calls) > 1,
    )  # fmt: skip
    assert stopped.num_trials == 4
    resumed = tuner.resume(stopped.run.id)
    assert resumed.num_trials == 8
    assert keys(store, resumed.run.id) == keys(store, whole.run.id)
    with pytest.raises(SearchError, match="carried over from runs"):
        tuner.run(TINY, target, "random", max_trials=8, seed=3, resume_run_id=stopped.run.id)


def test_prior_runs_of_another_workload_or_missing_are_refused_before_any_run(setting) -> None:
    store, measurer, target = setting
    tuner = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=0)
    first = tuner.run(TINY, target, "random", max_trials=4, seed=0)
    runs_before = len(store.runs())
    with pytest.raises(SearchError) as err:
        tuner.run(SMALL, target, "random", max_trials=4, prior_runs=[first.run.id])
    assert str(err.value).startswith(f"prior run {first.run.id} searched {TINY.key()}")
    assert "only runs of the same workload and target can be carried over" in str(err.value)
    with pytest.raises(SearchError, match="there is no run 999"):
        tuner.run(TINY, target, "random", max_trials=4, prior_runs=[999])
    assert len(store.runs()) == runs_before
