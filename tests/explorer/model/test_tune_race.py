"""Tuning a whole model (one budget, a task scheduler) and racing the network against ONNX
Runtime, with real measurements, builds and runtimes (issue 23)."""

from __future__ import annotations

import dataclasses
import re
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.analysis import model_times_info
from explorer.core import (
    MeasureResult,
    ModelRace,
    ModelRecord,
    ModelTask,
    NewTrial,
    RaceEntry,
    RunStatus,
)
from explorer.errors import CapabilityError, ModelError, SearchError
from explorer.machine import cached_peak
from explorer.measure import trace_key
from explorer.model import (
    MAX_ERROR,
    ONNXRUNTIME,
    TUNE_RELAX,
    TUNED,
    UNTUNED,
    TaskState,
    best_schedules,
    import_model,
    machine_speed,
    race_model,
    speed_note,
    speed_text,
    task_states,
    tune_model,
    untuned_kept,
)
from explorer.model._race_child import _relative_error
from explorer.model._tune import MIN_FIRST_CHUNK, first_chunks, next_task
from explorer.report import collect_report, render_report
from explorer.search import baseline_candidate
from explorer.storage import get_store
from explorer.target import Target
from explorer.text import format_secs
from explorer.tuner import PRIOR_RUNS
from explorer.types import CacheFlush, MeasureStatus
from explorer.workloads import get_workload


@pytest.fixture(scope="module")
def tuned(tiny_onnx, measurer, tmp_path_factory, import_and_tune):
    """The tiny network imported for one core and tuned with 20 random trials, in round-robin.

    One core: these tests run beside the rest of the suite, and a 2-thread build beside busy
    cores waits for their time slices (test_race_under_load.py shows the race saying so)."""
    db = tmp_path_factory.mktemp("tune") / "records.db"
    model, tune = import_and_tune(tiny_onnx, db, measurer, cores=1, trials=20)
    return db, model, tune


def test_a_tune_spends_its_budget_over_the_tasks_costliest_first(tuned):
    db, model, tune = tuned
    assert tune == "random/seed0/round-robin"
    with get_store(db, read_only=True) as store:
        states = task_states(model, store, tune)
        runs = store.model_runs(model.id)
        spent = sum(store.count_trials(run_id=r, remeasures=False) for r, _, _ in runs)
    assert sum(s.trials for s in states) == spent == 20
    first = [task for _, task, _ in runs][:3]
    by_cost = sorted(model.tasks, key=lambda t: -(t.untuned_total_secs or 0))
    assert first == [t.name for t in by_cost[:3]]  # every task's first chunk, costliest first
    conv = next(s for s in states if s.task.name == "fused_conv2d1_add_add1_relu")
    assert conv.best_secs is not None and conv.best_secs < conv.task.untuned_secs


def test_a_tune_continues_where_it_stopped(tuned, measurer):
    """The same tune with a larger budget: only the difference is spent, nothing re-run."""
    db, model, tune = tuned
    with get_store(db) as store:
        before = store.model_runs(model.id)
        steps: list[str] = []
        again = tune_model(
            model, store, measurer, max_trials=28, strategy="random", scheduler="round-robin",
            chunk=8, on_step=steps.append,
        )  # fmt: skip
        assert again == tune
        after = store.model_runs(model.id)
        # each chunk is told as it starts (the Model tab showed nothing for a chunk's first
        # ~15 s of building), with the trials spent before it
        assert len(steps) == len(after) - len(before) and steps[0].endswith("; 20 of 28 spent)")
        assert all(re.fullmatch(r"tuning \S+ \(\d+ trials?; \d+ of 28 spent\)", s) for s in steps)
        assert after[: len(before)] == before and len(after) > len(before)
        assert sum(s.trials for s in task_states(model, store, tune)) == 28
        # a task's later chunk carries over its earlier ones (told first, none measured again)
        chunks: dict[str, list[int]] = {}
        for run_id, task, _ in after:
            earlier = chunks.setdefault(task, [])
            assert store.get_run(run_id).settings.get(PRIOR_RUNS, []) == earlier
            seen = {trace_key(t.candidate.trace) for r in earlier for t in store.trials(run_id=r)}
            mine = [t for t in store.trials(run_id=run_id) if not t.is_remeasure]
            assert not seen & {trace_key(t.candidate.trace) for t in mine}
            earlier.append(run_id)
        assert any(len(runs) > 1 for runs in chunks.values())
        unchanged = tune_model(
            model, store, measurer, max_trials=28, strategy="random", scheduler="round-robin"
        )
        assert unchanged == tune and store.model_runs(model.id) == after


def test_a_tune_stopped_between_chunks_keeps_what_it_measured(tiny_onnx, measurer, tmp_path):
    with get_store(tmp_path / "r.db") as store:
        model = import_model(tiny_onnx, store, measurer=measurer)
        asked = []

        def stop_after_first_chunk() -> bool:
            asked.append(1)
            return bool(store.model_runs(model.id))

        tune = tune_model(
            model, store, measurer, max_trials=12, strategy="random", chunk=4,
            should_stop=stop_after_first_chunk,
        )  # fmt: skip
        (first,) = store.model_runs(model.id)
        assert sum(s.trials for s in task_states(model, store, tune)) >= 1
        tune_model(model, store, measurer, max_trials=12, strategy="random", chunk=4)
        assert store.model_runs(model.id)[0] == first
        assert sum(s.trials for s in task_states(model, store, tune)) == 12


class _CtrlCOnFirstMeasure:
    """The suite's measurer, and a Ctrl-C arriving during its first measurement (a chunk's
    baseline, timed before any trial)."""

    def __init__(self, inner):
        self.inner, self.fired = inner, False

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def measure(self, candidates, **kwargs):
        if not self.fired:
            self.fired = True
            raise KeyboardInterrupt
        return self.inner.measure(candidates, **kwargs)


def test_a_tune_interrupted_before_a_chunk_s_first_batch_resumes_that_chunk(
    tiny_onnx, measurer, tmp_path
):
    """Ctrl-C while a chunk's baseline was timed left its run interrupted with no trial and
    not linked to the tune: the tune started another run, and the first stayed behind."""
    with get_store(tmp_path / "r.db") as store:
        model = import_model(tiny_onnx, store, measurer=measurer)
        with pytest.raises(KeyboardInterrupt):
            tune_model(
                model, store, _CtrlCOnFirstMeasure(measurer), max_trials=8, strategy="random",
                chunk=4,
            )  # fmt: skip
        (stopped,) = [r.id for r in store.runs()]
        assert store.get_run(stopped).status is RunStatus.INTERRUPTED
        assert [run_id for run_id, _, _ in store.model_runs(model.id)] == [stopped]
        tune = tune_model(model, store, measurer, max_trials=8, strategy="random", chunk=4)
        assert store.get_run(stopped).status is RunStatus.FINISHED
        assert store.model_runs(model.id)[0][0] == stopped
        assert sum(s.trials for s in task_states(model, store, tune)) == 8


def test_bad_tune_settings_are_refused(tuned, measurer):
    db, model, _ = tuned
    with get_store(db) as store:
        with pytest.raises(SearchError, match="scheduler must be one of"):
            tune_model(model, store, measurer, max_trials=4, scheduler="fastest")
        with pytest.raises(SearchError, match="at least 1"):
            tune_model(model, store, measurer, max_trials=0)


def test_a_tune_with_transfer_learns_from_the_other_tasks_trials(tuned, measurer):
    """As tune_relax shares one model between tasks: each chunk's model first learns from
    what the database holds of other workloads, here the random tune's trials of the other
    tasks."""
    db, model, _ = tuned
    with get_store(db) as store:
        with pytest.raises(CapabilityError, match="strategy 'random' cannot learn"):
            tune_model(model, store, measurer, max_trials=4, strategy="random", transfer=True)
        tune = tune_model(
            model, store, measurer, max_trials=4, strategy="evolutionary",
            scheduler="round-robin", chunk=4, transfer=True,
        )  # fmt: skip
        assert tune == "evolutionary+transfer/seed0/round-robin"
        ((run_id, task, _),) = [r for r in store.model_runs(model.id) if r[2] == tune]
        settings = store.get_run(run_id).settings
        others = [
            t
            for t in store.trials()
            if t.candidate.workload != store.get_run(run_id).workload and t.run_id != run_id
        ]
        assert settings["transfer_from"] == "auto"
        assert 0 < settings["transfer_trials"] <= len(others)


def _state(name, weight, trials, history, untuned=1e-3, exhausted=False):
    w = get_workload("task")
    task = ModelTask(name, w, weight, w.flops(), untuned)
    return TaskState(task, trials, tuple(history), exhausted)


def test_the_gradient_scheduler_gives_trials_where_latency_falls_fastest():
    # a: still improving fast, called twice per inference; b: flat for its last chunks
    a = _state("a", 2, 32, [(16, 4e-3), (32, 2e-3)])
    b = _state("b", 1, 48, [(16, 1e-3), (32, 1e-3), (48, 1e-3)])
    assert next_task([a, b], "gradient").task.name == "a"
    assert a.gradient() < b.gradient() < 0
    # round-robin: the one with the fewest trials
    assert next_task([a, b], "round-robin").task.name == "a"
    # a task never tried goes first (the costliest untuned first); exhausted ones never
    new = _state("new", 1, 0, [], untuned=5e-4)
    newer = _state("newer", 1, 0, [], untuned=9e-4)
    assert next_task([a, b, new, newer], "gradient").task.name == "newer"
    done = dataclasses.replace(a, exhausted=True)
    assert next_task([done, b], "gradient").task.name == "b"
    assert next_task([done], "gradient") is None


@settings(max_examples=200, deadline=None)
@given(
    costs=st.lists(st.floats(1e-6, 10.0), min_size=1, max_size=60),
    max_trials=st.integers(1, 3000),
    chunk=st.integers(MIN_FIRST_CHUNK, 64),
)
def test_every_task_gets_a_first_chunk_the_budget_holds(costs, max_trials, chunk):
    """MobileNetV2 (33 tasks, 150 trials) once spent its budget on the first chunks of 17 tasks,
    sized by share alone: 16 tasks, 65 % of the tuned network's time, stayed untuned."""
    w = get_workload("task")
    tasks = tuple(ModelTask(f"t{i}", w, 1, 1.0, c) for i, c in enumerate(costs))
    model = ModelRecord(0, "m", "", (), tasks, Target.local_cpu(), 0.0)
    first = first_chunks(model, max_trials, chunk)
    funded = min(len(tasks), max_trials // MIN_FIRST_CHUNK)
    assert len(first) == funded  # every task, when the budget holds MIN_FIRST_CHUNK each
    assert all(MIN_FIRST_CHUNK <= n <= chunk for n in first.values())
    assert sum(first.values()) <= max(max_trials // 2, MIN_FIRST_CHUNK * funded) <= max_trials
    by_cost = sorted(tasks, key=lambda t: -t.untuned_total_secs)
    assert set(first) == {t.name for t in by_cost[:funded]}  # the costliest, when not all
    # a costlier task never gets a smaller first chunk
    sizes = [first[t.name] for t in by_cost[:funded]]
    assert sizes == sorted(sizes, reverse=True)


def test_the_race_checks_and_times_every_build_against_onnxruntime(tuned):
    db, model, tune = tuned
    with get_store(db) as store:
        race = race_model(model, store, tune=tune, rounds=2)
        assert store.model_races(model.id) == [race]
        spent = sum(s.trials for s in task_states(model, store, tune))
    assert race.tune == tune and race.trials == spent >= 20
    assert [e.name for e in race.entries] == [UNTUNED, TUNED, ONNXRUNTIME]
    for entry in race.entries:
        assert entry.error is None, entry
        assert len(entry.round_secs) == 2 and entry.fastest_secs > 0
        if entry.name != ONNXRUNTIME:
            assert entry.max_error is not None and entry.max_error <= MAX_ERROR
    assert race.entry(ONNXRUNTIME).max_error is None  # the reference, never compared with itself
    # the tuned convolution is ~50x faster than its default lowering, which is ~98% of the
    # untuned network's time: the tuned network must be faster than the untuned one
    assert race.entry(TUNED).fastest_secs < race.entry(UNTUNED).fastest_secs
    env = race.environment
    assert env["num_threads"] == model.target.num_cores and env["onnxruntime_version"]
    assert env["tasks_scheduled"] >= 1
    # the machine after each round: the peak's FMA kernel (beside the kept peak) and a kernel
    # that only starts and joins the threads
    assert len(env["probe_gflops"]) == 2 and all(r > 0 for r in env["probe_gflops"])
    assert len(env["forkjoin_us"]) == 2 and all(0 < j < 1e4 for j in env["forkjoin_us"])
    kept = cached_peak(model.target)
    assert env["peak_gflops"] == (None if kept is None else round(kept.gflops_f32, 1))
    speed = machine_speed(race)
    assert speed.fma_gflops == max(env["probe_gflops"])
    assert speed.forkjoin_us == min(env["forkjoin_us"])
    assert f"(FMA probe, fastest round: {speed.fma_gflops:.0f} GFLOPS)" in speed_text(race)
    assert "when free" in speed_text(race)  # a core's speed, not how many were free
    with get_store(db, read_only=True) as store:
        chosen = best_schedules(model, store, tune=tune)
    # a task whose tuned best is no faster than its default is built with its default
    assert env["tasks_scheduled"] == sum(not untuned_kept(model.task(n), t) for n, t in chosen)
    # the report shows the model: its race's table and both plots
    with get_store(db, read_only=True) as store:
        info = collect_report(store)
    (shown,) = info.models
    assert shown.model == model and shown.latest == race
    assert shown.times.tasks[0].tuned_ms is not None  # the tuned tasks have a best
    page = render_report(info)
    assert f"<h2>Model {model.name}</h2>" in page and f"Race {race.id} against ONNX" in page
    assert "se-model-tasks" in page and "se-model-races" in page
    # in the units the command line and the Model tab use (a new user read "0.05356 ms" here
    # beside "53.6 µs" there)
    for entry in race.entries:
        assert f"<td>{entry.name}</td><td>{format_secs(entry.fastest_secs)}</td>" in page


def _race(race_id: int, fma: list[float], joins: list[float], peak: float | None) -> ModelRace:
    env = {"probe_gflops": fma, "forkjoin_us": joins, "peak_gflops": peak,
           "cpu_model": "AMD EPYC", "num_threads": 2}  # fmt: skip
    return ModelRace(race_id, 1, None, 10, (), env, 0.0)


def test_a_race_timed_while_the_machine_ran_slow_says_so():
    """A new user's back-to-back races of one tune read the times 1.3-1.8x apart. Here, with
    no other process running, the tiny network's 2-thread build read 105 to 186 µs from race to
    race, steady within each, its 1-thread build and the FMA kernel's rate unchanged; a kernel
    that only starts and joins the threads read 0.54-1.09 µs in a quick phase and 1.24-1.40 µs
    in a slow one. The probes say when a race ran in such a slow phase."""
    quick = _race(1, [236.0, 235.0], [0.61, 0.55], 235.0)
    slow_join = _race(2, [236.0], [1.22, 1.21], 235.0)
    a_bit_slower = _race(3, [235.0], [0.92], 235.0)  # within a quick phase's readings
    slow_clock = _race(4, [150.0, 160.0], [0.6], 235.0)
    races = [quick, slow_join, a_bit_slower, slow_clock]
    assert speed_note(quick, races) is None and speed_note(a_bit_slower, races) is None
    note = speed_note(slow_join, races)
    assert note and "2.2x as long" in note and "1.21 against 0.55 µs" in note
    note = speed_note(slow_clock, races)
    assert note and "0.68 of its peak" in note and "160 of 235 GFLOPS" in note
    assert speed_note(slow_join) is None  # alone: nothing to compare its threads with
    other_cpu = dataclasses.replace(quick, environment={**quick.environment, "cpu_model": "Intel"})
    assert speed_note(slow_join, [other_cpu, slow_join]) is None  # another machine's race
    assert "no peak kept" in speed_text(_race(5, [236.0], [0.6], None))
    older = ModelRace(6, 1, None, 10, (), {}, 0.0)  # raced before races had probes
    assert machine_speed(older) is None and speed_note(older, races) is None
    assert speed_text(older) == ""


def test_a_tuned_task_no_faster_than_untuned_keeps_its_default_in_the_build_and_the_sums(tuned):
    """A new user's Model tab listed a task's best slower than untuned, and "now" counted it:
    the best was a median beside the import's fastest repeat, and the race built it anyway."""
    db, model, tune = tuned
    with get_store(db, read_only=True) as store:
        name, trial = best_schedules(model, store, tune=tune)[0]
    fastest, task = trial.result.fastest_secs, model.task(name)
    assert not untuned_kept(dataclasses.replace(task, untuned_secs=fastest * 2), trial)
    assert untuned_kept(dataclasses.replace(task, untuned_secs=fastest), trial)  # no faster
    assert not untuned_kept(dataclasses.replace(task, untuned_secs=None), trial)  # unknown
    slow, fast = model.tasks[0], model.tasks[1]
    assert slow.untuned_secs and fast.untuned_secs
    info = model_times_info(
        model, {slow.name: slow.untuned_secs * 3, fast.name: fast.untuned_secs / 4}
    )
    by_name = {t.name: t for t in info.tasks}
    kept, better = by_name[slow.name], by_name[fast.name]
    assert kept.untuned_kept and kept.best_ms == kept.untuned_ms < kept.tuned_ms
    assert not better.untuned_kept and better.best_ms == better.tuned_ms < better.untuned_ms
    assert info.tuned_ms == pytest.approx(info.untuned_ms - better.untuned_ms + better.tuned_ms)


def test_a_task_s_best_is_ranked_among_its_trials_timed_as_the_network_runs_it(tmp_path):
    """Timed warm, a schedule reads faster than with its weights flushed, so a database holding
    both (a task tuned warm, then under its own protocol) would always build a warm one: the
    trials under the task's own protocol rank first, and without any, every trial does. An
    untuned time taken under another protocol is not compared with a tuned one."""
    task, target = get_workload("task"), Target.local_cpu()
    untuned = ModelTask("add", task, 1, task.flops(), 1e-3, untuned_flush=CacheFlush.ARGUMENTS)
    cand = baseline_candidate(task, target)

    def trial(secs: float, flush: CacheFlush) -> NewTrial:
        return NewTrial(
            cand, MeasureResult(MeasureStatus.OK, (secs,), flops=task.flops(), cache_flush=flush)
        )

    with get_store(tmp_path / "records.db") as store:
        model = store.add_model(
            ModelRecord(0, "net", "a" * 64, (), (untuned,), target, 1.0), b"onnx bytes"
        )
        run = store.create_run(task, target, "manual")
        (warm,) = store.add_trials(run.id, [trial(1e-4, CacheFlush.NONE)])
        assert [t.id for _, t in best_schedules(model, store)] == [warm.id]  # all there is
        (flushed,) = store.add_trials(run.id, [trial(5e-4, CacheFlush.ARGUMENTS)])
        assert [t.id for _, t in best_schedules(model, store)] == [flushed.id]
    slower = trial(2e-3, CacheFlush.ARGUMENTS)
    assert untuned_kept(untuned, dataclasses.replace(flushed, result=slower.result))
    warm_slower = trial(2e-3, CacheFlush.NONE)
    assert not untuned_kept(untuned, dataclasses.replace(flushed, result=warm_slower.result))


def test_a_damaged_stored_model_is_one_sentence_and_no_race(tuned, tmp_path):
    db, model, _ = tuned
    copy = tmp_path / "copy.db"
    with sqlite3.connect(db) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE models SET source = ? WHERE id = ?", (b"not onnx", model.id))
    with get_store(copy) as store:
        before = store.model_races(model.id)
        with pytest.raises(ModelError, match="is not an ONNX model") as info:
            race_model(model, store, rounds=1)
        assert "\n" not in str(info.value)
        assert store.model_races(model.id) == before


def test_a_race_stored_before_reads_onnx_runtime_without_an_error_against_itself():
    """Races stored before 2026-12-03 compared ONNX Runtime's output with itself (0.0), which
    the CLI, the Model tab and notebook 07 printed as "0 from ONNX Runtime"."""
    stored = {"name": ONNXRUNTIME, "round_secs": [8e-5], "max_error": 0.0, "error": None}
    assert RaceEntry.from_json(stored).max_error is None
    tuned = {"name": "tuned", "round_secs": [1e-4], "max_error": 3e-7, "error": None}
    assert RaceEntry.from_json(tuned).max_error == 3e-7


def test_relative_error_compares_shapes_and_scales_by_the_largest_value():
    ref = [np.array([[1.0, -4.0], [2.0, 0.5]], dtype=np.float32)]
    assert _relative_error([ref[0].copy()], ref) == 0.0
    off = ref[0].copy()
    off[1, 1] += 0.004
    assert _relative_error([off], ref) == pytest.approx(1e-3, rel=1e-3)
    assert _relative_error([ref[0].T.copy()[:1]], ref) == float("inf")
    assert _relative_error([], ref) == float("inf")


# TVM's own tune_relax (MetaSchedule's evolutionary search, XGBoost, its builders) took 192 s
# in a quiet CI run and more than the default 600 s in a CI run beside two CPU burners and
# another test process (2026-11-28, AMD EPYC, 2 cores): real work that slows with the machine.
# (112 s of it went to importing every backend's tensor intrinsics; 68 s since they are
# registered as for tune_tir, beside another test file.)
@pytest.mark.timeout(1800)
def test_tvms_own_tune_relax_races_at_equal_trials(tuned):
    """TVM's tune_relax tunes the network with a budget of its own (here 10 trials: a first
    round of 4 for the first tasks), in the race's child process; its build is checked and
    timed like the others."""
    db, model, tune = tuned
    with get_store(db) as store:
        race = race_model(model, store, tune=tune, rounds=1, untuned=False, tune_relax_trials=10)
    assert [e.name for e in race.entries] == [TUNED, TUNE_RELAX, ONNXRUNTIME]
    relax = race.entry(TUNE_RELAX)
    assert relax.error is None and relax.max_error <= MAX_ERROR and relax.fastest_secs > 0
