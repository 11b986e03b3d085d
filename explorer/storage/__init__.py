"""Where runs and trials are kept: the ``RecordStore`` contract, the SQLite store, the
PostgreSQL store (a database shared by several hosts), and the MetaSchedule, CSV and JSON Lines
import/export formats.

``get_store`` turns ``None``, a path, ``":memory:"``, a ``postgresql://`` URL or a store into a
``RecordStore`` (Optuna's ``get_storage``); ``get_store(path, read_only=True)`` reads a database
without writing or creating anything. ``copy_records`` copies a whole database into an empty one
(SQLite to PostgreSQL and back), ``merge_records`` adds one's new runs and trials to another.
``check_unchecked`` re-measures the ``UNCHECKED`` trials (MetaSchedule's timings) against NumPy.
"""

from __future__ import annotations

import os
from pathlib import Path

from explorer._urls import is_postgres_url
from explorer.core import (
    MANUAL,
    BestSoFar,
    NewTrial,
    Rank,
    RecordStore,
    RunInfo,
    RunStatus,
    TrialRecord,
    TrialRow,
    trace_hash,
)
from explorer.storage._check import CheckSummary, check_unchecked
from explorer.storage._copy import (
    MergeSummary,
    copy_records,
    copy_to_file,
    is_record_database,
    merge_records,
)
from explorer.storage._counting import (
    count_trials,
    is_remeasurement,
    name_trial,
    remeasurements,
    trial_name,
)
from explorer.storage._environment import environment
from explorer.storage._export import export_csv, export_jsonl
from explorer.storage._metaschedule import check_work_dir, export_metaschedule
from explorer.storage._metaschedule_import import ImportSummary, import_metaschedule
from explorer.storage._models import stored_as_imported
from explorer.storage._postgres import PostgresStore
from explorer.storage._schema import SCHEMA_VERSION
from explorer.storage._sqlite import SQLiteStore
from explorer.storage._summary import RunSummary, confirmation_rows, summarize_run

ENV_VAR = "EXPLORER_DB"
"""The environment variable naming the default database: a file, or a ``postgresql://`` URL."""


def default_store_path() -> Path:
    """The database file used when none is given: ``$EXPLORER_DB``, else
    ``~/.explorer/records.db`` (see ``default_store`` for a URL in ``$EXPLORER_DB``)."""
    value = os.environ.get(ENV_VAR)
    if value:
        return Path(value).expanduser()
    return Path.home() / ".explorer" / "records.db"


def default_store() -> str | Path:
    """The database used when none is given: ``$EXPLORER_DB`` as it is when it is a
    ``postgresql://`` URL, else the file ``default_store_path()``."""
    value = os.environ.get(ENV_VAR, "")
    return value if is_postgres_url(value) else default_store_path()


def get_store(
    store: None | str | Path | RecordStore = None, *, read_only: bool = False
) -> RecordStore:
    """Coerce what a caller passed into a ``RecordStore``.

    Args:
        store: ``None`` for the default database (``default_store()``: ``$EXPLORER_DB`` or
            ``~/.explorer/records.db``); a ``postgresql://user@host[:port]/dbname`` URL for a
            PostgreSQL database (``PostgresStore``); a path for an SQLite file (created if
            missing); ``":memory:"`` for a private in-memory database that any thread may use;
            or a ``RecordStore``, returned unchanged.
        read_only: Open it only to read (``SQLiteStore(read_only=True)``,
            ``PostgresStore(read_only=True)``): a missing file or a database without records'
            tables is an error instead of a new database, nothing is written, and a database
            in a read-only folder can be read.

    Returns:
        The store.

    Raises:
        StoreError: The file is missing (when ``read_only``), unreadable, corrupt, not a record
            database, or of a newer schema; the server cannot be reached or refuses the login.
        TypeError: ``store`` is none of the above.

    Example:
        >>> from explorer.storage import get_store
        >>> store = get_store(":memory:")
        >>> get_store(store) is store
        True
    """
    if isinstance(store, RecordStore):
        return store
    if store is None:
        store = default_store()
    if is_postgres_url(store):
        assert isinstance(store, str)
        return PostgresStore(store, read_only=read_only)
    if isinstance(store, (str, Path)):
        return SQLiteStore(store, read_only=read_only and str(store) != ":memory:")
    raise TypeError(
        "store must be None, a path, ':memory:', a postgresql:// URL or a RecordStore "
        f"(got {type(store).__name__})"
    )


__all__ = [
    "ENV_VAR",
    "MANUAL",
    "SCHEMA_VERSION",
    "BestSoFar",
    "CheckSummary",
    "ImportSummary",
    "MergeSummary",
    "NewTrial",
    "PostgresStore",
    "Rank",
    "RecordStore",
    "RunInfo",
    "RunStatus",
    "RunSummary",
    "SQLiteStore",
    "TrialRecord",
    "TrialRow",
    "check_unchecked",
    "check_work_dir",
    "confirmation_rows",
    "copy_records",
    "copy_to_file",
    "count_trials",
    "default_store",
    "default_store_path",
    "environment",
    "export_csv",
    "export_jsonl",
    "export_metaschedule",
    "get_store",
    "import_metaschedule",
    "is_postgres_url",
    "is_record_database",
    "is_remeasurement",
    "merge_records",
    "name_trial",
    "remeasurements",
    "stored_as_imported",
    "summarize_run",
    "trace_hash",
    "trial_name",
]
