"""The record model in SQL, shared by the SQLite and the PostgreSQL stores.

Both keep the same tables (``runs``, ``trials``) with the same columns, so every query is written
once here, in SQLite's spelling (``?`` placeholders); the PostgreSQL store's connection adapter
translates the placeholders. A subclass provides the connection (``_reading``/``_writing``), the
two expressions that differ (``_INF_SQL``, ``_TRACE_BYTES_SQL``) and its own way of opening,
checking and closing the database.
"""

from __future__ import annotations

import abc
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from explorer._process import ProcessIdentity
from explorer.core import (
    BestSoFar,
    Candidate,
    ModelRace,
    ModelRecord,
    NewTrial,
    Rank,
    RecordStore,
    RunInfo,
    TrialRecord,
    TrialRow,
    effective_status,
)
from explorer.storage import _models as model_sql
from explorer.storage._codec import (
    GC_PAUSE_ROWS,
    decode_row,
    decode_trial,
    dumps,
    encode_trial,
    filters,
    gc_paused,
    snapshot,
)
from explorer.storage._environment import environment as _environment
from explorer.storage._lease import (
    OWNER_COLUMNS,
    Connection,
    beat,
    claim,
    hold,
    owner_of,
    release,
)
from explorer.target import Target
from explorer.types import JSON, MeasureStatus
from explorer.workloads import Workload

logger = logging.getLogger(__name__)

END_STATUSES = ("finished", "cancelled", "interrupted", "failed")
RUN_COLUMNS = (
    "id, workload_json, target_json, strategy, settings_json, environment_json, started_at, "
    f"ended_at, status, {OWNER_COLUMNS}"
)
TRIAL_COLUMNS = (
    "id, run_id, seq, trace_json, decisions_json, status, run_secs_json, build_secs, error_msg, "
    "flops, num_threads, predicted_json, created_at, is_remeasure, device, cache_flush"
)
# Every stored column of the two tables, in one order: what a copy between stores moves.
ALL_RUN_COLUMNS = (
    "id, workload_key, workload_json, target_key, target_json, strategy, settings_json, "
    f"environment_json, started_at, ended_at, status, {OWNER_COLUMNS}"
)
# (is_remeasure third to last in ALL_TRIAL_COLUMNS: ``_sqlcopy`` relies on it)
ALL_TRIAL_COLUMNS = (
    "id, run_id, seq, workload_key, target_key, trace_json, decisions_json, status, "
    "run_secs_json, median_secs, gflops, flops, build_secs, error_msg, num_threads, "
    "predicted_json, created_at, is_remeasure, device, cache_flush"
)
_INSERT_RUN = (
    "INSERT INTO runs (workload_key, workload_json, target_key, target_json, strategy, "
    "settings_json, environment_json, started_at, owner_host, owner_pid, owner_started_at, "
    "heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
_INSERT_TRIAL = (
    "INSERT INTO trials (run_id, seq, workload_key, target_key, trace_json, decisions_json, "
    "status, run_secs_json, median_secs, gflops, flops, build_secs, error_msg, num_threads, "
    "predicted_json, created_at, is_remeasure, device, cache_flush) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)


def insert_sql(table: str, *, with_id: bool = False) -> str:
    """``INSERT`` of every column of ``table`` (``ALL_..._COLUMNS``), the id only if asked."""
    columns = ALL_RUN_COLUMNS if table == "runs" else ALL_TRIAL_COLUMNS
    if not with_id:
        columns = columns.removeprefix("id, ")
    marks = ", ".join("?" * (columns.count(",") + 1))
    return f"INSERT INTO {table} ({columns}) VALUES ({marks}) RETURNING id"


class SQLRecordStore(RecordStore):
    """A ``RecordStore`` over the ``runs`` and ``trials`` tables; see ``SQLiteStore`` and
    ``PostgresStore``.

    Within one process, one connection is shared by all threads and guarded by ``_lock``. Every
    write is one transaction of ``_writing``, which a subclass must make exclusive among writers
    (SQLite's ``BEGIN IMMEDIATE``, a table lock in PostgreSQL), so that the ``max(seq) + 1`` read
    inside ``add_trials`` and the check-and-take of ``claim_run`` cannot race another process.
    """

    _INF_SQL = "9e999"  # +inf as an SQL literal
    _TRACE_BYTES_SQL = "CAST(trace_json AS BLOB)"  # the stored trace text as bytes, to hash
    _ROWS_PER_READ = 2000  # rows read per lock hold: a writer never waits for a whole table

    def __init__(self, location: str) -> None:
        self._location = location  # the file or URL: names the database in messages and leases
        self._lock = threading.RLock()
        self._subscribers: dict[int, Callable[[list[TrialRecord]], None]] = {}
        self._next_token = 0
        # Runs never change workload or target, so their decoded objects can be cached forever.
        self._run_objects: dict[int, tuple[Workload, Target]] = {}
        self._workloads: dict[str, Workload] = {}
        self._targets: dict[str, Target] = {}

    # -- what a subclass provides -------------------------------------------------------------
    @abc.abstractmethod
    def _reading(self) -> AbstractContextManager[Connection]:
        """The connection, under the lock, for reads; database errors become ``StoreError``."""

    @abc.abstractmethod
    def _writing(self) -> AbstractContextManager[Connection]:
        """One exclusive write transaction, committed on exit (rolled back on an error)."""

    @contextmanager
    def _decoding(self) -> Iterator[None]:
        """Around decoding what was read (the SQLite store checks for damage there)."""
        yield

    def _rows_per_read(self) -> int:
        return self._ROWS_PER_READ

    def _inserted(self, conn: Connection, run_id: int, ids: list[int]) -> None:
        """Called inside ``add_trials``' transaction after its inserts (optional hook)."""

    def _insert_all(self, conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> list[int]:
        """Run ``sql`` (an ``INSERT ... RETURNING id``) once per row; the new ids in order."""
        return [int(conn.execute(sql, row).fetchone()[0]) for row in rows]

    # -- runs ---------------------------------------------------------------------------------
    def create_run(
        self,
        workload: Workload,
        target: Target,
        strategy: str,
        *,
        settings: Mapping[str, JSON] | None = None,
        environment: Mapping[str, JSON] | None = None,
    ) -> RunInfo:
        if not isinstance(workload, Workload):
            raise TypeError(f"workload must be a Workload (got {type(workload).__name__})")
        if not isinstance(target, Target):
            raise TypeError(f"target must be a Target (got {type(target).__name__})")
        if not isinstance(strategy, str) or not strategy:
            raise ValueError(f"strategy must be a non-empty string (got {strategy!r})")
        settings_json = dumps(dict(settings or {}), "settings")
        env_json = dumps(dict(_environment() if environment is None else environment), "env")
        workload_json = dumps(workload.to_json(), "workload")
        target_json = dumps(target.to_json(), "target")
        now = time.time()
        me = ProcessIdentity.current()  # the creator owns the run until finish_run
        with self._writing() as conn:
            (run_id,) = conn.execute(
                _INSERT_RUN,
                (workload.key(), workload_json, target.key(), target_json, strategy,
                 settings_json, env_json, now, me.host, me.pid, me.started_at, now),
            ).fetchone()  # fmt: skip
        hold(self._location, int(run_id))
        return self._decode_run(
            (run_id, workload_json, target_json, strategy, settings_json, env_json, now, None,
             "running", me.host, me.pid, me.started_at, now, 0.0)
        )  # fmt: skip

    def finish_run(self, run_id: int, status: str = "finished") -> RunInfo:
        """Mark a run ended; ``ValueError`` for an unknown status.

        A run that was resumed (trials added after it ended) may be finished again: its end
        time and status are overwritten, nothing else.
        """
        if status not in END_STATUSES:
            raise ValueError(f"finish_run status must be one of {END_STATUSES} (got {status!r})")
        with self._writing() as conn:
            sql = (
                "UPDATE runs SET ended_at = ?, status = ?, owner_host = NULL, owner_pid = NULL, "
                "owner_started_at = NULL WHERE id = ?"
            )
            if conn.execute(sql, (time.time(), str(status), run_id)).rowcount == 0:
                raise KeyError(run_id)
        release(self._location, run_id)
        return self.get_run(run_id)

    def claim_run(self, run_id: int) -> RunInfo:
        with self._writing() as conn:
            claim(conn, self._location, run_id, ProcessIdentity.current())
        return self.get_run(run_id)

    def heartbeat(self, run_id: int, active_secs: float) -> None:
        with self._writing() as conn:
            beat(conn, run_id, ProcessIdentity.current(), active_secs)

    def get_run(self, run_id: int) -> RunInfo:
        with self._reading() as conn:
            sql = f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?"
            row = conn.execute(sql, (run_id,)).fetchone()
        if row is None:
            raise KeyError(run_id)
        with self._decoding():
            return self._decode_run(row)

    def runs(
        self,
        *,
        workload: Workload | None = None,
        target: Target | None = None,
        strategy: str | None = None,
    ) -> list[RunInfo]:
        where, args = filters(workload=workload, target=target, strategy=strategy)
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM runs{where} ORDER BY id", args
            ).fetchall()
        with self._decoding():
            return [self._decode_run(row) for row in rows]

    # -- trials -------------------------------------------------------------------------------
    def add_trials(self, run_id: int, trials: Sequence[NewTrial]) -> list[TrialRecord]:
        """Store a batch in one transaction.

        Trials are stored against their run's workload and target: a trial whose workload or
        target key differs from the run's is refused, and returned records carry the run's
        ``Workload`` and ``Target`` objects (which may differ from the trial's in fields outside
        the key, such as a target's cache sizes or display name).

        Raises:
            KeyError: There is no run ``run_id``.
            ValueError: A trial's workload or target key differs from its run's, or its trace,
                decisions or predictions are not JSON-serialisable.
        """
        trials = list(trials)
        if not trials:
            return []
        run = self.get_run(run_id)
        rows = [encode_trial(run, i, trial) for i, trial in enumerate(trials)]
        now = time.time()
        keys = (run.workload.key(), run.target.key())
        with self._writing() as conn:
            (first_seq,) = conn.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM trials WHERE run_id = ?", (run_id,)
            ).fetchone()
            values = [
                (
                    run_id,
                    first_seq + i,
                    *keys,
                    *row,
                    now,
                    bool(trials[i].is_remeasure),
                    trials[i].result.device,
                    trials[i].result.cache_flush.value,
                )
                for i, row in enumerate(rows)
            ]
            ids = self._insert_all(conn, _INSERT_TRIAL, values)
            self._inserted(conn, run_id, ids)
        records = [
            snapshot(
                trial_id,
                run,
                first_seq + i,
                rows[i],
                now,
                trials[i].is_remeasure,
                trials[i].result.device,
                trials[i].result.cache_flush,
            )
            for i, trial_id in enumerate(ids)
        ]
        self._notify(records)
        return records

    def get_trial(self, trial_id: int) -> TrialRecord:
        with self._reading() as conn:
            row = conn.execute(
                f"SELECT {TRIAL_COLUMNS} FROM trials WHERE id = ?", (trial_id,)
            ).fetchone()
        if row is None:
            raise KeyError(trial_id)
        return self._decode_trials([row])[0]

    def trials(
        self,
        *,
        run_id: int | None = None,
        workload: Workload | None = None,
        target: Target | None = None,
        status: MeasureStatus | None = None,
        limit: int | None = None,
    ) -> list[TrialRecord]:
        where, args = filters(run_id=run_id, workload=workload, target=target, status=status)
        # Within a run, seq order is insertion order and follows the (run_id, seq) index.
        sql = f"SELECT {TRIAL_COLUMNS} FROM trials{where} ORDER BY "
        sql += "seq" if run_id is not None else "id"
        if limit is not None:
            if limit < 0:
                raise ValueError(f"limit must be >= 0 (got {limit})")
            sql += " LIMIT ?"
            args.append(limit)
        with self._reading() as conn:
            rows = conn.execute(sql, args).fetchall()
        return self._decode_trials(rows)

    def measurements_of(self, candidate: Candidate) -> list[TrialRecord]:
        # Traces are stored canonical: equal schedules have equal text, compared in place.
        sql = (
            f"SELECT {TRIAL_COLUMNS} FROM trials WHERE workload_key = ? AND target_key = ? "
            "AND trace_json = ? ORDER BY id"
        )
        key = (candidate.workload.key(), candidate.target.key(), dumps(candidate.trace, "trace"))
        with self._reading() as conn:
            rows = conn.execute(sql, key).fetchall()
        return self._decode_trials(rows)

    def trial_rows(
        self,
        *,
        run_id: int | None = None,
        workload: Workload | None = None,
        target: Target | None = None,
        status: MeasureStatus | None = None,
    ) -> list[TrialRow]:
        """``trials(...)`` as ``TrialRow``\\ s: no trace is decoded, each is only hashed (the
        stored trace is canonical text, so hashing it gives ``trace_hash(candidate.trace)``).

        Read in chunks, each under the lock, so a search storing trials meanwhile is not held up
        by a long read. Trials committed while the chunks are read may be included (ids and seqs
        only grow, so none is seen twice).
        """
        where, args = filters(run_id=run_id, workload=workload, target=target, status=status)
        # Keyset pagination along an index, so no chunk sorts: within a run by seq (the
        # (run_id, seq) index), else by id. Both are insertion order.
        key, index = ("seq", 2) if run_id is not None else ("id", 0)
        where = f"{where} AND {key} > ?" if where else f" WHERE {key} > ?"
        chunk_rows = self._rows_per_read()
        columns = (
            "id, run_id, seq, status, median_secs, run_secs_json, predicted_json, "
            f"decisions_json, {self._TRACE_BYTES_SQL}, created_at, is_remeasure, device"
        )
        sql = f"SELECT {columns} FROM trials{where} ORDER BY {key} LIMIT {chunk_rows}"
        out: list[TrialRow] = []
        last = -1
        while True:
            with self._reading() as conn:
                chunk = conn.execute(sql, [*args, last]).fetchall()
            with gc_paused(), self._decoding():  # the rows are acyclic: see _codec.gc_paused
                out += [decode_row(row) for row in chunk]
            if len(chunk) < chunk_rows:
                return out
            last = chunk[-1][index]

    def count_trials(self, *, run_id: int | None = None, remeasures: bool = True) -> int:
        where, args = filters(run_id=run_id)
        if not remeasures:
            where += " AND is_remeasure = ?" if where else " WHERE is_remeasure = ?"
            args.append(False)
        with self._reading() as conn:
            (count,) = conn.execute(f"SELECT count(*) FROM trials{where}", args).fetchone()
        return int(count)

    def best(self, workload: Workload, target: Target, k: int = 1) -> list[TrialRecord]:
        if k < 0:
            raise ValueError(f"k must be >= 0 (got {k})")
        # The literal status = 'ok' lets the database use the partial index trials_best.
        sql = (
            f"SELECT {TRIAL_COLUMNS} FROM trials WHERE workload_key = ? AND target_key = ? "
            "AND status = 'ok' AND median_secs IS NOT NULL ORDER BY median_secs, id LIMIT ?"
        )
        with self._reading() as conn:
            rows = conn.execute(sql, (workload.key(), target.key(), k)).fetchall()
        return self._decode_trials(rows)

    def rank(self, workload: Workload, target: Target, secs: float | None) -> Rank:
        # The literal status = 'ok' lets the database use the partial index trials_best.
        sql = (
            "SELECT count(*), min(median_secs), count(CASE WHEN median_secs < ? THEN 1 END) "
            "FROM trials WHERE workload_key = ? AND target_key = ? AND status = 'ok' "
            "AND median_secs IS NOT NULL AND is_remeasure = ?"
        )
        with self._reading() as conn:
            num_ok, best, faster = conn.execute(
                sql, (math.inf if secs is None else secs, workload.key(), target.key(), False)
            ).fetchone()
        return Rank(1 + int(faster), int(num_ok), best)

    def best_so_far(self, run_id: int) -> BestSoFar:
        started_at = self.get_run(run_id).started_at
        # Failures count as +inf, so the curve stays at inf until the first success and every
        # seq has a point.
        sql = (
            "SELECT seq, created_at, MIN(CASE WHEN status = 'ok' AND median_secs IS NOT NULL "
            f"THEN median_secs ELSE {self._INF_SQL} END) OVER (ORDER BY seq ROWS UNBOUNDED "
            "PRECEDING) FROM trials WHERE run_id = ? ORDER BY seq"
        )
        with self._reading() as conn:
            rows = conn.execute(sql, (run_id,)).fetchall()
        return BestSoFar(
            run_id=run_id,
            seq=tuple(int(r[0]) for r in rows),
            elapsed_secs=tuple(float(r[1]) - started_at for r in rows),
            best_secs=tuple(float(r[2]) for r in rows),
        )

    # -- models -------------------------------------------------------------------------------
    def add_model(self, model: ModelRecord, source: bytes) -> ModelRecord:
        if not isinstance(model, ModelRecord):
            raise TypeError(f"model must be a ModelRecord (got {type(model).__name__})")
        with self._writing() as conn:
            return model_sql.insert_model(conn, model, source)

    def models(self) -> list[ModelRecord]:
        with self._reading() as conn:
            return model_sql.select_models(conn)

    def model_source(self, model_id: int) -> bytes:
        with self._reading() as conn:
            return model_sql.select_source(conn, model_id)

    def link_model_run(self, model_id: int, run_id: int, task: str, tune: str) -> None:
        with self._writing() as conn:
            model_sql.insert_model_run(conn, model_id, run_id, task, tune)

    def model_runs(self, model_id: int) -> list[tuple[int, str, str]]:
        with self._reading() as conn:
            return model_sql.select_model_runs(conn, model_id)

    def add_model_race(self, race: ModelRace) -> ModelRace:
        with self._writing() as conn:
            return model_sql.insert_race(conn, race)

    def model_races(self, model_id: int) -> list[ModelRace]:
        with self._reading() as conn:
            return model_sql.select_races(conn, model_id)

    def _restored(self, conn: Connection, table: str) -> None:
        """Called after ``copy_into`` inserted rows with their ids into ``table`` (a hook)."""

    def _location_shown(self) -> str:
        """The database as messages name it."""
        return self._location

    # -- events -------------------------------------------------------------------------------
    def subscribe(self, callback: Callable[[list[TrialRecord]], None]) -> Callable[[], None]:
        if not callable(callback):
            raise TypeError(f"callback must be callable (got {callback!r})")
        with self._lock:
            token = self._next_token
            self._next_token += 1
            self._subscribers[token] = callback

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers.pop(token, None)

        return unsubscribe

    def _notify(self, records: list[TrialRecord]) -> None:
        with self._lock:
            callbacks = list(self._subscribers.values())
        for callback in callbacks:
            try:
                callback(list(records))  # a copy each: one subscriber cannot edit another's list
            except Exception:
                logger.exception("record store subscriber %r raised; ignored", callback)

    # -- decoding -----------------------------------------------------------------------------
    def _workload(self, text: str) -> Workload:
        workload = self._workloads.get(text)
        if workload is None:
            workload = self._workloads[text] = Workload.from_json(json.loads(text))
        return workload

    def _target(self, text: str) -> Target:
        target = self._targets.get(text)
        if target is None:
            target = self._targets[text] = Target.from_json(json.loads(text))
        return target

    def _decode_run(self, row: Sequence[Any]) -> RunInfo:
        (run_id, workload_json, target_json, strategy, settings, env, started, ended, status,
         *owner_row) = row  # fmt: skip
        workload, target = self._workload(workload_json), self._target(target_json)
        owner, heartbeat_at = owner_of(owner_row), owner_row[3]
        with self._lock:
            self._run_objects[int(run_id)] = (workload, target)
        return RunInfo(
            id=int(run_id),
            workload=workload,
            target=target,
            strategy=strategy,
            settings=json.loads(settings),
            environment=json.loads(env),
            started_at=float(started),
            ended_at=None if ended is None else float(ended),
            status=effective_status(status, owner, heartbeat_at),
            owner=owner,
            heartbeat_at=None if heartbeat_at is None else float(heartbeat_at),
            active_secs=float(owner_row[4] or 0.0),
        )

    def _objects_for(self, run_ids: Iterable[int]) -> dict[int, tuple[Workload, Target]]:
        with self._lock:
            missing = sorted(set(run_ids) - set(self._run_objects))
        if missing:
            marks = ",".join("?" * len(missing))
            with self._reading() as conn:
                rows = conn.execute(
                    f"SELECT {RUN_COLUMNS} FROM runs WHERE id IN ({marks})", missing
                ).fetchall()
            with self._decoding():
                for row in rows:
                    self._decode_run(row)
        with self._lock:
            return dict(self._run_objects)

    def _decode_trials(self, rows: Sequence[Sequence[Any]]) -> list[TrialRecord]:
        objects = self._objects_for({row[1] for row in rows})
        with self._decoding():
            if len(rows) < GC_PAUSE_ROWS:
                return [decode_trial(row, objects) for row in rows]
            with gc_paused():
                return [decode_trial(row, objects) for row in rows]
