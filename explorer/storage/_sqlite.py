"""The embedded record database: one SQLite file in WAL mode, shared by threads and processes."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from explorer.errors import StoreError
from explorer.storage._files import backup as _backup
from explorer.storage._files import checkpoint, ensure_intact, explain
from explorer.storage._open import open_database
from explorer.storage._schema import SCHEMA_VERSION  # noqa: F401 (explorer.storage re-exports it)
from explorer.storage._sqlstore import END_STATUSES, SQLRecordStore

logger = logging.getLogger(__name__)

__all__ = ["END_STATUSES", "SQLiteStore"]

_ROWS_PER_READ = 2000  # rows read per lock hold (trial_rows): a writer never waits for a table


class SQLiteStore(SQLRecordStore):
    """A ``RecordStore`` in one SQLite file (the embedded default).

    Several processes may read and write the same file at once: the file is in WAL mode, writers
    wait up to ``timeout_secs`` for each other, and every ``add_trials`` batch is one
    ``BEGIN IMMEDIATE`` transaction, so a process killed mid-batch leaves the previous batches
    intact and none of the interrupted one. Commits use ``synchronous=NORMAL``: they survive the
    process crashing; a power cut may roll back the last commits but never corrupts the file.

    Within one process, one connection is shared by all threads and guarded by a lock. Queries
    take milliseconds, and the alternative for ``":memory:"`` (per-thread connections to a
    shared-cache database) fails with ``SQLITE_LOCKED`` instead of waiting. Several stores on
    one file in one process are safe: nothing here opens the file outside SQLite (see
    ``_files.check_file``), which would drop the locks that SQLite holds on it.

    A file that is not SQLite, or is SQLite but not a record database, or has a schema newer than
    this code, raises ``StoreError`` and is left untouched. Older schemas are migrated forward.
    Before its first write, a store checks the file (SQLite's ``quick_check``) and refuses a
    damaged one, untouched; a file not yet in WAL mode is checked when it opens, before the
    switch to WAL (a write). A clean ``close`` merges the ``-wal`` file into the database file;
    ``backup`` copies a live database safely.

    ``read_only=True`` opens an existing file without ever writing it (not even its journal
    mode), so a database in a read-only folder can be read; a missing file is an error then, and
    writing raises ``StoreError``.

    Subscribers see only the batches written through this object, not other processes' writes.
    The queries are ``SQLRecordStore``'s, shared with the PostgreSQL store.

    Args:
        path: The database file (created with its parent directories if missing, unless
            ``read_only``), or ``":memory:"`` for a private in-memory database.
        timeout_secs: How long a writer waits for another process's transaction to finish.
        read_only: Only read: never create, migrate or write the file.

    Raises:
        StoreError: The file cannot be used (see above).

    Example:
        >>> from explorer.storage import SQLiteStore
        >>> with SQLiteStore(":memory:") as store:
        ...     store.count_trials()
        0
    """

    def __init__(
        self, path: str | Path, *, timeout_secs: float = 30.0, read_only: bool = False
    ) -> None:
        self._path = str(path)
        self._is_memory = self._path == ":memory:"
        if read_only and self._is_memory:
            raise ValueError("a private in-memory database cannot be opened read-only")
        self._read_only = bool(read_only)
        self._timeout_secs = float(timeout_secs)
        super().__init__(self._path)
        self._conn: sqlite3.Connection | None = None
        # Intact: checked by SQLite's quick_check; done before the first write, if not now.
        self._conn, self._is_intact = open_database(
            self._path, read_only=self._read_only, timeout_secs=self._timeout_secs
        )

    @property
    def path(self) -> str:
        """The database file (or ``":memory:"``)."""
        return self._path

    @property
    def is_read_only(self) -> bool:
        return self._read_only

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r}{', read_only=True' * self._read_only})"

    def _rows_per_read(self) -> int:
        return _ROWS_PER_READ

    # -- connection helpers -------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"{self!r} is closed")
        return self._conn

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._connection()
            except sqlite3.Error as exc:
                # A damaged page can read as text that is not UTF-8 ("Could not decode to UTF-8
                # column ..."), which SQLite does not call corruption: its check does.
                raise self._damage_found(exc) or explain(self._path, exc, doing="read") from exc

    @contextmanager
    def _decoding(self) -> Iterator[None]:
        """Decoding what was read: JSON that does not parse is a damaged file, if it is one."""
        try:
            yield
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            damage = self._damage_found(exc)
            if damage is None:
                raise
            raise damage from exc

    def _damage_found(self, exc: BaseException) -> StoreError | None:
        """After a read failed with ``exc``: the corrupt-file error if SQLite's check finds the
        file damaged, else ``None`` (the failure has another cause)."""
        if self._is_intact or self._conn is None:
            return None
        try:
            self.ensure_intact()
        except StoreError as damage:
            return damage
        return None

    def ensure_intact(self) -> None:
        """Check the file with SQLite's ``quick_check`` (once per store; about 0.1 s for 100k
        trials) and raise ``StoreError`` if it is damaged.

        Writes do this before the first one; call it before reading a file you do not trust
        (``explorer runs``, ``export`` and ``backup`` do): a page overwritten in the middle of
        the file can otherwise read as wrong rows, or fail halfway with SQLite's raw text.
        """
        with self._lock:
            conn = self._connection()
            if not self._is_intact:
                try:
                    ensure_intact(conn, self._path)
                except sqlite3.Error as exc:
                    raise explain(self._path, exc, doing="check") from exc
                self._is_intact = True

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: the write lock is taken up front, so the
        ``max(seq) + 1`` read inside it cannot race another process."""
        with self._lock:
            conn = self._connection()
            if self._read_only:
                raise StoreError(f"{self!r} was opened read-only; it cannot store anything")
            self.ensure_intact()  # a damaged file is refused, never written
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise explain(self._path, exc, doing="write to") from exc
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise explain(self._path, exc, doing="write to") from exc
                raise

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                if not (self._is_memory or self._read_only):
                    checkpoint(self._conn, self._path)
                self._conn.close()
                self._conn = None

    def backup(self, dest: str | Path, *, overwrite: bool = False) -> Path:
        """Copy the database into the file ``dest``, safely while others write to it.

        Uses SQLite's online backup API: the copy is one consistent snapshot that includes what
        is still in the ``-wal`` file (copying the database file alone can miss it), written
        beside ``dest`` and renamed into place. The copy is a single file that opens as a store.

        Args:
            dest: The backup file; its folder must exist.
            overwrite: Replace an existing ``dest`` (refused by default).

        Returns:
            ``dest`` as a ``Path``.

        Raises:
            StoreError: This database is damaged (SQLite's ``quick_check``: a copy of it would
                be too), or ``dest`` exists (without ``overwrite``), is this database, is a
                directory, or cannot be written.
        """
        with self._lock:
            self.ensure_intact()  # the backup API copies pages as they are, damaged ones too
            return _backup(self._connection(), self._path, dest, overwrite=overwrite)
