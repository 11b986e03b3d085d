"""Whole databases copied between SQL stores: into an empty one with every id kept
(``explorer backup``: ``copy_into``), or merged under new ids, a run already there extended
with its newer trials only (``explorer import``: ``merge_into``); the models, their runs and
races with them. Each is one transaction,
through the connection hooks ``SQLRecordStore`` keeps for this package (``_reading``,
``_writing``, ``_insert_all``, ``_restored``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from explorer.errors import StoreError
from explorer.storage._models import copy_models
from explorer.storage._sqlstore import (
    ALL_RUN_COLUMNS,
    ALL_TRIAL_COLUMNS,
    SQLRecordStore,
    insert_sql,
)

# A run is the same run in two databases when these agree (``merge_into``).
_IDENTITY = "workload_key, target_key, strategy, settings_json, environment_json, started_at"
_IDENTITY_INDEXES = tuple(ALL_RUN_COLUMNS.split(", ").index(c) for c in _IDENTITY.split(", "))


def copy_into(dest: SQLRecordStore, source: SQLRecordStore) -> tuple[int, int]:
    """Copy every run and trial of ``source`` into ``dest``, which must hold no run, as
    they are: ids, seqs, times, statuses and owners. One transaction: all or nothing.

    What ``source`` had committed when the copy started is copied (a run or trial stored
    meanwhile may be left out). Returns how many runs and trials were copied.
    """
    last_ids = _last_ids(source)
    with dest._writing() as conn:
        (held,) = conn.execute("SELECT count(*) FROM runs").fetchone()
        if held:
            raise StoreError(
                f"{dest._location_shown()} already holds {held} run(s): records are copied "
                "into an empty database only (they keep their ids)"
            )
        counts = []
        for table in ("runs", "trials"):
            insert, count = insert_sql(table, with_id=True), 0
            for rows in _chunks(source, table, last_ids):
                dest._insert_all(conn, insert, rows)
                count += len(rows)
            dest._restored(conn, table)
            counts.append(count)
        with source._reading() as src:
            copy_models(conn, src, None)
        for table in ("models", "model_races"):
            dest._restored(conn, table)
    return counts[0], counts[1]


def merge_into(dest: SQLRecordStore, source: SQLRecordStore) -> tuple[int, int, int]:
    """Add the runs and trials of ``source`` that ``dest`` lacks, under new ids.

    A run of ``source`` is one ``dest`` has when it started at the same moment with the
    same workload, target, strategy, settings and environment (it was merged before); of
    such a run only the trials after ``dest``'s last ``seq`` are added (the run went on
    in ``source``). Everything else is kept as it is (seqs, times, statuses, owners), so
    merging the same database twice adds nothing. One transaction: all or nothing.

    Returns:
        Runs added, trials added, and runs that ``dest`` had already.
    """
    last_ids = _last_ids(source)
    with dest._writing() as conn:
        known = {
            tuple(row[1:]): int(row[0])
            for row in conn.execute(f"SELECT id, {_IDENTITY} FROM runs").fetchall()
        }
        seqs = conn.execute("SELECT run_id, MAX(seq) FROM trials GROUP BY run_id").fetchall()
        last_seq = {int(run_id): int(seq) for run_id, seq in seqs}
        new_ids: dict[int, int] = {}
        added_runs = added_trials = 0
        for rows in _chunks(source, "runs", last_ids):
            for row in rows:
                key = tuple(row[i] for i in _IDENTITY_INDEXES)
                if key not in known:
                    (known[key],) = dest._insert_all(conn, insert_sql("runs"), [row[1:]])
                    added_runs += 1
                new_ids[int(row[0])] = known[key]
        for rows in _chunks(source, "trials", last_ids):
            fresh = [
                (new_ids[row[1]], *row[2:])
                for row in rows
                if row[2] > last_seq.get(new_ids[row[1]], -1)
            ]
            dest._insert_all(conn, insert_sql("trials"), fresh)
            added_trials += len(fresh)
        with source._reading() as src:
            copy_models(conn, src, new_ids)
    return added_runs, added_trials, len(new_ids) - added_runs


def _chunks(
    source: SQLRecordStore, table: str, last_ids: tuple[int, int]
) -> Iterator[list[tuple[Any, ...]]]:
    """Every column of the rows of ``table`` up to ``last_ids`` (runs, trials), by id."""
    last_run, last_trial = last_ids
    bounds: tuple[int, ...]
    if table == "runs":
        columns, more, bounds = ALL_RUN_COLUMNS, "", (last_run,)
    else:  # a trial stored after the copy began may belong to a run that began after it
        columns, more, bounds = ALL_TRIAL_COLUMNS, "AND run_id <= ? ", (last_trial, last_run)
    sql = f"SELECT {columns} FROM {table} WHERE id > ? AND id <= ? {more}ORDER BY id LIMIT ?"
    after = 0
    while True:
        with source._reading() as conn:
            rows = [tuple(r) for r in conn.execute(sql, (after, *bounds, 2000)).fetchall()]
        if not rows:
            return
        if table == "trials":  # is_remeasure: SQLite's 0/1, PostgreSQL's boolean
            rows = [(*row[:-3], bool(row[-3]), *row[-2:]) for row in rows]
        yield rows
        after = int(rows[-1][0])


def _last_ids(source: SQLRecordStore) -> tuple[int, int]:
    with source._reading() as conn:
        (runs,) = conn.execute("SELECT COALESCE(MAX(id), 0) FROM runs").fetchone()
        (trials,) = conn.execute("SELECT COALESCE(MAX(id), 0) FROM trials").fetchone()
    return int(runs), int(trials)
