"""The RecordStore contract, run against an SQLite file and an in-memory SQLite store."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import sqlite3
import threading

import pytest

from explorer.errors import StoreError
from explorer.storage import (
    SQLiteStore,
    default_store_path,
    environment,
    get_store,
)
from explorer.types import MeasureStatus

OK, BUILD_ERROR = MeasureStatus.OK, MeasureStatus.BUILD_ERROR


# -- runs ---------------------------------------------------------------------------------------
def test_create_run_round_trips_and_filters(store, workload, other_workload, target, other_target):
    a = store.create_run(workload, target, "random", settings={"seed": 1, "max_trials": 8})
    b = store.create_run(other_workload, target, "manual")
    c = store.create_run(workload, other_target, "random", environment={"note": "x"})
    assert a.status == "running" and a.ended_at is None and a.id < b.id < c.id
    assert a.settings == {"seed": 1, "max_trials": 8}
    assert a.environment["tvm_version"] and c.environment == {"note": "x"}
    assert store.get_run(a.id) == a
    assert store.runs() == [a, b, c]
    assert store.runs(workload=workload) == [a, c]
    assert store.runs(target=target) == [a, b]
    assert store.runs(strategy="random", target=other_target) == [c]
    assert store.runs(strategy="nope") == []


def test_finish_run_sets_only_end_and_status(store, workload, target):
    run = store.create_run(workload, target, "random")
    done = store.finish_run(run.id, "cancelled")
    assert done.status == "cancelled" and done.ended_at >= run.started_at
    assert dataclasses.replace(done, ended_at=None, status="running") == run
    resumed = store.finish_run(run.id)  # a resumed run ends again: only end and status change
    assert resumed.status == "finished" and resumed.ended_at >= done.ended_at
    assert dataclasses.replace(resumed, ended_at=None, status="running") == run
    with pytest.raises(ValueError, match="must be one of"):
        store.finish_run(store.create_run(workload, target, "x").id, "exploded")
    with pytest.raises(KeyError):
        store.finish_run(999)


def test_unknown_ids_raise_key_error(store, workload, target, make_trial):
    with pytest.raises(KeyError):
        store.get_run(42)
    with pytest.raises(KeyError):
        store.get_trial(42)
    with pytest.raises(KeyError):
        store.add_trials(42, [make_trial(workload, target)])
    with pytest.raises(KeyError):
        store.best_so_far(42)


# -- trials -------------------------------------------------------------------------------------
def test_add_trials_returns_what_later_queries_return(store, workload, target, make_trial):
    run = store.create_run(workload, target, "random")
    batch = [
        make_trial(workload, target, (3e-3, 1e-3, 2e-3), trace=1, predicted={"xgb": 0.7},
                   decisions={"tile": [8, 8]}, build_secs=0.25, num_threads=2),
        make_trial(workload, target, None, status=BUILD_ERROR),
    ]  # fmt: skip
    records = store.add_trials(run.id, batch)
    assert [r.seq for r in records] == [0, 1] and [r.run_id for r in records] == [run.id] * 2
    first = records[0]
    assert first.candidate == batch[0].candidate and first.result == batch[0].result
    assert first.median_secs == 2e-3 and first.predicted == {"xgb": 0.7}
    assert first.result.gflops == pytest.approx(workload.flops() / 2e-3 / 1e9)
    assert records[1].status is BUILD_ERROR and records[1].result.error_msg
    assert store.trials(run_id=run.id) == records
    assert [store.get_trial(r.id) for r in records] == records


def test_returned_records_are_immutable_snapshots(store, workload, target, make_trial):
    run = store.create_run(workload, target, "random")
    (record,) = store.add_trials(run.id, [make_trial(workload, target, predicted={"m": 1.0})])
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.seq = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.result.run_secs = ()  # type: ignore[misc]
    # Mutating nested JSON of a returned record changes that copy only.
    record.candidate.trace[0].clear()
    record.predicted["m"] = 99.0
    again = store.get_trial(record.id)
    assert again.candidate.trace[0] and again.predicted == {"m": 1.0}
    again.candidate.trace.clear()
    assert store.trials(run_id=run.id)[0].candidate.trace


def test_ids_increase_and_seq_counts_per_run(store, workload, other_workload, target, make_trial):
    a = store.create_run(workload, target, "random")
    b = store.create_run(other_workload, target, "random")
    ids = []
    for i in range(5):  # interleaved batches of different sizes
        ids += [r.id for r in store.add_trials(a.id, [make_trial(workload, target)] * (i + 1))]
        ids += [r.id for r in store.add_trials(b.id, [make_trial(other_workload, target)] * 2)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [t.seq for t in store.trials(run_id=a.id)] == list(range(15))
    assert [t.seq for t in store.trials(run_id=b.id)] == list(range(10))
    assert [t.id for t in store.trials()] == ids
    assert store.count_trials() == 25 and store.count_trials(run_id=b.id) == 10


def test_a_batch_is_validated_before_anything_is_stored(
    store, workload, other_workload, target, other_target, make_trial
):
    run = store.create_run(workload, target, "random")
    good = make_trial(workload, target)
    with pytest.raises(ValueError, match="workload"):
        store.add_trials(run.id, [good, make_trial(other_workload, target)])
    with pytest.raises(ValueError, match="target"):
        store.add_trials(run.id, [good, make_trial(workload, other_target)])
    bad_json = dataclasses.replace(good, predicted={"m": "fast"})
    with pytest.raises(ValueError, match="predictions"):
        store.add_trials(run.id, [good, bad_json])
    assert store.count_trials() == 0
    assert store.add_trials(run.id, []) == []


def test_a_target_with_the_runs_key_is_stored_with_the_runs_target(
    store, workload, target, make_trial
):
    run = store.create_run(workload, target, "random")
    renamed = dataclasses.replace(target, name="same CPU, other label", l3_bytes=1)
    assert renamed.key() == target.key()
    (record,) = store.add_trials(run.id, [make_trial(workload, renamed)])
    assert record.candidate.target == target  # the run's, as every later query returns it
    assert store.get_trial(record.id) == record


def test_trials_filters_and_limit(
    store, workload, other_workload, target, other_target, make_trial
):
    r1 = store.create_run(workload, target, "random")
    r2 = store.create_run(other_workload, other_target, "grid")
    store.add_trials(
        r1.id,
        [make_trial(workload, target), make_trial(workload, target, None, status=BUILD_ERROR)],
    )
    store.add_trials(r2.id, [make_trial(other_workload, other_target)] * 3)
    assert len(store.trials()) == 5
    assert len(store.trials(workload=workload)) == 2
    assert len(store.trials(target=other_target)) == 3
    assert len(store.trials(workload=workload, target=other_target)) == 0
    assert [t.status for t in store.trials(status=BUILD_ERROR)] == [BUILD_ERROR]
    assert len(store.trials(status=OK, run_id=r2.id)) == 3
    assert [t.seq for t in store.trials(run_id=r2.id, limit=2)] == [0, 1]
    assert store.trials(limit=0) == []
    with pytest.raises(ValueError):
        store.trials(limit=-1)


def test_best_ranks_successes_only(store, workload, other_workload, target, other_target,
                                   make_trial):  # fmt: skip
    r1 = store.create_run(workload, target, "random")
    r2 = store.create_run(workload, target, "grid")
    store.add_trials(r1.id, [
        make_trial(workload, target, 5e-3),
        make_trial(workload, target, 1e-6, status=MeasureStatus.WRONG_RESULT),
        make_trial(workload, target, 3e-3),
    ])  # fmt: skip
    store.add_trials(
        r2.id,
        [
            make_trial(workload, target, 4e-3),
            make_trial(workload, target, None, status=BUILD_ERROR),
        ],
    )
    other = store.create_run(other_workload, other_target, "grid")
    store.add_trials(other.id, [make_trial(other_workload, other_target, 1e-9)])
    best = store.best(workload, target, k=10)
    assert [b.median_secs for b in best] == [3e-3, 4e-3, 5e-3]  # across runs, fastest first
    assert [b.median_secs for b in store.best(workload, target)] == [3e-3]
    assert store.best(workload, other_target) == [] and store.best(workload, target, k=0) == []


def test_best_so_far_counts_failures_as_inf(store, workload, target, make_trial):
    run = store.create_run(workload, target, "random")
    secs = [None, 4e-3, None, 5e-3, 2e-3, 3e-3]
    store.add_trials(run.id, [
        make_trial(workload, target, s, status=OK if s else BUILD_ERROR) for s in secs[:3]
    ])  # fmt: skip
    store.add_trials(run.id, [make_trial(workload, target, s) for s in secs[3:]])
    curve = store.best_so_far(run.id)
    assert curve.run_id == run.id and curve.seq == tuple(range(6))
    assert curve.best_secs == (math.inf, 4e-3, 4e-3, 4e-3, 2e-3, 2e-3)
    assert all(e >= 0 for e in curve.elapsed_secs)
    assert list(curve.elapsed_secs) == sorted(curve.elapsed_secs)
    empty = store.create_run(workload, target, "random")
    assert store.best_so_far(empty.id).best_secs == ()


# -- append-only and events ---------------------------------------------------------------------
def test_the_database_refuses_to_rewrite_history(tmp_path, workload, target, make_trial):
    path = tmp_path / "records.db"
    with SQLiteStore(path) as store:
        run = store.create_run(workload, target, "random")
        store.add_trials(run.id, [make_trial(workload, target)])
    conn = sqlite3.connect(path)
    for sql in (
        "UPDATE trials SET median_secs = 0",
        "DELETE FROM trials",
        "DELETE FROM runs",
        "UPDATE runs SET strategy = 'other'",
    ):
        with pytest.raises(sqlite3.IntegrityError, match="append-only|may change"):
            conn.execute(sql)
    conn.execute("UPDATE runs SET status = 'failed'")  # the one allowed update
    conn.close()


def test_subscribers_see_committed_batches_until_unsubscribed(store, workload, target, make_trial):
    run = store.create_run(workload, target, "random")
    seen, counts = [], []

    def on_batch(records):
        seen.append([r.id for r in records])
        counts.append(store.count_trials())  # already committed when we are called

    unsubscribe = store.subscribe(on_batch)
    first = store.add_trials(run.id, [make_trial(workload, target)] * 2)
    store.add_trials(run.id, [])  # nothing committed, nothing to announce
    assert seen == [[r.id for r in first]] and counts == [2]
    unsubscribe()
    unsubscribe()  # idempotent
    store.add_trials(run.id, [make_trial(workload, target)])
    assert len(seen) == 1
    with pytest.raises(TypeError):
        store.subscribe("not callable")  # type: ignore[arg-type]


def test_a_failing_subscriber_is_logged_not_raised(store, workload, target, make_trial, caplog):
    run = store.create_run(workload, target, "random")
    later = []

    def broken(records):
        records.clear()  # must not affect the next subscriber's list either
        raise RuntimeError("subscriber bug")

    store.subscribe(broken)
    store.subscribe(lambda records: later.append(len(records)))
    with caplog.at_level(logging.ERROR, logger="explorer.storage._sqlite"):
        records = store.add_trials(run.id, [make_trial(workload, target)] * 3)
    assert len(records) == 3 and later == [3]
    assert "subscriber bug" in caplog.text


def test_closed_store_raises_store_error(workload, target):
    store = SQLiteStore(":memory:")
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.runs()
    with pytest.raises(StoreError, match="closed"):
        store.create_run(workload, target, "random")


# -- get_store and environment ------------------------------------------------------------------
def test_get_store_coerces_its_argument(tmp_path, monkeypatch, workload, target, make_trial):
    monkeypatch.setenv("EXPLORER_DB", str(tmp_path / "env" / "db.sqlite"))
    assert default_store_path() == tmp_path / "env" / "db.sqlite"
    with get_store(None) as store:
        assert isinstance(store, SQLiteStore) and (tmp_path / "env" / "db.sqlite").exists()
        assert get_store(store) is store
    monkeypatch.delenv("EXPLORER_DB")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_store_path() == tmp_path / "home" / ".explorer" / "records.db"
    with get_store(str(tmp_path / "a.db")) as a, get_store(tmp_path / "a.db") as b:
        run = a.create_run(workload, target, "manual")
        assert b.get_run(run.id) == run  # two stores, one file
    with pytest.raises(TypeError, match="RecordStore"):
        get_store(42)  # type: ignore[arg-type]


def test_memory_store_is_usable_from_several_threads(workload, target, make_trial):
    with get_store(":memory:") as store:
        run = store.create_run(workload, target, "manual")
        errors = []

        def work():
            try:
                for _ in range(10):
                    store.add_trials(run.id, [make_trial(workload, target)] * 3)
                    store.trials(run_id=run.id, limit=5)
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert [t.seq for t in store.trials(run_id=run.id)] == list(range(120))


def test_environment_is_json_and_names_the_software():
    env = environment()
    assert json.loads(json.dumps(env)) == env
    assert env["tvm_version"] and env["ffi_version"] and env["python_version"]
    assert env["target_key"].startswith("llvm:") and env["hostname"]
    assert env["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", env["git_commit"])
