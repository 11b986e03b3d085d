"""Records moved between stores: SQLite to PostgreSQL and back, whole (``explorer backup``) or
merged into a database that holds records already (``explorer import``)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from explorer._urls import is_postgres_url
from explorer.core import RecordStore
from explorer.errors import StoreError
from explorer.storage._files import check_no_leftovers, check_output_file, is_sqlite_file
from explorer.storage._sqlcopy import copy_into, merge_into
from explorer.storage._sqlite import SQLiteStore
from explorer.storage._sqlstore import SQLRecordStore


def copy_records(source: RecordStore, dest: RecordStore) -> tuple[int, int]:
    """Copy every run and trial of ``source`` into ``dest``, which must hold no run yet.

    Records keep everything, ids included, so the copy reads back equal to the source:
    ``dest.trials() == source.trials()`` and ``dest.runs() == source.runs()``. The copy is one
    transaction of ``dest`` (all or nothing) and takes what ``source`` had committed when it
    started.

    Args:
        source: An SQLite or PostgreSQL store (``SQLiteStore``, ``PostgresStore``).
        dest: Another one, empty.

    Returns:
        How many runs and trials were copied.

    Raises:
        StoreError: ``dest`` already holds runs, or either database fails.
        TypeError: A store of another kind (they copy only between the SQL stores).

    Example:
        >>> from explorer.storage import SQLiteStore, copy_records
        >>> copy_records(SQLiteStore(":memory:"), SQLiteStore(":memory:"))
        (0, 0)
    """
    return copy_into(_sql_store(dest, "dest"), _sql_store(source, "source"))


@dataclass(frozen=True)
class MergeSummary:
    """What ``merge_records`` did: runs added, trials added (to new runs and to runs the
    destination had), and runs the destination had already (merged before)."""

    runs_added: int
    trials_added: int
    runs_known: int


def merge_records(source: RecordStore, dest: RecordStore) -> MergeSummary:
    """Add the runs and trials of ``source`` that ``dest`` lacks, under new ids.

    For a team's shared database: merge a laptop's SQLite file into the PostgreSQL database, or
    the other way round. A run is recognised by its start time, workload, target, strategy,
    settings and environment, so merging twice adds nothing, and a run that went on in
    ``source`` since it was merged gets its new trials only (those after ``dest``'s last
    ``seq`` of it). Trials keep their ``seq``, times, predictions and flags; runs their status
    and owner. One transaction of ``dest``: all or nothing.

    Raises:
        StoreError: Either database fails.
        TypeError: A store of another kind (records move only between the SQL stores).

    Example:
        >>> from explorer.storage import SQLiteStore, merge_records
        >>> merge_records(SQLiteStore(":memory:"), SQLiteStore(":memory:"))
        MergeSummary(runs_added=0, trials_added=0, runs_known=0)
    """
    added, trials, known = merge_into(_sql_store(dest, "dest"), _sql_store(source, "source"))
    return MergeSummary(added, trials, known)


def is_record_database(location: str | Path) -> bool:
    """Whether ``location`` names a record database rather than a folder of files: a
    ``postgresql://`` URL, or an existing SQLite file (asked through SQLite, never ``open()``:
    see ``is_sqlite_file``)."""
    return is_postgres_url(location) or is_sqlite_file(location)


def _sql_store(store: RecordStore, name: str) -> SQLRecordStore:
    if not isinstance(store, SQLRecordStore):
        raise TypeError(
            f"{name} must be an SQLite or PostgreSQL store (got {type(store).__name__})"
        )
    return store


def copy_to_file(source: RecordStore, dest: str | Path, *, overwrite: bool = False) -> Path:
    """Copy ``source`` (any SQL store, a PostgreSQL one say) into a new SQLite file ``dest``.

    The file is written beside ``dest`` and renamed into place, so ``dest`` is never half
    written; an existing ``dest`` is replaced only with ``overwrite``.

    Raises:
        StoreError: ``dest`` exists (without ``overwrite``), is a directory, its folder does not
            exist, or it cannot be written.
    """
    dest = check_output_file(dest, doing="copy the database to", what="the database file")
    if dest.exists() and not overwrite:
        raise StoreError(f"{dest} already exists; choose a new name or allow overwriting")
    check_no_leftovers(dest)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with SQLiteStore(tmp) as copy:
            copy_records(source, copy)
        os.replace(tmp, dest)
    except PermissionError as exc:
        raise StoreError(f"cannot write {dest}: permission denied") from exc
    except OSError as exc:
        raise StoreError(f"cannot write {dest}: {exc.strerror or exc}") from exc
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return dest
