"""The database file: reopening, schema versions and migrations, foreign and corrupt files."""

from __future__ import annotations

import json
import random
import sqlite3

import pytest

from explorer.errors import StoreError
from explorer.storage import SCHEMA_VERSION, SQLiteStore
from explorer.storage._schema import APPLICATION_ID
from explorer.types import CacheFlush, MeasureStatus


def _siblings(path):
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def test_reopening_keeps_everything_and_continues_ids_and_seq(db_path, workload, target,
                                                              make_trial):  # fmt: skip
    with SQLiteStore(db_path) as store:
        run = store.create_run(workload, target, "random", settings={"seed": 3})
        first = store.add_trials(run.id, [make_trial(workload, target, 2e-3, predicted={"a": 1})])
        store.finish_run(run.id)
        runs = store.runs()
    with SQLiteStore(db_path) as store:
        assert store.runs() == runs
        assert store.trials() == first
        (second,) = store.add_trials(run.id, [make_trial(workload, target, 1e-3)])
        assert second.id > first[0].id and second.seq == 1
        assert store.best(workload, target)[0].id == second.id
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    conn.close()


def test_an_empty_file_becomes_a_new_database(db_path, workload, target):
    db_path.touch()
    with SQLiteStore(db_path) as store:
        assert store.create_run(workload, target, "manual").id == 1


def test_random_bytes_are_refused_and_left_untouched(db_path):
    data = random.Random(0).randbytes(64 * 1024)
    db_path.write_bytes(data)
    with pytest.raises(StoreError, match=r"is not a database \(file is corrupt or not SQLite\)"):
        SQLiteStore(db_path)
    assert db_path.read_bytes() == data
    assert _siblings(db_path) == []  # no -wal/-shm/-journal created either


def test_an_sqlite_header_followed_by_garbage_is_refused_and_left_untouched(db_path):
    data = b"SQLite format 3\x00" + random.Random(1).randbytes(8192)
    db_path.write_bytes(data)
    with pytest.raises(StoreError, match="is not a database"):
        SQLiteStore(db_path)
    assert db_path.read_bytes() == data


def test_a_foreign_sqlite_file_is_refused_and_left_untouched(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('mine, not yours')")
    conn.commit()
    conn.close()
    data = db_path.read_bytes()
    with pytest.raises(
        StoreError,
        match="is an SQLite database but not a Schedule Explorer record database",
    ):
        SQLiteStore(db_path)
    assert db_path.read_bytes() == data
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    conn.close()


def test_a_foreign_application_id_is_refused(db_path):
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA application_id = 1234")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a Schedule Explorer record database"):
        SQLiteStore(db_path)


def test_a_newer_schema_is_refused_naming_both_versions(db_path, workload, target):
    with SQLiteStore(db_path) as store:
        store.create_run(workload, target, "manual")
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    data = db_path.read_bytes()
    with pytest.raises(StoreError, match=rf"schema version 99.*\(version {SCHEMA_VERSION}\)"):
        SQLiteStore(db_path)
    assert db_path.read_bytes() == data


# The version-1 schema, frozen as it was released: migrations must bring such files forward.
V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY, workload_key TEXT NOT NULL, workload_json TEXT NOT NULL,
    target_key TEXT NOT NULL, target_json TEXT NOT NULL, strategy TEXT NOT NULL,
    settings_json TEXT NOT NULL, environment_json TEXT NOT NULL, started_at REAL NOT NULL,
    ended_at REAL, status TEXT NOT NULL DEFAULT 'running');
CREATE TABLE trials (
    id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), seq INTEGER NOT NULL,
    workload_key TEXT NOT NULL, target_key TEXT NOT NULL, trace_json TEXT NOT NULL,
    decisions_json TEXT, status TEXT NOT NULL, run_secs_json TEXT NOT NULL, median_secs REAL,
    gflops REAL, flops INTEGER NOT NULL, build_secs REAL, error_msg TEXT,
    predicted_json TEXT NOT NULL, created_at REAL NOT NULL, UNIQUE (run_id, seq));
CREATE INDEX runs_by_workload ON runs (workload_key, target_key);
CREATE INDEX trials_by_workload ON trials (workload_key, target_key);
CREATE INDEX trials_best ON trials (workload_key, target_key, median_secs) WHERE status = 'ok';
CREATE TRIGGER trials_no_update BEFORE UPDATE ON trials
    BEGIN SELECT RAISE(ABORT, 'trials are append-only'); END;
CREATE TRIGGER trials_no_delete BEFORE DELETE ON trials
    BEGIN SELECT RAISE(ABORT, 'trials are append-only'); END;
CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs
    BEGIN SELECT RAISE(ABORT, 'runs are append-only'); END;
INSERT INTO meta VALUES ('schema_version', '1');
"""


def test_a_version_1_file_is_migrated_forward(db_path, workload, target, make_trial):
    conn = sqlite3.connect(db_path)
    conn.executescript(V1_SCHEMA)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    trace = make_trial(workload, target).candidate.trace
    conn.execute(
        "INSERT INTO runs VALUES (1, ?, ?, ?, ?, 'random', '{}', '{}', 100.0, NULL, 'running')",
        (workload.key(), json.dumps(workload.to_json()), target.key(),
         json.dumps(target.to_json())),
    )  # fmt: skip
    conn.execute(
        "INSERT INTO trials VALUES (1, 1, 0, ?, ?, ?, NULL, 'ok', '[0.002]', 0.002, 0.26, ?, "
        "0.5, NULL, '{\"xgb\": 1.5}', 101.0)",
        (workload.key(), target.key(), json.dumps(trace), workload.flops()),
    )
    conn.commit()
    conn.close()

    with SQLiteStore(db_path) as store:
        (old,) = store.trials()
        assert old.median_secs == 0.002 and old.result.num_threads is None
        assert old.result.cache_flush is CacheFlush.NONE  # as every trial then was timed
        assert old.predicted == {"xgb": 1.5} and old.candidate.trace == trace
        assert store.get_run(1).workload == workload
        (new,) = store.add_trials(1, [make_trial(workload, target, num_threads=4)])
        assert new.seq == 1 and store.get_trial(new.id).result.num_threads == 4
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    with SQLiteStore(db_path) as store:  # a second open finds nothing left to do
        assert store.count_trials() == 2
        assert [t.status for t in store.trials()] == [MeasureStatus.OK] * 2


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(StoreError, match="directory"):
        SQLiteStore(tmp_path)
