"""Whole databases copied between stores: SQLite to PostgreSQL and back (``explorer backup``)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from explorer.errors import StoreError
from explorer.storage._base import RecordStore
from explorer.storage._files import check_output_file
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
    for name, store in (("source", source), ("dest", dest)):
        if not isinstance(store, SQLRecordStore):
            raise TypeError(
                f"{name} must be an SQLite or PostgreSQL store (got {type(store).__name__})"
            )
    assert isinstance(source, SQLRecordStore) and isinstance(dest, SQLRecordStore)
    return dest.copy_from(source)


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
