"""Run ownership in the SQLite and PostgreSQL stores: the owner columns of ``runs`` are a lease.

A process that creates or resumes a run writes itself (host, pid, process start time) into the
run's row; ``finish_run`` clears it. While the owner is alive nobody else may resume the run; once
it is gone (``kill -9``, a crash) the lease is stale and the run reads as ``interrupted``. Every
check-and-take happens inside one exclusive write transaction (SQLite's ``BEGIN IMMEDIATE``, a
table lock in PostgreSQL), so two processes resuming one run at once cannot both win.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from explorer._process import ProcessIdentity
from explorer.core import RunStatus, effective_status
from explorer.errors import RunInUseError


# The database API both stores speak (sqlite3's, and PostgresStore's adapter of psycopg).
class Cursor(Protocol):
    """What the stores read from a query (``sqlite3.Cursor`` and the PostgreSQL adapter's)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """A connection that runs SQL in SQLite's spelling (``?`` placeholders)."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...


OWNER_COLUMNS = "owner_host, owner_pid, owner_started_at, heartbeat_at, active_secs"

# Runs held by this process, by database: the owner columns cannot tell two threads (or two
# Tuners) of one process apart, so a second claim from the same process is refused from here.
_held: set[tuple[str, int]] = set()
_held_lock = threading.Lock()


def _key(path: str, run_id: int) -> tuple[str, int]:
    """A database file by its real path; ``":memory:"`` and a server's URL as they are."""
    return (path if path == ":memory:" or "://" in path else os.path.realpath(path), run_id)


def hold(path: str, run_id: int) -> None:
    with _held_lock:
        _held.add(_key(path, run_id))


def release(path: str, run_id: int) -> None:
    with _held_lock:
        _held.discard(_key(path, run_id))


def owner_of(row: Sequence[Any]) -> ProcessIdentity | None:
    """The owner from ``(owner_host, owner_pid, owner_started_at, ...)``, ``None`` if unset."""
    host, pid, started = row[0], row[1], row[2]
    if host is None or pid is None:
        return None
    return ProcessIdentity(str(host), int(pid), float(started or 0.0))


def claim(conn: Connection, path: str, run_id: int, me: ProcessIdentity) -> None:
    """Take run ``run_id`` for ``me`` (inside the caller's write transaction)."""
    row = conn.execute(
        f"SELECT status, {OWNER_COLUMNS} FROM runs WHERE id = ?", (run_id,)
    ).fetchone()
    if row is None:
        raise KeyError(run_id)
    status, *owner_row = row
    owner = owner_of(owner_row)
    if effective_status(status, owner, owner_row[3]) is RunStatus.RUNNING:
        with _held_lock:
            mine_and_free = owner == me and _key(path, run_id) not in _held
        if not mine_and_free:
            assert owner is not None  # a running run without an owner reads as interrupted
            since = time.time() - float(owner_row[3] or 0.0)
            where = "in this process" if owner == me else f"in {owner}"
            raise RunInUseError(
                f"run {run_id} is already running ({where}, last heartbeat {since:.0f} s ago); "
                "one process at a time may work on a run: wait for it to end, or stop it "
                "(Ctrl-C or kill) and resume it again"
            )
    conn.execute(
        "UPDATE runs SET status = 'running', ended_at = NULL, owner_host = ?, owner_pid = ?, "
        "owner_started_at = ?, heartbeat_at = ? WHERE id = ?",
        (me.host, me.pid, me.started_at, time.time(), run_id),
    )
    hold(path, run_id)


def beat(conn: Connection, run_id: int, me: ProcessIdentity, active_secs: float) -> None:
    """Record that ``me`` still runs ``run_id``; ``RunInUseError`` if it no longer owns it."""
    cur = conn.execute(
        "UPDATE runs SET heartbeat_at = ?, active_secs = ? WHERE id = ? AND status = 'running' "
        "AND owner_host = ? AND owner_pid = ? AND owner_started_at = ?",
        (time.time(), float(active_secs), run_id, me.host, me.pid, me.started_at),
    )
    if cur.rowcount == 0:
        raise RunInUseError(
            f"run {run_id} is no longer owned by this process ({me}): it was ended or taken "
            "over by another process"
        )
