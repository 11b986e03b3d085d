"""Export to and import from MetaSchedule's JSONDatabase."""

from __future__ import annotations

import dataclasses
import json

import pytest

from explorer import _tvm
from explorer.errors import StoreError
from explorer.storage import (
    ImportSummary,
    SQLiteStore,
    export_metaschedule,
    import_metaschedule,
)
from explorer.storage._metaschedule import RECORD_FILE, SIDECAR_FILE
from explorer.types import MeasureStatus

ms = _tvm.ms


def _sampled_trace(workload):
    """A trace with a sampling decision, reorder, parallel and vectorize, not just a split."""
    sch = _tvm.Schedule(workload.mod(), seed=3)
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
    i0, i1 = sch.split(i, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    return _tvm.trace_to_json(sch.trace)


def _replayed(workload, trace_json):
    sch = _tvm.Schedule(workload.mod())
    _tvm.apply_trace_json(trace_json, sch)
    return sch.mod


@pytest.fixture
def source(workload, other_workload, target, make_trial):
    store = SQLiteStore(":memory:")
    run = store.create_run(workload, target, "random")
    trials = [
        make_trial(workload, target, (3e-3, 3.5e-3), trace=0),
        make_trial(workload, target, (1e-3,), trace=1),
        make_trial(workload, target, None, status=MeasureStatus.BUILD_ERROR, trace=2),
        make_trial(workload, target, (4e-3, 4e-3, 4.25e-3), trace=2),
        make_trial(workload, target, (1.0 / 3 * 1e-3,), status=MeasureStatus.WRONG_RESULT),
        make_trial(workload, target, (2e-3,), trace=3),
    ]
    sampled = make_trial(workload, target, (1.5e-3,))
    cand = dataclasses.replace(sampled.candidate, trace=_sampled_trace(workload))
    trials.append(dataclasses.replace(sampled, candidate=cand))
    store.add_trials(run.id, trials)
    other = store.create_run(other_workload, target, "grid")
    store.add_trials(other.id, [make_trial(other_workload, target, 5e-4, trace=t) for t in (0, 1)])
    yield store, run, other
    store.close()


def test_round_trip_keeps_traces_timings_and_commit_order(source, workload, target, tmp_path):
    store, run, _ = source
    work_dir = tmp_path / "ms"
    assert export_metaschedule(store, work_dir, run_id=run.id) == 5  # failures skipped
    database = ms.database.JSONDatabase(work_dir=str(work_dir))
    assert len(database) == 5
    fastest = database.get_top_k(database.commit_workload(workload.mod()), 1)[0]
    assert float(fastest.run_secs[0]) == 1e-3

    fresh = SQLiteStore(":memory:")
    summary = import_metaschedule(fresh, work_dir, workloads=[workload])
    assert summary == ImportSummary(run_ids=(1,), imported=5, unmatched=0, failed=0)
    imported_run = fresh.get_run(1)
    assert imported_run.strategy == "metaschedule-import" and imported_run.status == "finished"
    assert imported_run.settings == {"work_dir": str(work_dir.resolve())}
    assert imported_run.workload == workload and imported_run.target == target

    originals = [t for t in store.trials(run_id=run.id) if t.status is MeasureStatus.OK]
    imported = fresh.trials(run_id=1)
    assert [t.seq for t in imported] == list(range(5))  # commit order, not latency order
    for orig, new in zip(originals, imported, strict=True):
        assert new.result.run_secs == orig.result.run_secs  # bit-exact, every repeat
        # MetaSchedule's records carry no NumPy check: unchecked, never ranked as best.
        assert new.status is MeasureStatus.UNCHECKED and new.result.flops == workload.flops()
        assert _tvm.tvm_ffi.structural_equal(
            _replayed(workload, new.candidate.trace), _replayed(workload, orig.candidate.trace)
        )
    fresh.close()


def test_failures_can_be_exported_as_metaschedule_does(source, workload, tmp_path):
    store, run, _ = source
    work_dir = tmp_path / "ms"
    assert export_metaschedule(store, work_dir, run_id=run.id, include_failed=True) == 7
    lines = [json.loads(x) for x in (work_dir / RECORD_FILE).read_text().splitlines()]
    assert [run_secs for _, (_, run_secs, *_) in lines].count([1e10]) == 2
    fresh = SQLiteStore(":memory:")
    summary = import_metaschedule(fresh, work_dir, workloads=[workload])
    assert summary.imported == 7 and summary.failed == 0
    statuses = [t.status for t in fresh.trials()]
    assert statuses.count(MeasureStatus.RUN_ERROR) == 2
    assert all("1e10" in t.result.error_msg for t in fresh.trials(status=MeasureStatus.RUN_ERROR))


def test_unmatched_workloads_are_counted_not_dropped(source, workload, other_workload, tmp_path):
    store, _, other = source
    work_dir = tmp_path / "ms"
    assert export_metaschedule(store, work_dir) == 7
    (work_dir / SIDECAR_FILE).unlink()  # a plain MetaSchedule work_dir: no descriptions
    fresh = SQLiteStore(":memory:")
    summary = import_metaschedule(fresh, work_dir, workloads=[workload])
    assert (summary.imported, summary.unmatched, summary.failed) == (5, 2, 0)
    # The workloads of runs already in the store are candidates too; what is already there is
    # not stored twice.
    fresh.create_run(other_workload, other.target, "manual")
    again = import_metaschedule(fresh, work_dir)
    assert (again.imported, again.unmatched, again.duplicates) == (2, 0, 5)
    assert [fresh.get_run(r).workload for r in again.run_ids] == [other_workload]


def test_unreadable_lines_are_counted_and_the_rest_imported(source, workload, tmp_path):
    store, run, _ = source
    work_dir = tmp_path / "ms"
    export_metaschedule(store, work_dir, run_id=run.id)
    with open(work_dir / RECORD_FILE, "a") as fh:
        fh.write('[0, [[["GetSBlock", [], ["C", "ma')  # a record cut short by a kill
    summary = import_metaschedule(SQLiteStore(":memory:"), work_dir, workloads=[workload])
    assert (summary.imported, summary.unmatched, summary.failed) == (5, 0, 1)


def test_a_directory_without_a_database_is_refused(tmp_path):
    with pytest.raises(StoreError, match="not a MetaSchedule JSON database"):
        import_metaschedule(SQLiteStore(":memory:"), tmp_path)


@pytest.mark.slow
def test_a_real_tune_tir_database_imports(workload, target, tmp_path):
    _tvm.ensure_cpu_intrinsics()
    work_dir = tmp_path / "tune"
    with _tvm.metaschedule_logging_guard():
        ms.tune_tir(
            mod=workload.mod(),
            target=target.to_tvm(),
            work_dir=str(work_dir),
            max_trials_global=8,
            num_trials_per_iter=8,
            builder=ms.builder.LocalBuilder(
                f_build=_tvm.fast_build, max_workers=2, timeout_sec=60
            ),
            runner=ms.runner.LocalRunner(
                timeout_sec=10,
                evaluator_config=ms.runner.EvaluatorConfig(
                    number=3, repeat=1, min_repeat_ms=10, enable_cpu_cache_flush=False
                ),
            ),
            num_tuning_cores=2,
            seed=0,
        )
    lines = [json.loads(x) for x in (work_dir / RECORD_FILE).read_text().splitlines()]
    store = SQLiteStore(tmp_path / "records.db")
    summary = import_metaschedule(store, work_dir, workloads=[workload])
    assert summary.unmatched == 0 and summary.failed == 0
    assert summary.imported == len(lines) > 0
    trials = store.trials(run_id=summary.run_ids[0])
    assert trials[0].candidate.target == target
    assert any(t.status is MeasureStatus.UNCHECKED for t in trials)  # timed, never checked
    assert store.best(workload, target) == []
    # Same order and timings as the file (failures are MetaSchedule's 1e10 sentinel).
    for trial, (_, record) in zip(trials, lines, strict=True):
        if trial.status is MeasureStatus.UNCHECKED:
            assert list(trial.result.run_secs) == pytest.approx(record[1], rel=1e-15)
        else:
            assert record[1] == [1e10] or record[1] == [pytest.approx(1e10)]
    # Every imported trace replays on the workload.
    for trial in trials:
        _replayed(workload, trial.candidate.trace)
    store.close()
