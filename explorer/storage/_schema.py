"""The record database's schema: its identity in the SQLite header and its forward migrations."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

APPLICATION_ID = 0x53457852
"""``PRAGMA application_id`` of every record database (ASCII ``SExR``), so that a foreign SQLite
file is recognised before anything is written to it."""

APPLICATION = "schedule-explorer"
"""The ``application`` row of the ``meta`` table of a PostgreSQL record database (which has no
``application_id``): tables of another application are recognised before anything is written."""

# Forward-only migrations: MIGRATIONS[v] takes a version-v database to version v + 1. They run
# inside the opening transaction, so a file is always at exactly one version. Never edit a
# released migration; append a new one.


def _migrate_to_v1(conn: sqlite3.Connection) -> None:
    statements = (
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            workload_key TEXT NOT NULL,
            workload_json TEXT NOT NULL,
            target_key TEXT NOT NULL,
            target_json TEXT NOT NULL,
            strategy TEXT NOT NULL,
            settings_json TEXT NOT NULL,
            environment_json TEXT NOT NULL,
            started_at REAL NOT NULL,
            ended_at REAL,
            status TEXT NOT NULL DEFAULT 'running')""",
        """CREATE TABLE trials (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            workload_key TEXT NOT NULL,
            target_key TEXT NOT NULL,
            trace_json TEXT NOT NULL,
            decisions_json TEXT,
            status TEXT NOT NULL,
            run_secs_json TEXT NOT NULL,
            median_secs REAL,
            gflops REAL,
            flops INTEGER NOT NULL,
            build_secs REAL,
            error_msg TEXT,
            predicted_json TEXT NOT NULL,
            created_at REAL NOT NULL,
            UNIQUE (run_id, seq))""",
        # (run_id, seq) is covered by the UNIQUE constraint: per-run listing, max(seq) and the
        # best-so-far window all walk that index.
        "CREATE INDEX runs_by_workload ON runs (workload_key, target_key)",
        "CREATE INDEX trials_by_workload ON trials (workload_key, target_key)",
        # Partial: best() only ever looks at successful trials, already sorted by latency.
        "CREATE INDEX trials_best ON trials (workload_key, target_key, median_secs) "
        "WHERE status = 'ok'",
        # Append-only is enforced by the database itself, so that no code path (or a stray
        # sqlite3 shell) can rewrite history.
        "CREATE TRIGGER trials_no_update BEFORE UPDATE ON trials "
        "BEGIN SELECT RAISE(ABORT, 'trials are append-only'); END",
        "CREATE TRIGGER trials_no_delete BEFORE DELETE ON trials "
        "BEGIN SELECT RAISE(ABORT, 'trials are append-only'); END",
        "CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs "
        "BEGIN SELECT RAISE(ABORT, 'runs are append-only'); END",
        "CREATE TRIGGER runs_fixed_columns BEFORE UPDATE OF id, workload_key, workload_json, "
        "target_key, target_json, strategy, settings_json, environment_json, started_at ON runs "
        "BEGIN SELECT RAISE(ABORT, 'only a run''s ended_at and status may change'); END",
    )
    for sql in statements:
        conn.execute(sql)


def _migrate_to_v2(conn: sqlite3.Connection) -> None:
    # MeasureResult.num_threads was not stored by v1; old trials read back as None.
    conn.execute("ALTER TABLE trials ADD COLUMN num_threads INTEGER")


def _migrate_to_v3(conn: sqlite3.Connection) -> None:
    # Step 1. A run's owner (host, pid, process start time) and heartbeat: a `running` run whose
    # owner is gone (kill -9) reads as `interrupted`, and a second process cannot resume a run
    # its owner still holds (the owner columns are the lease). active_secs is the run's time
    # spent searching over all its sessions, so a wall-clock budget survives a resume.
    for sql in (
        "ALTER TABLE runs ADD COLUMN owner_host TEXT",
        "ALTER TABLE runs ADD COLUMN owner_pid INTEGER",
        "ALTER TABLE runs ADD COLUMN owner_started_at REAL",
        "ALTER TABLE runs ADD COLUMN heartbeat_at REAL",
        "ALTER TABLE runs ADD COLUMN active_secs REAL NOT NULL DEFAULT 0",
        # A re-measurement (the Tuner re-times its best candidates at the end of a run) is a
        # measurement, not a trial of the search: flagged so that counts and budgets skip it.
        "ALTER TABLE trials ADD COLUMN is_remeasure INTEGER NOT NULL DEFAULT 0",
    ):
        conn.execute(sql)
    # Step 2. Flag the re-measurements already stored: a trial whose trace appeared earlier in
    # its run (the definition explorer.analysis uses; strategies never propose a point twice).
    # The append-only trigger is lifted for this one-time fix of a column that did not exist.
    seen: set[tuple[int, int]] = set()
    again: list[tuple[int]] = []
    rows = conn.execute("SELECT id, run_id, CAST(trace_json AS BLOB) FROM trials ORDER BY id")
    for trial_id, run_id, trace in rows:
        key = (run_id, hash(bytes(trace)))
        if key in seen:
            again.append((trial_id,))
        seen.add(key)
    if again:
        conn.execute("DROP TRIGGER trials_no_update")
        conn.executemany("UPDATE trials SET is_remeasure = 1 WHERE id = ?", again)
        conn.execute(
            "CREATE TRIGGER trials_no_update BEFORE UPDATE ON trials "
            "BEGIN SELECT RAISE(ABORT, 'trials are append-only'); END"
        )


def _migrate_to_v4(conn: sqlite3.Connection) -> None:
    # MeasureResult.device: which fleet device measured a trial (`key@host:port`); NULL for
    # this machine's own measurements, which all trials before v4 are.
    conn.execute("ALTER TABLE trials ADD COLUMN device TEXT")


def _migrate_to_v5(conn: sqlite3.Connection) -> None:
    # "noisy" stops being a status: a correct kernel whose repeats spread wide is OK, its spread
    # a property of the reading (explorer.types.LEGACY_NOISY). Its rows become 'ok', so that
    # every query ranks them as the code does; the append-only trigger is lifted for this
    # one-time change of meaning, as in v3.
    conn.execute("DROP TRIGGER trials_no_update")
    conn.execute("UPDATE trials SET status = 'ok' WHERE status = 'noisy'")
    conn.execute(
        "CREATE TRIGGER trials_no_update BEFORE UPDATE ON trials "
        "BEGIN SELECT RAISE(ABORT, 'trials are append-only'); END"
    )


# Version 6: imported models (explorer.model). A model is stored with its ONNX file (any process
# on the database can build the network) and its tasks as JSON (read whole, never queried one by
# one; their trials are ordinary trials of `task` workloads). model_runs links the runs that tuned
# a model's tasks to the model tune they belong to; model_races keeps each whole-network race.
MODEL_TABLES = (
    """CREATE TABLE models (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        source_sha256 TEXT NOT NULL,
        source BLOB NOT NULL,
        inputs_json TEXT NOT NULL,
        tasks_json TEXT NOT NULL,
        target_json TEXT NOT NULL,
        created_at REAL NOT NULL)""",
    """CREATE TABLE model_runs (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id),
        model_id INTEGER NOT NULL REFERENCES models(id),
        task TEXT NOT NULL,
        tune TEXT NOT NULL)""",
    """CREATE TABLE model_races (
        id INTEGER PRIMARY KEY,
        model_id INTEGER NOT NULL REFERENCES models(id),
        tune TEXT,
        trials INTEGER NOT NULL,
        entries_json TEXT NOT NULL,
        environment_json TEXT NOT NULL,
        created_at REAL NOT NULL)""",
)


def _migrate_to_v6(conn: sqlite3.Connection) -> None:
    for sql in MODEL_TABLES:
        conn.execute(sql)


def _migrate_to_v7(conn: sqlite3.Connection) -> None:
    # MeasureResult.cache_flush: what each sample found flushed from the caches; NULL for the
    # trials before v7, which all were timed with nothing flushed.
    conn.execute("ALTER TABLE trials ADD COLUMN cache_flush TEXT")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _migrate_to_v1,
    _migrate_to_v2,
    _migrate_to_v3,
    _migrate_to_v4,
    _migrate_to_v5,
    _migrate_to_v6,
    _migrate_to_v7,
)
SCHEMA_VERSION = len(MIGRATIONS)
