"""The embedded record database: one SQLite file in WAL mode, shared by threads and processes."""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from explorer._process import ProcessIdentity
from explorer.errors import StoreError
from explorer.measure._base import Candidate
from explorer.storage._base import (
    BestSoFar,
    NewTrial,
    Rank,
    RecordStore,
    RunInfo,
    TrialRecord,
    TrialRow,
    effective_status,
)
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
from explorer.storage._files import backup as _backup
from explorer.storage._files import checkpoint, ensure_intact, explain
from explorer.storage._lease import OWNER_COLUMNS, beat, claim, hold, owner_of, release
from explorer.storage._open import open_database
from explorer.storage._schema import SCHEMA_VERSION  # noqa: F401 (explorer.storage re-exports it)
from explorer.target import Target
from explorer.types import JSON, MeasureStatus
from explorer.workloads import Workload

logger = logging.getLogger(__name__)

END_STATUSES = ("finished", "cancelled", "interrupted", "failed")
_TRIAL_COLUMNS = (
    "id, run_id, seq, trace_json, decisions_json, status, run_secs_json, build_secs, error_msg, "
    "flops, num_threads, predicted_json, created_at, is_remeasure"
)
# The trace is read as bytes and only hashed: it is stored in canonical form (``_codec.dumps``),
# so hashing the stored text gives ``trace_hash(candidate.trace)`` without decoding it.
_ROW_COLUMNS = (
    "id, run_id, seq, status, median_secs, run_secs_json, predicted_json, decisions_json, "
    "CAST(trace_json AS BLOB), created_at, is_remeasure"
)
_ROWS_PER_READ = 2000  # rows read per lock hold: a writer never waits for a whole table
_RUN_COLUMNS = (
    "id, workload_json, target_json, strategy, settings_json, environment_json, started_at, "
    f"ended_at, status, {OWNER_COLUMNS}"
)


class SQLiteStore(RecordStore):
    """A ``RecordStore`` in one SQLite file (the embedded default).

    Several processes may read and write the same file at once: the file is in WAL mode, writers
    wait up to ``timeout_secs`` for each other, and every ``add_trials`` batch is one
    ``BEGIN IMMEDIATE`` transaction, so a process killed mid-batch leaves the previous batches
    intact and none of the interrupted one. Commits use ``synchronous=NORMAL``: they survive the
    process crashing; a power cut may roll back the last commits but never corrupts the file.

    Within one process, one connection is shared by all threads and guarded by a lock. Queries
    take milliseconds, and the alternative for ``":memory:"`` (per-thread connections to a
    shared-cache database) fails with ``SQLITE_LOCKED`` instead of waiting.

    A file that is not SQLite, or is SQLite but not a record database, or has a schema newer than
    this code, raises ``StoreError`` and is left untouched. Older schemas are migrated forward.
    Before its first write, a store checks the file (SQLite's ``quick_check``) and refuses a
    damaged one, untouched. A clean ``close`` merges the ``-wal`` file into the database file;
    ``backup`` copies a live database safely.

    ``read_only=True`` opens an existing file without ever writing it (not even its journal
    mode), so a database in a read-only folder can be read; a missing file is an error then, and
    writing raises ``StoreError``.

    Subscribers see only the batches written through this object, not other processes' writes.

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
        self._lock = threading.RLock()
        self._subscribers: dict[int, Callable[[list[TrialRecord]], None]] = {}
        self._next_token = 0
        # Runs never change workload or target, so their decoded objects can be cached forever.
        self._run_objects: dict[int, tuple[Workload, Target]] = {}
        self._workloads: dict[str, Workload] = {}
        self._targets: dict[str, Target] = {}
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
                ensure_intact(conn, self._path)
                self._is_intact = True

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: the write lock is taken up front, so the
        ``max(seq) + 1`` read inside it cannot race another process."""
        with self._lock:
            conn = self._connection()
            if self._read_only:
                raise StoreError(f"{self!r} was opened read-only; it cannot store anything")
            if not self._is_intact:
                ensure_intact(conn, self._path)  # a damaged file is refused, never written
                self._is_intact = True
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
            cur = conn.execute(
                "INSERT INTO runs (workload_key, workload_json, target_key, target_json, "
                "strategy, settings_json, environment_json, started_at, owner_host, owner_pid, "
                "owner_started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    workload.key(),
                    workload_json,
                    target.key(),
                    target_json,
                    strategy,
                    settings_json,
                    env_json,
                    now,
                    me.host,
                    me.pid,
                    me.started_at,
                    now,
                ),
            )
            run_id = int(cur.lastrowid or 0)
        hold(self._path, run_id)
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
        release(self._path, run_id)
        return self.get_run(run_id)

    def claim_run(self, run_id: int) -> RunInfo:
        with self._writing() as conn:
            claim(conn, self._path, run_id, ProcessIdentity.current())
        return self.get_run(run_id)

    def heartbeat(self, run_id: int, active_secs: float) -> None:
        with self._writing() as conn:
            beat(conn, run_id, ProcessIdentity.current(), active_secs)

    def get_run(self, run_id: int) -> RunInfo:
        with self._reading() as conn:
            sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?"
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
            rows = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs{where} ORDER BY id", args)
            rows = rows.fetchall()
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
            ids = []
            for i, row in enumerate(rows):
                cur = conn.execute(
                    "INSERT INTO trials (run_id, seq, workload_key, target_key, trace_json, "
                    "decisions_json, status, run_secs_json, median_secs, gflops, flops, "
                    "build_secs, error_msg, num_threads, predicted_json, created_at, "
                    "is_remeasure) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run_id, first_seq + i, *keys, *row, now, int(trials[i].is_remeasure)),
                )
                ids.append(int(cur.lastrowid or 0))
        records = [
            snapshot(trial_id, run, first_seq + i, rows[i], now, trials[i].is_remeasure)
            for i, trial_id in enumerate(ids)
        ]
        self._notify(records)
        return records

    def get_trial(self, trial_id: int) -> TrialRecord:
        with self._reading() as conn:
            row = conn.execute(
                f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE id = ?", (trial_id,)
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
        sql = f"SELECT {_TRIAL_COLUMNS} FROM trials{where} ORDER BY "
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
            f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE workload_key = ? AND target_key = ? "
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
        """``trials(...)`` as ``TrialRow``\\ s: no trace is decoded, each is only hashed.

        Read in chunks of ``_ROWS_PER_READ``, each under the lock, so a search storing trials
        meanwhile is not held up by a long read. Trials committed while the chunks are read may
        be included (ids and seqs only grow, so none is seen twice).
        """
        where, args = filters(run_id=run_id, workload=workload, target=target, status=status)
        # Keyset pagination along an index, so no chunk sorts: within a run by seq (the
        # (run_id, seq) index), else by id. Both are insertion order.
        key, index = ("seq", 2) if run_id is not None else ("id", 0)
        where = f"{where} AND {key} > ?" if where else f" WHERE {key} > ?"
        sql = f"SELECT {_ROW_COLUMNS} FROM trials{where} ORDER BY {key} LIMIT {_ROWS_PER_READ}"
        out: list[TrialRow] = []
        last = -1
        while True:
            with self._reading() as conn:
                chunk = conn.execute(sql, [*args, last]).fetchall()
            with gc_paused(), self._decoding():  # the rows are acyclic: see _codec.gc_paused
                out += [decode_row(row) for row in chunk]
            if len(chunk) < _ROWS_PER_READ:
                return out
            last = chunk[-1][index]

    def count_trials(self, *, run_id: int | None = None, remeasures: bool = True) -> int:
        where, args = filters(run_id=run_id)
        if not remeasures:
            where += " AND is_remeasure = 0" if where else " WHERE is_remeasure = 0"
        with self._reading() as conn:
            (count,) = conn.execute(f"SELECT count(*) FROM trials{where}", args).fetchone()
        return int(count)

    def best(self, workload: Workload, target: Target, k: int = 1) -> list[TrialRecord]:
        if k < 0:
            raise ValueError(f"k must be >= 0 (got {k})")
        # The literal status = 'ok' lets SQLite use the partial index trials_best.
        sql = (
            f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE workload_key = ? AND target_key = ? "
            "AND status = 'ok' AND median_secs IS NOT NULL ORDER BY median_secs, id LIMIT ?"
        )
        with self._reading() as conn:
            rows = conn.execute(sql, (workload.key(), target.key(), k)).fetchall()
        return self._decode_trials(rows)

    def rank(self, workload: Workload, target: Target, secs: float | None) -> Rank:
        # The literal status = 'ok' lets SQLite use the partial index trials_best.
        sql = (
            "SELECT count(*), min(median_secs), count(CASE WHEN median_secs < ? THEN 1 END) "
            "FROM trials WHERE workload_key = ? AND target_key = ? AND status = 'ok' "
            "AND median_secs IS NOT NULL AND is_remeasure = 0"
        )
        with self._reading() as conn:
            num_ok, best, faster = conn.execute(
                sql, (math.inf if secs is None else secs, workload.key(), target.key())
            ).fetchone()
        return Rank(1 + int(faster), int(num_ok), best)

    def best_so_far(self, run_id: int) -> BestSoFar:
        started_at = self.get_run(run_id).started_at
        # Failures count as +inf (9e999 is SQLite's spelling of it), so the curve stays at inf
        # until the first success and every seq has a point.
        sql = (
            "SELECT seq, created_at, MIN(CASE WHEN status = 'ok' AND median_secs IS NOT NULL "
            "THEN median_secs ELSE 9e999 END) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) "
            "FROM trials WHERE run_id = ? ORDER BY seq"
        )
        with self._reading() as conn:
            rows = conn.execute(sql, (run_id,)).fetchall()
        return BestSoFar(
            run_id=run_id,
            seq=tuple(int(r[0]) for r in rows),
            elapsed_secs=tuple(float(r[1]) - started_at for r in rows),
            best_secs=tuple(float(r[2]) for r in rows),
        )

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
                    f"SELECT {_RUN_COLUMNS} FROM runs WHERE id IN ({marks})", missing
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
