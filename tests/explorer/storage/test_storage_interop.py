"""MetaSchedule interop that round-trips, and unchecked timings that are never the best until our
measurer has checked them. Real TVM, real SQLite files, real measurements, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from explorer import _tvm
from explorer.analysis import TrialTable
from explorer.measure import Candidate, LocalMeasurer, MeasureConfig, MeasureResult
from explorer.storage import (
    NewTrial,
    SQLiteStore,
    check_unchecked,
    export_metaschedule,
    import_metaschedule,
)
from explorer.storage._metaschedule import RECORD_FILE, SIDECAR_FILE
from explorer.testing import hooks
from explorer.types import MeasureStatus
from explorer.workloads import get_workload
from widgets.cost import latency_html

ROOT = Path(__file__).resolve().parents[3]
SMALL = ["matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16"]
QUICK = MeasureConfig(repeat=2, min_repeat_secs=0.001)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "explorer", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=env)  # fmt: skip


def _signature(store):
    """What must survive a round trip: per run, each trial's schedule and timings, in order."""
    out = []
    for run in store.runs():
        trials = store.trials(run_id=run.id)
        out.append(
            (run.workload, run.target, [(t.candidate.trace, t.result.run_secs) for t in trials])
        )
    return out


@pytest.fixture
def source(tmp_path, workload, other_workload, target, other_target, make_trial):
    store = SQLiteStore(tmp_path / "source.db")
    run = store.create_run(workload, target, "random")
    store.add_trials(run.id, [make_trial(workload, target, (1e-3 * (t + 1), 2e-3), trace=t)
                              for t in range(4)])  # fmt: skip
    other = store.create_run(other_workload, other_target, "grid")
    store.add_trials(other.id, [make_trial(other_workload, other_target, 5e-4, trace=t)
                                for t in (0, 1)])  # fmt: skip
    yield store
    store.close()


def test_export_then_import_into_an_empty_database_restores_every_record(source, tmp_path):
    work_dir = tmp_path / "ms"
    assert export_metaschedule(source, work_dir) == 6
    sidecar = json.loads((work_dir / SIDECAR_FILE).read_text())
    assert len(sidecar["workloads"]) == 2 and len(sidecar["targets"]) == 2

    with SQLiteStore(tmp_path / "fresh.db") as fresh:  # knows no workload at all
        summary = import_metaschedule(fresh, work_dir)
        assert (summary.imported, summary.unmatched, summary.failed) == (6, 0, 0)
        restored = _signature(fresh)
    originals = _signature(source)
    # The same workloads and targets (our descriptions, not re-derived ones), and per run the
    # same schedules with bit-exact timings, in order.
    assert [(w, t) for w, t, _ in restored] == [(w, t) for w, t, _ in originals]
    for (workload, _, got), (_, _, want) in zip(restored, originals, strict=True):
        assert [secs for _, secs in got] == [secs for _, secs in want]
        for (trace, _), (orig, _) in zip(got, want, strict=True):
            assert _tvm.tvm_ffi.structural_equal(
                _replayed(workload, trace), _replayed(workload, orig)
            )


def _replayed(workload, trace):
    sch = _tvm.Schedule(workload.mod())
    _tvm.apply_trace_json(trace, sch)
    return sch.mod


def test_a_plain_work_dir_of_a_catalog_shape_imports_into_an_empty_database(tmp_path, target):
    preset = get_workload("resnet18_c3")
    with SQLiteStore(tmp_path / "seed.db") as seed:
        run = seed.create_run(preset, target, "random")
        trace = _tvm.trace_to_json(_tvm.Schedule(preset.mod()).trace)
        result = MeasureResult(MeasureStatus.OK, (2e-3,), flops=preset.flops())
        seed.add_trials(run.id, [NewTrial(Candidate(preset, target, trace), result)])
        export_metaschedule(seed, tmp_path / "ms")
    (tmp_path / "ms" / SIDECAR_FILE).unlink()  # as tune_tir leaves it: TIR only
    with SQLiteStore(tmp_path / "fresh.db") as fresh:
        summary = import_metaschedule(fresh, tmp_path / "ms")
        assert (summary.imported, summary.unmatched) == (1, 0)
        assert fresh.get_run(summary.run_ids[0]).workload == preset


def test_importing_twice_adds_nothing_and_exporting_twice_does_not_duplicate(source, tmp_path):
    work_dir = tmp_path / "ms"
    assert export_metaschedule(source, work_dir) == 6
    lines = (work_dir / RECORD_FILE).read_text()
    assert export_metaschedule(source, work_dir) == 0  # the same records are already there
    assert (work_dir / RECORD_FILE).read_text() == lines
    with SQLiteStore(tmp_path / "fresh.db") as fresh:
        first = import_metaschedule(fresh, work_dir)
        second = import_metaschedule(fresh, work_dir)
        assert (first.imported, first.duplicates) == (6, 0)
        assert (second.imported, second.duplicates, second.run_ids) == (0, 6, ())
        assert fresh.count_trials() == 6 and len(fresh.runs()) == 2
        # And back again: the imported (unchecked) records export to the same records.
        again = tmp_path / "again"
        assert export_metaschedule(fresh, again) == 6
        assert export_metaschedule(fresh, work_dir) == 0


def test_the_cli_round_trip_into_an_empty_database(source, tmp_path):
    db, fresh, work_dir = Path(source.path), tmp_path / "fresh.db", tmp_path / "ms"
    source.close()
    out = _cli("export", "--format", "metaschedule", str(work_dir), "--db", str(db))
    assert out.returncode == 0, out.stderr
    out = _cli("import", str(work_dir), "--db", str(fresh))
    assert out.returncode == 0, out.stderr
    assert "imported 6 records" in out.stdout and "0 with an unknown workload" in out.stdout
    again = _cli("import", str(work_dir), "--db", str(fresh))
    assert again.returncode == 0, again.stderr
    assert "imported 0 records" in again.stdout and "6 already in the database" in again.stdout
    with SQLiteStore(fresh, read_only=True) as store:
        assert store.count_trials() == 6
        assert {t.status for t in store.trials()} == {MeasureStatus.UNCHECKED}


# -- unchecked until checked -------------------------------------------------------------------
def _matmul_trace(workload, tile):
    sch = _tvm.Schedule(workload.mod())
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    sch.split(j, [None, tile])
    return _tvm.trace_to_json(sch.trace)


def test_unchecked_timings_are_never_best_until_checked(tmp_path, workload, target):
    """An imported kernel that computes the wrong thing is fast on paper; only the check tells."""
    with hooks.registered():
        wrong = hooks.hook_workload("wrong")  # runs fine, but disagrees with its NumPy reference
        good = workload
        # Step 1. A MetaSchedule database recording both (as a MetaSchedule run would).
        seed = SQLiteStore(tmp_path / "seed.db")
        for w, secs in ((wrong, 1e-7), (good, 2e-6)):
            run = seed.create_run(w, target, "random")
            cand = Candidate(w, target, _tvm.trace_to_json(_tvm.Schedule(w.mod()).trace))
            seed.add_trials(run.id, [NewTrial(cand, MeasureResult(
                MeasureStatus.OK, run_secs=(secs,), flops=w.flops()))])  # fmt: skip
        work_dir = tmp_path / "ms"
        assert export_metaschedule(seed, work_dir) == 2
        seed.close()

        # Step 2. Imported: unchecked, and not the best of anything.
        store = SQLiteStore(tmp_path / "records.db")
        summary = import_metaschedule(store, work_dir)
        assert summary.imported == 2
        assert {t.status for t in store.trials()} == {MeasureStatus.UNCHECKED}
        assert all("not checked against NumPy" in t.result.error_msg for t in store.trials())
        assert store.best(wrong, target) == [] and store.best(good, target) == []
        for run_id in summary.run_ids:
            assert store.best_so_far(run_id).best_secs == (float("inf"),)
        table = TrialTable.from_rows(store.trial_rows())  # what the dashboards read
        assert not table.is_ok.any() and (table.num_unchecked, table.num_failed) == (2, 0)
        assert "never checked against NumPy" in latency_html(store.trials()[0].result)

        # Step 3. "Check these": our measurer re-measures them, output vs NumPy.
        with LocalMeasurer(QUICK) as measurer:
            checked = check_unchecked(store, measurer)
            assert (checked.checked, checked.ok, checked.failed) == (2, 1, 1)
            assert len(checked.run_ids) == 2
            again = check_unchecked(store, measurer)  # nothing left to check
        assert (again.checked, again.already_checked, again.run_ids) == (0, 2, ())
        check_runs = [store.get_run(r) for r in checked.run_ids]
        assert {r.strategy for r in check_runs} == {"check"}
        assert all(r.status == "finished" for r in check_runs)
        (wrong_check,) = store.trials(workload=wrong, status=MeasureStatus.WRONG_RESULT)
        assert wrong_check.run_id in checked.run_ids
        assert store.best(wrong, target) == []  # found wrong: never the best
        (best,) = store.best(good, target)
        assert best.status is MeasureStatus.OK and best.run_id in checked.run_ids
        table = TrialTable.from_rows(store.trial_rows())
        assert (table.num_unchecked, table.num_failed, int(table.is_ok.sum())) == (2, 1, 1)

        # Step 4. A schedule we found wrong is not exported as valid any more.
        assert export_metaschedule(store, tmp_path / "out", workload=wrong) == 0
        store.close()


def test_check_by_run_and_from_the_cli(tmp_path, workload, target):
    db = tmp_path / "records.db"
    with SQLiteStore(db) as store:
        runs = []
        for tile in (4, 8):
            run = store.create_run(workload, target, "metaschedule")
            cand = Candidate(workload, target, _matmul_trace(workload, tile))
            result = MeasureResult(
                MeasureStatus.UNCHECKED, (1e-5,), "timed by MetaSchedule", flops=workload.flops()
            )
            store.add_trials(run.id, [NewTrial(cand, result), NewTrial(cand, result)])
            runs.append(run.id)
        with pytest.raises(KeyError):
            check_unchecked(store, LocalMeasurer(QUICK), run_id=999)
    out = _cli("check", "--run", str(runs[0]), "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert "checked 1 schedule against NumPy" in out.stdout and "1 ok, 0 not ok" in out.stdout
    out = _cli("check", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert "checked 1 schedule" in out.stdout  # only the other run's schedule was left
    out = _cli("check", "--db", str(db))
    assert out.returncode == 0 and "nothing to check" in out.stdout
    out = _cli("check", "--run", "999", "--db", str(db))
    assert out.returncode == 2 and out.stderr.count("error:") == 1 and "999" in out.stderr
    with SQLiteStore(db, read_only=True) as store:
        ok = store.trials(status=MeasureStatus.OK)
        assert len(ok) == 2 and store.best(workload, target)[0].id in {t.id for t in ok}
