"""Opening a record database: refuse files that are not ours, migrate older schemas forward,
and open read-only without writing anything.

Kept apart from ``_sqlite.py`` so that the store there is about runs and trials only.
"""

from __future__ import annotations

import logging
import sqlite3
import time

from explorer.errors import StoreError
from explorer.storage._files import (
    check_file,
    checkpoint,
    connect,
    corrupt,
    ensure_intact,
    explain,
    is_busy,
    is_corrupt,
)
from explorer.storage._schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

logger = logging.getLogger(__name__)


class _Outdated(Exception):
    """A read-only open found an older schema, which only a writer can migrate."""

    def __init__(self, version: int) -> None:
        super().__init__(f"schema version {version}")
        self.version = version


def open_database(
    path: str, *, read_only: bool, timeout_secs: float
) -> tuple[sqlite3.Connection, bool]:
    """A connection to a record database at the current schema, and whether the file was just
    checked intact (it is when a migration or creation wrote it).

    A file that is not SQLite, or is SQLite but not a record database, or has a newer schema, is
    refused untouched (``StoreError``). An older schema is migrated, also when opening read-only:
    reading needs the current schema, so a writer migrates it once first (an error says so when
    the file cannot be written).
    """
    if path != ":memory:":
        check_file(path, read_only=read_only)
    conn = connect(path, read_only=read_only, timeout_secs=timeout_secs)
    try:
        is_intact = _prepare(conn, path, read_only=read_only, timeout_secs=timeout_secs)
    except _Outdated as old:
        conn.close()
        try:
            writer, _ = open_database(path, read_only=False, timeout_secs=timeout_secs)
        except StoreError as exc:
            raise StoreError(
                f"{path} has schema version {old.version}, older than this code's "
                f"{SCHEMA_VERSION}, and cannot be upgraded to be read: {exc}"
            ) from exc
        checkpoint(writer, path)
        writer.close()
        return open_database(path, read_only=True, timeout_secs=timeout_secs)
    except BaseException:
        conn.close()
        raise
    return conn, is_intact


def _probe(conn: sqlite3.Connection, path: str) -> int:
    """The schema version of an empty (0) or our own database; raise for anything else.

    Called inside a transaction, so that its reads see one snapshot: outside one, another
    process could commit its newly created tables between the two reads.
    """
    try:
        (app_id,) = conn.execute("PRAGMA application_id").fetchone()
        (num_objects,) = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        if app_id == 0 and num_objects == 0:
            return 0
        if app_id != APPLICATION_ID:
            raise StoreError(
                f"{path} is an SQLite database but not a Schedule Explorer record "
                f"database (application_id {app_id:#010x}, {num_objects} schema objects); "
                "it was left untouched"
            )
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        if is_corrupt(exc):
            raise corrupt(path) from exc
        raise
    if row is None:
        raise StoreError(f"{path}: record database without a schema version")
    version = int(row[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {version}, newer than this code supports "
            f"(version {SCHEMA_VERSION}); upgrade schedule-explorer to open it"
        )
    return version


def _prepare(conn: sqlite3.Connection, path: str, *, read_only: bool, timeout_secs: float) -> bool:
    conn.execute(f"PRAGMA busy_timeout = {int(timeout_secs * 1000)}")
    # While another process creates the file and switches it to WAL, SQLite answers some
    # steps with SQLITE_BUSY without calling the busy handler, so opening retries itself.
    deadline = time.monotonic() + timeout_secs
    delay = 0.002
    while True:
        try:
            return _prepare_once(conn, path, read_only=read_only)
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if is_corrupt(exc):
                raise corrupt(path) from exc
            if not is_busy(exc) or time.monotonic() > deadline:
                raise explain(path, exc, doing="open") from exc
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        time.sleep(delay)
        delay = min(2 * delay, 0.1)


def _prepare_once(conn: sqlite3.Connection, path: str, *, read_only: bool) -> bool:
    # Step 1. Refuse foreign, corrupt and too-new files before writing anything.
    conn.execute("BEGIN")
    version = _probe(conn, path)
    conn.execute("ROLLBACK")  # end the read snapshot
    # Step 2. Connection settings (WAL is persistent in the file; the others are not).
    is_intact = False
    if path != ":memory:" and not read_only:
        is_intact = _switch_to_wal(conn, path)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    if version == SCHEMA_VERSION:
        return is_intact
    if read_only:
        if version == 0:
            raise StoreError(f"{path} is empty: no record database was written to it")
        raise _Outdated(version)
    # Step 3. Migrate under the write lock, re-reading the version: another process may
    # have created or migrated the file since the probe. A migration is a write: check the
    # file first.
    if version and not is_intact:
        ensure_intact(conn, path)
    conn.execute("BEGIN IMMEDIATE")
    version = _probe(conn, path)
    for migrate in MIGRATIONS[version:]:
        migrate(conn)
    if version == 0:
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
        (str(SCHEMA_VERSION),),
    )
    conn.execute("COMMIT")
    if version:
        logger.info("%s: migrated schema %d -> %d", path, version, SCHEMA_VERSION)
    return True


def _switch_to_wal(conn: sqlite3.Connection, path: str) -> bool:
    """Put the file in WAL mode; return whether it was checked intact on the way.

    The switch is a write (bytes 18, 19, 24-27 and 92-95 of the header change), so a file not
    yet in WAL mode (a backup, a new file, another tool's database) is checked first: a damaged
    one is refused byte for byte untouched. A file already in WAL mode costs nothing here; its
    check waits for the store's first write.
    """
    (mode,) = conn.execute("PRAGMA journal_mode").fetchone()  # reading it writes nothing
    if mode.lower() == "wal":
        return False
    ensure_intact(conn, path)
    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if mode.lower() != "wal":
        logger.warning("%s: WAL mode unavailable (journal_mode=%s)", path, mode)
    return True
