"""The database file as the operating system sees it: access, read-only opening, integrity
checks, backups, and SQLite's errors said as plain sentences.

Kept apart from ``_sqlite.py`` (the record model) because none of this knows about runs or
trials.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from explorer.errors import StoreError

logger = logging.getLogger(__name__)

_QUICK_CHECK_ERRORS = 5  # problems quoted in the message; quick_check stops collecting there
_CORRUPT_HINT = (
    "it was left untouched; restore a backup (`explorer backup` makes one) or recover what is "
    "readable with the sqlite3 shell's `.recover`"
)


# -- before SQLite sees the file ---------------------------------------------------------------
# The database file itself is never opened here, nor anywhere outside SQLite: on POSIX, closing
# *any* descriptor of a file drops every fcntl lock this process holds on it, SQLite's included.
# A second store on a live database (a second `Explorer()` in one notebook) that read the
# header with open() would strip the first store's locks, and the next process to open the
# file would take itself for the last user and delete the -wal with the first store's commits
# (sqlite.org, "How To Corrupt An SQLite Database File", section 2.2). SQLite itself avoids
# this: its connections in one process share one record per file and keep a closed
# connection's descriptor open while another connection still holds locks. So the header is
# read by SQLite's first query (``_open._probe``, a read inside a transaction, before anything
# is written), which refuses a file that is not SQLite with SQLITE_NOTADB; only the file's
# metadata (``stat``) is looked at here.
def check_file(path: str, *, read_only: bool) -> None:
    """Refuse what SQLite would mishandle, before it creates or writes anything.

    Missing files are an error when reading only (SQLite would create an empty database, and
    its folders with it); otherwise the missing folders are created. A directory is refused.
    """
    if not path:
        raise StoreError("no record database file named (the path is empty)")
    file = Path(path)
    try:
        if file.is_dir():
            raise StoreError(f"{path} is a directory, not a record database")
        file.stat()
    except (FileNotFoundError, NotADirectoryError):
        if read_only:
            raise StoreError(f"no record database at {path} (the file does not exist)") from None
        _make_folder(file)
        return
    except PermissionError as exc:  # the cause is kept: callers tell environment from input
        raise StoreError(
            f"cannot open {path}: permission denied (a folder on its path cannot be entered)"
        ) from exc
    if not os.access(file, os.R_OK):  # asks the system; opens nothing
        denied = PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        raise StoreError(f"cannot read {path}: permission denied") from denied


def is_sqlite_file(path: str | Path) -> bool:
    """Whether ``path`` is a non-empty file that SQLite reads as a database.

    Asked through SQLite (a read-only connection, see above), never with ``open()``: the file
    may be a database this process has open. A file SQLite cannot open for another reason
    (permissions, a read-only folder) counts as one: opening it as a store says what is wrong.
    """
    try:
        if not Path(path).is_file() or Path(path).stat().st_size == 0:
            return False
    except OSError:
        return False
    try:
        conn = sqlite3.connect(_uri(str(path), "mode=ro"), uri=True)
    except sqlite3.Error:
        return True
    try:
        conn.execute("PRAGMA schema_version").fetchone()
    except sqlite3.Error as exc:
        return not error_name(exc).startswith("SQLITE_NOTADB")
    finally:
        conn.close()
    return True


def _make_folder(file: Path) -> None:
    folder = file.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except PermissionError as exc:
        raise StoreError(
            f"cannot create the folder {folder} for the record database {file}: permission denied"
        ) from exc
    except OSError as exc:
        raise StoreError(
            f"cannot create the folder {folder} for the record database {file}: "
            f"{exc.strerror or exc}"
        ) from exc


# -- connecting --------------------------------------------------------------------------------
def connect(path: str, *, read_only: bool, timeout_secs: float) -> sqlite3.Connection:
    """A connection; read-only ones never write the file, and never create one.

    A read-only connection to a WAL database needs its ``-shm`` file, which SQLite creates
    beside the database. In a folder we may not write to, that fails; when no ``-wal`` file
    holds unmerged commits, the file alone is the whole database and is opened ``immutable``
    (no ``-shm`` needed). A writer could only run there as another user, so the risk that
    ``immutable`` takes (someone changing the file meanwhile) is accepted for listing it.
    """
    if path == ":memory:" or not read_only:
        return _connect(path, path, timeout_secs=timeout_secs)
    conn = _connect(path, _uri(path, "mode=ro"), timeout_secs=timeout_secs, uri=True)
    try:
        conn.execute("PRAGMA schema_version").fetchone()  # the first read opens the files
        return conn
    except sqlite3.Error as exc:
        conn.close()
        if not error_name(exc).startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
            raise explain(path, exc, doing="read") from exc
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(
                f"cannot read {path}: its folder is not writable and {wal.name} holds commits "
                "not yet merged into the file (the last writer did not close cleanly); open it "
                "once where the folder is writable, or copy the file with its -wal and -shm"
            ) from exc
    return _connect(path, _uri(path, "immutable=1"), timeout_secs=timeout_secs, uri=True)


def _connect(
    path: str, target: str, *, timeout_secs: float, uri: bool = False
) -> sqlite3.Connection:
    try:
        return sqlite3.connect(
            target,
            timeout=timeout_secs,
            isolation_level=None,  # explicit BEGIN/COMMIT only
            check_same_thread=False,
            uri=uri,
        )
    except sqlite3.Error as exc:
        raise explain(path, exc, doing="open") from exc


def _uri(path: str, query: str) -> str:
    return f"file:{quote(str(Path(path).absolute()))}?{query}"


# -- integrity ---------------------------------------------------------------------------------
def ensure_intact(conn: sqlite3.Connection, path: str) -> None:
    """Raise ``StoreError`` when SQLite's ``quick_check`` finds the file damaged.

    ``quick_check`` reads every page once (no index cross-checks: 0.1 s for 100k trials), so it
    catches pages overwritten in the middle of a file whose header is intact, which opening the
    file does not notice, before a write lands in a damaged b-tree.

    Other errors (a lock held while another process switches the file to WAL) are no verdict
    on the file: they are raised as they are, for the caller to retry or explain.
    """
    try:
        rows = conn.execute(f"PRAGMA quick_check({_QUICK_CHECK_ERRORS})").fetchall()
        found = [str(row[0]) for row in rows]
    except sqlite3.DatabaseError as exc:
        if not is_corrupt(exc):
            raise
        found = [str(exc)]
    if found != ["ok"]:
        detail = "; ".join(" ".join(line.split()) for line in found)
        raise StoreError(
            f"{path} is corrupt (SQLite's integrity check found: {detail}); {_CORRUPT_HINT}"
        )


def corrupt(path: str, exc: BaseException | None = None) -> StoreError:
    if exc is None:
        return StoreError(f"{path} is not a database (file is corrupt or not SQLite)")
    return StoreError(f"{path} is corrupt ({exc}); {_CORRUPT_HINT}")


_SQLITE_READONLY = 8  # SQLite's primary result code (its extended codes add higher bits)


def checkpoint(conn: sqlite3.Connection, path: str) -> None:
    """Merge the ``-wal`` file into the database file as far as readers allow, without waiting.

    Run on a clean close, so that the file alone holds what was committed; the last connection
    to close also deletes the ``-wal``. A crash can still leave commits in the ``-wal``: copy a
    live database with ``backup``, never by copying the file.
    """
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    except sqlite3.Error as exc:  # a checkpoint is an optimisation; closing must not fail
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF == _SQLITE_READONLY:
            return  # a read-only file: its -wal is its owner's to merge, nothing to report
        logger.warning("%s: checkpoint on close failed: %s", path, exc)


# -- output files ------------------------------------------------------------------------------
def check_output_file(dest: str | Path, *, doing: str, what: str = "the file") -> Path:
    """``dest`` as a ``Path``, refused (``StoreError``) unless a file can be written there: it
    must not be a directory, and its folder must exist (a typo never creates a tree of folders)."""
    if not str(dest).strip():  # Path("") would be the current folder
        raise StoreError(f"cannot {doing} an empty path: name {what}")
    dest = Path(dest)
    if dest.is_dir():
        raise StoreError(f"cannot {doing} {dest}: it is a directory; name {what}")
    check_output_folder(dest, doing=doing)
    return dest


def check_output_folder(dest: Path, *, doing: str) -> None:
    """Refuse ``dest`` when its folder does not exist or is not a folder."""
    folder = dest.absolute().parent
    if not folder.exists():
        raise StoreError(f"cannot {doing} {dest}: the folder {dest.parent} does not exist")
    if not folder.is_dir():
        raise StoreError(f"cannot {doing} {dest}: {dest.parent} is a file, not a folder")


def check_no_leftovers(dest: Path) -> None:
    """Refuse to put a new database file at ``dest`` while a ``-wal`` or ``-journal`` file
    beside it holds data: SQLite would pair it with the new file and replay another database's
    pages into it (and a writer that has the old file open would go on writing to a file that
    no longer has a name). Empty ones, which read-only opens leave behind, are harmless."""
    for suffix in ("-wal", "-journal"):
        sibling = Path(f"{dest}{suffix}")
        try:
            size = sibling.stat().st_size
        except OSError:  # none there
            continue
        if size:
            raise StoreError(
                f"cannot write {dest}: {sibling.name} beside it holds commits of the database "
                "there (it is open, or its last writer did not close cleanly); close what uses "
                "it, or open it once to merge them, then try again"
            )


# -- backups -----------------------------------------------------------------------------------
def backup(conn: sqlite3.Connection, source: str, dest: str | Path, *, overwrite: bool) -> Path:
    """Copy the database through SQLite's online backup API into ``dest`` (one file).

    The copy is one consistent snapshot, whatever other processes write meanwhile, and includes
    what is still in the source's ``-wal``. It is written beside ``dest`` and renamed into place,
    so ``dest`` is never half-written, and switched to rollback-journal mode so that the file
    alone is the whole database (the store switches it back to WAL when it opens it to write).
    """
    dest = check_output_file(dest, doing="back up to", what="the backup file")
    if dest.exists():
        if source != ":memory:" and dest.resolve() == Path(source).resolve():
            raise StoreError(f"cannot back up {source} onto itself")
        if not overwrite:
            raise StoreError(f"{dest} already exists; choose a new name or allow overwriting")
    check_no_leftovers(dest)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        copy = sqlite3.connect(tmp, isolation_level=None)
        try:
            conn.backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE").fetchone()
        finally:
            copy.close()
        os.replace(tmp, dest)
    except sqlite3.Error as exc:
        raise explain(str(dest), exc, doing="write the backup") from exc
    except PermissionError as exc:
        raise StoreError(f"cannot write the backup {dest}: permission denied") from exc
    except OSError as exc:
        raise StoreError(f"cannot write the backup {dest}: {exc.strerror or exc}") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return dest


# -- SQLite's errors in plain words ------------------------------------------------------------
def explain(path: str, exc: sqlite3.Error, *, doing: str) -> StoreError:
    """A ``StoreError`` saying what went wrong with ``path`` while ``doing`` something.

    SQLite's own words ("unable to open database file", "attempt to write a readonly database")
    name neither the file nor the cause; these do, and keep SQLite's text only where it adds
    something.
    """
    name = error_name(exc)
    if name.startswith("SQLITE_NOTADB"):  # no SQLite header: the file may be anything
        return corrupt(path)
    if is_corrupt(exc):
        return corrupt(path, exc)
    if name.startswith("SQLITE_READONLY"):
        return StoreError(
            f"cannot {doing} {path}: the database is read-only (writing needs write permission "
            "on the file and on its folder, and a writable file system)"
        )
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        return StoreError(f"cannot {doing} {path}: {_access_problem(path)}")
    if name.startswith("SQLITE_FULL"):
        return StoreError(f"cannot {doing} {path}: the disk is full")
    if name.startswith("SQLITE_IOERR"):
        return StoreError(f"cannot {doing} {path}: input/output error ({exc})")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreError(
            f"cannot {doing} {path}: the database is locked by another process ({exc})"
        )
    return StoreError(f"cannot {doing} {path}: {exc}")


def _access_problem(path: str) -> str:
    """Why SQLite could not open ``path``, as far as ``os.access`` can tell."""
    file = Path(path)
    folder = file.parent
    if not folder.is_dir():
        return f"the folder {folder} does not exist"
    if not file.exists():
        if not os.access(folder, os.W_OK):
            return (
                f"permission denied: the folder {folder} is not writable, so the file cannot be "
                "created"
            )
        return "the file cannot be created"
    if not os.access(file, os.R_OK):
        return "permission denied reading the file"
    if not os.access(folder, os.W_OK):
        return (
            f"permission denied: the folder {folder} is not writable (SQLite keeps its -wal and "
            "-shm files beside the database)"
        )
    return "permission denied, or the file is locked by the system"


def error_name(exc: sqlite3.Error) -> str:
    """SQLite's extended error name (``SQLITE_READONLY_DIRECTORY``...), also on Python 3.10."""
    name = getattr(exc, "sqlite_errorname", None)  # Python 3.11+
    if name:
        return str(name)
    text = str(exc).lower()  # Python 3.10: only the message
    for words, guessed in (
        (("locked", "busy"), "SQLITE_BUSY"),
        (("not a database", "malformed"), "SQLITE_NOTADB"),
        (("readonly", "read-only"), "SQLITE_READONLY"),
        (("unable to open",), "SQLITE_CANTOPEN"),
        (("disk is full", "database or disk is full"), "SQLITE_FULL"),
        (("disk i/o",), "SQLITE_IOERR"),
    ):
        if any(word in text for word in words):
            return guessed
    return ""


def is_busy(exc: sqlite3.Error) -> bool:
    return error_name(exc).startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def is_corrupt(exc: sqlite3.Error) -> bool:
    return error_name(exc).startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT"))
