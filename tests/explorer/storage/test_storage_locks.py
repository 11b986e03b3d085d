"""Commits survive a second store on the same file in one process (a second ``Explorer()`` in a
notebook) and other processes opening it meanwhile.

On POSIX, closing *any* descriptor of a file drops every fcntl lock the process holds on it,
SQLite's included. A process that opens a live database file with ``open()`` lets the next
process that opens the database take itself for the last user: it deletes the -wal and the
-shm, and the first connection's later commits go to a -wal that nobody else reads (lost when
the process ends). Real processes, real SQLite files, no mocks.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.errors import ExplorerError
from explorer.session import ScheduleSession
from explorer.storage import SQLiteStore, get_store
from explorer.storage._copy import is_record_database

ROOT = Path(__file__).resolve().parents[3]
EXPLORER = [sys.executable, "-m", "explorer"]


def _sqlite_elsewhere(path: Path, sql: str) -> str:
    """Another process (plain sqlite3, as the `sqlite3` shell would) opens the database, runs
    one query, closes it, and prints the answer."""
    code = (
        "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
        "print(c.execute(sys.argv[2]).fetchone()[0]); c.close()"
    )
    out = subprocess.run([sys.executable, "-c", code, str(path), sql], check=True, timeout=60,
                         capture_output=True, text=True)  # fmt: skip
    return out.stdout.strip()


def _open_and_close_elsewhere(path: Path) -> None:
    _sqlite_elsewhere(path, "PRAGMA schema_version")


def _count_elsewhere(path: Path, table: str) -> int:
    return int(_sqlite_elsewhere(path, f"SELECT count(*) FROM {table}"))


def _siblings_exist(path: Path) -> bool:
    return Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()


# -- the mechanism, in plain sqlite3 -----------------------------------------------------------
@pytest.mark.parametrize("meanwhile", ["open() and close()", "a second SQLite connection"])
def test_closing_a_descriptor_outside_sqlite_loses_later_commits(tmp_path, meanwhile):
    """Why the explorer never opens a database file outside SQLite: SQLite's own connections
    share the process's locks and keep them; a plain descriptor's close drops them."""
    path = tmp_path / "plain.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("INSERT INTO t VALUES (1)")
    if meanwhile == "open() and close()":
        open(path, "rb").close()
    else:
        sqlite3.connect(path).execute("PRAGMA schema_version").connection.close()
    _open_and_close_elsewhere(path)
    conn.execute("INSERT INTO t VALUES (2)")
    seen = _count_elsewhere(path, "t")
    conn.close()
    if meanwhile == "open() and close()":
        assert seen == 1  # the second commit is invisible to every other process
    else:
        assert seen == 2


# -- the store ---------------------------------------------------------------------------------
def _write_run(store, workload, target, make_trial) -> int:
    run = store.create_run(workload, target, "manual")
    store.add_trials(run.id, [make_trial(workload, target, secs) for secs in (1e-3, 2e-3)])
    return run.id


def test_a_second_store_in_the_process_and_an_explorer_command_lose_nothing(
    db_path, workload, target, make_trial
):
    """The issue's reproduction: two stores on one file, then `explorer measure` on it."""
    a = get_store(db_path)
    _write_run(a, workload, target, make_trial)
    b = get_store(db_path)
    _write_run(b, workload, target, make_trial)
    out = subprocess.run([*EXPLORER, "measure", "matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16",
                          "--db", str(db_path)], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)  # fmt: skip
    assert "error:" not in out.stderr, out.stderr
    assert _siblings_exist(db_path), "another process deleted the -wal and -shm of a live store"
    last = _write_run(a, workload, target, make_trial)
    assert _count_elsewhere(db_path, "runs") == last == 4  # a's, b's, measure's, a's again
    b.close()
    last = _write_run(a, workload, target, make_trial)
    _open_and_close_elsewhere(db_path)
    assert _count_elsewhere(db_path, "runs") == last
    a.close()
    with SQLiteStore(db_path, read_only=True) as store:
        assert [run.id for run in store.runs()] == [1, 2, 3, 4, 5]
        assert store.count_trials(run_id=5) == 2


def _second_store(path: Path) -> None:
    get_store(path).close()


def _read_only_store(path: Path) -> None:
    with get_store(path, read_only=True) as store:
        store.ensure_intact()


def _import_source_probe(path: Path) -> None:
    assert is_record_database(path)  # `explorer import DB` asks this of its argument


def _session_file_mistake(path: Path) -> None:
    with pytest.raises(ExplorerError, match=r"is an SQLite database .*, not a saved session"):
        ScheduleSession.load(path)


@pytest.mark.parametrize(
    "meanwhile", [_second_store, _read_only_store, _import_source_probe, _session_file_mistake]
)
def test_whatever_the_process_does_to_a_live_database_keeps_its_locks(
    db_path, workload, target, make_trial, meanwhile
):
    """Every place of the explorer that looks at a database file, run while a store holds it:
    a later process's open must not delete the store's -wal, nor hide its next commit."""
    with SQLiteStore(db_path) as store:
        _write_run(store, workload, target, make_trial)
        meanwhile(db_path)
        _open_and_close_elsewhere(db_path)
        assert _siblings_exist(db_path)
        last = _write_run(store, workload, target, make_trial)
        assert _count_elsewhere(db_path, "runs") == last
    assert not os.path.exists(f"{db_path}-wal")  # the clean close merged and removed it
