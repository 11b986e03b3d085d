"""The shipped RecordStore contract on an SQLite file and in memory, plus SQLite specifics."""

from __future__ import annotations

import json
import re
import sqlite3
import threading

import pytest

from explorer.errors import StoreError
from explorer.storage import (
    RecordStore,
    SQLiteStore,
    _sqlite,
    default_store_path,
    environment,
    get_store,
)
from explorer.testing.contracts import RecordStoreContract


class TestSQLiteFile(RecordStoreContract):
    def make_store(self, directory):
        return SQLiteStore(directory / "records.db")


class TestSQLiteMemory(RecordStoreContract):
    def make_store(self, directory):
        return SQLiteStore(":memory:")


class _GenericQueries(SQLiteStore):
    """The SQLite store with ``RecordStore``'s generic queries instead of its SQL ones."""

    trial_rows = RecordStore.trial_rows
    rank = RecordStore.rank
    measurements_of = RecordStore.measurements_of


class TestGenericQueries(RecordStoreContract):
    """The defaults a new store inherits obey the same contract as the SQL overrides."""

    def make_store(self, directory):
        return _GenericQueries(":memory:")


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


def test_trial_rows_are_read_in_chunks(monkeypatch, workload, target, make_trial):
    # Chunks of 3: the ones that end exactly at, and inside, the last chunk are both read.
    monkeypatch.setattr(_sqlite, "_ROWS_PER_READ", 3)
    with SQLiteStore(":memory:") as store:
        a = store.create_run(workload, target, "random")
        b = store.create_run(workload, target, "grid")
        store.add_trials(a.id, [make_trial(workload, target)] * 5)
        store.add_trials(b.id, [make_trial(workload, target)] * 2)
        store.add_trials(a.id, [make_trial(workload, target)] * 2)
        assert [r.seq for r in store.trial_rows(run_id=a.id)] == list(range(7))
        rows = store.trial_rows(workload=workload)
        assert [r.id for r in rows] == [t.id for t in store.trials()] and len(rows) == 9
        assert len(store.trial_rows(run_id=b.id)) == 2


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
            except Exception as exc:  # noqa: BLE001 - reported below
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
