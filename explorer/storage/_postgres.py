"""A record database shared by a team or a fleet: PostgreSQL through psycopg 3.

The tables and every query are the SQLite store's (``SQLRecordStore``), in PostgreSQL's types;
this module adds the connection, the schema's identity and creation, and live subscriptions to
other processes' trials (LISTEN/NOTIFY).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from explorer._urls import is_postgres_url, redact
from explorer.core import TrialRecord
from explorer.errors import StoreError
from explorer.storage._schema import APPLICATION, MODEL_TABLES, SCHEMA_VERSION
from explorer.storage._sqlstore import TRIAL_COLUMNS, SQLRecordStore

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

_LOCK_ID = 0x53457852  # the advisory lock that serialises creating the tables (SQLite's app id)
_WRITE_LOCK = "LOCK TABLE runs, trials IN SHARE ROW EXCLUSIVE MODE"
# Environment problems (the same command works once they are fixed: exit code 3), by SQLSTATE
# class or code: a connection lost, no resources, no privilege, a read-only server, a lock.
_ENVIRONMENT_STATES = ("08", "53", "57", "58", "42501", "25006", "55P03")


class ServerError(StoreError):
    """The PostgreSQL server cannot be reached or cannot serve the request now (unreachable,
    out of resources, permission denied, locked): the environment's fault, not the command's."""

    environment_problem = True


class PostgresStore(SQLRecordStore):
    """A ``RecordStore`` in a PostgreSQL database, for several hosts writing one database.

    It keeps the SQLite store's tables, in the schema that the connection's ``search_path``
    names first (``public`` unless the URL says ``?options=-csearch_path%3DNAME``), with the same
    guarantees: every ``add_trials`` batch is one transaction; writers from any number of
    processes and hosts are serialised by a table lock that readers never wait for, so ``seq``
    counts without gaps within a run and ids increase in commit order; trials are append-only
    (triggers refuse updates and deletes); one owner per run (``claim_run``).

    An empty database (no tables in that schema) gets the tables; a database of another
    application, or of a newer schema version, is refused untouched. ``read_only=True`` never
    writes (the session is read-only), and a database without the tables is an error then.

    Subscribers get the batches written through this object at once, on the writing thread, and
    the batches other processes write (on any host) shortly after their commit, on a listener
    thread (PostgreSQL's LISTEN/NOTIFY; started by the first ``subscribe``).

    A connection lost between calls is re-opened by the next call; the call during which it was
    lost raises ``StoreError`` (a batch being stored then is not stored).

    Args:
        url: ``postgresql://user[:password]@host[:port]/dbname[?param=value...]`` (libpq's URL;
            a missing password is looked up in ``~/.pgpass`` and ``$PGPASSWORD`` as usual).
        timeout_secs: How long connecting, and a writer waiting for another's transaction, may
            take.
        read_only: Only read: never create tables or write.

    Raises:
        StoreError: The URL is malformed; the server cannot be reached; it refuses the login or
            does not have the database; the database is not a record database or is too new.
    """

    _INF_SQL = "'Infinity'::float8"
    _TRACE_BYTES_SQL = "convert_to(trace_json, 'UTF8')"

    def __init__(self, url: str, *, timeout_secs: float = 30.0, read_only: bool = False) -> None:
        if not is_postgres_url(url):
            raise StoreError(f"{url!r} is not a PostgreSQL URL (postgresql://user@host/dbname)")
        super().__init__(url)
        self._url = url
        self.path = redact(url)
        """Where the database is: its URL, without the password (what messages show)."""
        self._read_only = bool(read_only)
        self._timeout_secs = float(timeout_secs)
        self._token = uuid.uuid4().hex  # tells this store's NOTIFYs from other processes'
        self._listener: _Listener | None = None
        self._closed = False
        self._conn: psycopg.Connection[Any] | None = self._connect(read_only=self._read_only)
        try:
            self._schema = self._prepare()
        except BaseException:
            self.close()
            raise

    @property
    def is_read_only(self) -> bool:
        return self._read_only

    def __repr__(self) -> str:
        return f"PostgresStore({self.path!r}{', read_only=True' * self._read_only})"

    # -- connecting -----------------------------------------------------------------------------
    def _connect(self, *, read_only: bool) -> psycopg.Connection[Any]:
        pg = _psycopg()
        try:
            params = pg.conninfo.conninfo_to_dict(self._url)
        except pg.Error as exc:
            raise StoreError(
                f"{self.path} is not a valid PostgreSQL URL ({_first_line(exc)}); the form is "
                "postgresql://user[:password]@host[:port]/dbname"
            ) from None
        params.setdefault("connect_timeout", max(1, round(self._timeout_secs)))
        params.setdefault("application_name", "schedule-explorer")
        try:
            conn: psycopg.Connection[Any] = pg.connect(autocommit=True, **params)
        except pg.Error as exc:
            raise _connect_error(self.path, exc) from None
        try:
            conn.execute(f"SET lock_timeout = {int(self._timeout_secs * 1000)}")
            if read_only:
                conn.execute("SET default_transaction_read_only = on")
        except pg.Error as exc:
            conn.close()
            raise self._explain(exc, "open") from None
        return conn

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._conn.broken:  # lost since the last call (a server restart, a network cut)
            self._conn.close()
            self._conn = self._connect(read_only=self._read_only)
        return self._conn

    def _explain(self, exc: Exception, doing: str) -> StoreError:
        """A ``StoreError`` in one sentence for a psycopg error raised while ``doing``."""
        state = getattr(exc, "sqlstate", None) or ""
        diag = getattr(exc, "diag", None)
        text = (diag.message_primary if diag is not None else None) or _first_line(exc)
        lost = not state and isinstance(exc, _psycopg().OperationalError)
        if state == "25006" or (self._read_only and "read-only transaction" in text):
            text = "the store was opened read-only; it cannot store anything"
        elif state == "55P03":
            text = f"the database is locked by another process ({text})"
        elif state.startswith(("08", "57P")) or lost:
            text = f"lost the connection to the server ({text})"
        message = f"cannot {doing} {self.path}: {text}"
        if state.startswith(_ENVIRONMENT_STATES) or lost:
            return ServerError(message)
        return StoreError(message)

    # -- opening: the tables' identity and creation ---------------------------------------------
    def _prepare(self) -> str:
        """Check (and if need be create) the tables; the schema they live in."""
        conn = self._connection()
        try:
            with conn.transaction():
                if not self._read_only:  # two processes creating the tables wait for each other
                    conn.execute(f"SELECT pg_advisory_xact_lock({_LOCK_ID})")
                schema, version = self._probe(conn)
                if version == SCHEMA_VERSION:
                    return schema
                if self._read_only:
                    if version == 0:
                        raise StoreError(
                            f"{self.path} holds no record database yet (no tables in schema "
                            f"{schema}): nothing was stored there"
                        )
                    raise StoreError(
                        f"{self.path} has schema version {version}, older than this code's "
                        f"{SCHEMA_VERSION}: open it once without read_only to upgrade it"
                    )
                if version == 0:
                    _create_tables(conn)
                    logger.info("%s: created the record tables in schema %s", self.path, schema)
                    return schema
                for upgrade in _UPGRADES[version - _CREATED_VERSION :]:
                    upgrade(conn)
                conn.execute(
                    "UPDATE meta SET value = %s WHERE key = 'schema_version'",
                    (str(SCHEMA_VERSION),),
                )
                logger.info("%s: upgraded from schema version %s", self.path, version)
                return schema
        except _psycopg().Error as exc:
            raise self._explain(exc, "open") from None

    def _probe(self, conn: psycopg.Connection[Any]) -> tuple[str, int]:
        """The schema and its record-table version: 0 when it has no tables; ``StoreError``
        for tables of another application and for a newer version."""
        (schema,) = conn.execute("SELECT current_schema()").fetchone() or (None,)
        if schema is None:
            raise StoreError(
                f"cannot open {self.path}: none of the schemas on its search_path exists"
            )
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1",
                (schema,),
            )
        ]
        if not tables:
            return schema, 0
        meta: dict[str, str] = {}
        if "meta" in tables:
            try:  # in a savepoint: another application's meta may have other columns
                with conn.transaction():
                    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            except _psycopg().Error:
                meta = {}
        if meta.get("application") != APPLICATION or "schema_version" not in meta:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise StoreError(
                f"{self.path} is a PostgreSQL database but not a Schedule Explorer record "
                f"database (schema {schema} holds {len(tables)} other tables: {shown}); it was "
                "left untouched (name an empty database, or another schema with "
                "?options=-csearch_path%3DNAME)"
            )
        version = int(meta["schema_version"])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this code supports "
                f"(version {SCHEMA_VERSION}); upgrade schedule-explorer to open it"
            )
        return schema, version

    # -- transactions ---------------------------------------------------------------------------
    @contextmanager
    def _reading(self) -> Iterator[_Adapter]:
        with self._lock:
            try:
                yield _Adapter(self._connection())
            except _psycopg().Error as exc:
                raise self._explain(exc, "read") from None

    @contextmanager
    def _writing(self) -> Iterator[_Adapter]:
        """One transaction holding the write lock: writers of every process take turns (as
        SQLite's ``BEGIN IMMEDIATE``), readers never wait."""
        with self._lock:
            conn = self._connection()
            if self._read_only:
                raise StoreError(f"{self!r} was opened read-only; it cannot store anything")
            try:
                with conn.transaction():
                    conn.execute(_WRITE_LOCK)
                    yield _Adapter(conn)
            except _psycopg().Error as exc:
                raise self._explain(exc, "write to") from None

    def _insert_all(self, conn: Any, sql: str, rows: list[tuple[Any, ...]]) -> list[int]:
        if not rows:
            return []
        # One pipelined round trip for the batch instead of one per row.
        with conn.cursor() as cur:
            cur.executemany(_translate(sql), rows, returning=True)
            ids = []
            while True:
                ids.append(int(cur.fetchone()[0]))
                if not cur.nextset():
                    return ids

    def _inserted(self, conn: Any, run_id: int, ids: list[int]) -> None:
        # Delivered to listeners when the transaction commits, never if it rolls back.
        payload = f"{self._token} {run_id} {ids[0]} {ids[-1]}"
        conn.execute("SELECT pg_notify(?, ?)", (self._channel, payload))

    @property
    def _channel(self) -> str:
        return f"explorer_trials:{self._schema}"

    def _restored(self, conn: Any, table: str) -> None:
        # Rows copied with their ids leave the identity sequence behind: the next insert must
        # follow them.
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
            f"(SELECT COALESCE(MAX(id), 0) + 1 FROM {table}), false)"
        )

    def _location_shown(self) -> str:
        return self.path

    def close(self) -> None:
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
            conn, self._conn = self._conn, None
        if listener is not None:
            listener.stop()
        if conn is not None:
            conn.close()

    # -- other processes' trials ----------------------------------------------------------------
    def subscribe(self, callback: Callable[[list[TrialRecord]], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(callback)
        with self._lock:
            if self._listener is None and not self._closed:
                # Listening before subscribe returns: no batch committed after it is missed.
                try:
                    self._listener = _Listener(self, self._connect(read_only=False))
                except BaseException:
                    unsubscribe()
                    raise
        return unsubscribe

    def _deliver(self, payload: str) -> None:
        """A batch another store committed (a NOTIFY payload): read it, hand it out."""
        token, run_id, first, last = payload.split()
        if token == self._token:
            return  # written through this object: its subscribers already have it
        with self._lock:
            if not self._subscribers or self._closed:
                return
        sql = f"SELECT {TRIAL_COLUMNS} FROM trials WHERE run_id = ? AND id BETWEEN ? AND ? "
        with self._reading() as conn:
            rows = conn.execute(sql + "ORDER BY id", (int(run_id), int(first), int(last)))
            records = self._decode_trials(rows.fetchall())
        if records:
            self._notify(records)


class _Adapter:
    """A psycopg connection that takes SQL in SQLite's spelling (``?`` placeholders)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        return self._conn.execute(_translate(sql), parameters)

    def cursor(self) -> psycopg.Cursor[Any]:
        return self._conn.cursor()


class _Listener:
    """A thread that LISTENs on the store's channel and hands other processes' batches to the
    store's subscribers; a lost connection is re-opened (batches committed meanwhile are missed
    by the subscribers, never by the database)."""

    def __init__(self, store: PostgresStore, conn: psycopg.Connection[Any]) -> None:
        self._store = store
        self._stop = threading.Event()
        self._conn = conn
        self._listen(conn)
        self._thread = threading.Thread(target=self._run, name="explorer-pg-listener", daemon=True)
        self._thread.start()

    def _listen(self, conn: psycopg.Connection[Any]) -> None:
        from psycopg import sql

        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._store._channel)))

    def _run(self) -> None:
        psycopg = _psycopg()
        while not self._stop.is_set():
            try:
                for note in self._conn.notifies(timeout=0.2):
                    try:
                        self._store._deliver(note.payload)
                    except Exception:
                        logger.exception("%s: delivering a batch to subscribers failed", self)
            except psycopg.Error as exc:
                if self._stop.is_set():
                    break
                logger.warning("%s: listening failed (%s); reconnecting", self._store.path, exc)
                self._stop.wait(1.0)
                try:
                    self._conn.close()
                    self._conn = self._store._connect(read_only=False)
                    self._listen(self._conn)
                except (StoreError, psycopg.Error) as again:
                    logger.warning("%s: cannot listen again yet: %s", self._store.path, again)
        self._conn.close()

    def stop(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)


# -- the tables ---------------------------------------------------------------------------------
# The SQLite schema (_schema.py) at version 3, in PostgreSQL's types: REAL is 4 bytes here, so
# times and seconds are float8; ids and counts are bigint; the JSON stays text (jsonb would
# reorder keys, and the stored text is hashed and compared as it is).
_CREATED_VERSION = 3
_TABLES = (
    "CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE runs (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        workload_key text NOT NULL, workload_json text NOT NULL,
        target_key text NOT NULL, target_json text NOT NULL,
        strategy text NOT NULL, settings_json text NOT NULL, environment_json text NOT NULL,
        started_at float8 NOT NULL, ended_at float8, status text NOT NULL DEFAULT 'running',
        owner_host text, owner_pid bigint, owner_started_at float8, heartbeat_at float8,
        active_secs float8 NOT NULL DEFAULT 0)""",
    """CREATE TABLE trials (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        run_id bigint NOT NULL REFERENCES runs (id), seq bigint NOT NULL,
        workload_key text NOT NULL, target_key text NOT NULL,
        trace_json text NOT NULL, decisions_json text, status text NOT NULL,
        run_secs_json text NOT NULL, median_secs float8, gflops float8, flops bigint NOT NULL,
        build_secs float8, error_msg text, num_threads integer, predicted_json text NOT NULL,
        created_at float8 NOT NULL, is_remeasure boolean NOT NULL DEFAULT false,
        UNIQUE (run_id, seq))""",
    "CREATE INDEX runs_by_workload ON runs (workload_key, target_key)",
    "CREATE INDEX trials_by_workload ON trials (workload_key, target_key)",
    "CREATE INDEX trials_best ON trials (workload_key, target_key, median_secs) "
    "WHERE status = 'ok'",
    # Append-only, enforced by the database as in SQLite (TRUNCATE included).
    "CREATE FUNCTION explorer_refuse() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION '%', TG_ARGV[0]; END $$",
    "CREATE TRIGGER trials_append_only BEFORE UPDATE OR DELETE ON trials FOR EACH ROW "
    "EXECUTE FUNCTION explorer_refuse('trials are append-only')",
    "CREATE TRIGGER trials_no_truncate BEFORE TRUNCATE ON trials "
    "EXECUTE FUNCTION explorer_refuse('trials are append-only')",
    "CREATE TRIGGER runs_no_delete BEFORE DELETE ON runs FOR EACH ROW "
    "EXECUTE FUNCTION explorer_refuse('runs are append-only')",
    "CREATE TRIGGER runs_no_truncate BEFORE TRUNCATE ON runs "
    "EXECUTE FUNCTION explorer_refuse('runs are append-only')",
    "CREATE TRIGGER runs_fixed_columns BEFORE UPDATE OF id, workload_key, workload_json, "
    "target_key, target_json, strategy, settings_json, environment_json, started_at ON runs "
    "FOR EACH ROW EXECUTE FUNCTION "
    "explorer_refuse('only a run''s ended_at and status may change')",
)


# Forward migrations from _CREATED_VERSION on, as in _schema.MIGRATIONS: _UPGRADES[i] takes
# version _CREATED_VERSION + i to the next. A new SQLite migration needs its twin here.
def _add_device(conn: psycopg.Connection[Any]) -> None:
    """Version 4 (SQLite's ``_migrate_to_v4``): the fleet device that measured a trial."""
    conn.execute("ALTER TABLE trials ADD COLUMN device text")


def _noisy_is_ok(conn: psycopg.Connection[Any]) -> None:
    """Version 5 (SQLite's ``_migrate_to_v5``): "noisy" trials are ``ok``."""
    conn.execute("ALTER TABLE trials DISABLE TRIGGER trials_append_only")
    conn.execute("UPDATE trials SET status = 'ok' WHERE status = 'noisy'")
    conn.execute("ALTER TABLE trials ENABLE TRIGGER trials_append_only")


def _add_models(conn: psycopg.Connection[Any]) -> None:
    """Version 6 (SQLite's ``_migrate_to_v6``): imported models, their runs and races."""
    for sql in MODEL_TABLES:
        sql = sql.replace(
            "id INTEGER PRIMARY KEY,", "id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
        )
        sql = sql.replace("INTEGER", "bigint").replace("REAL", "float8").replace("BLOB", "bytea")
        conn.execute(sql.encode())


def _add_cache_flush(conn: psycopg.Connection[Any]) -> None:
    """Version 7 (SQLite's ``_migrate_to_v7``): the caches a trial's samples found flushed."""
    conn.execute("ALTER TABLE trials ADD COLUMN cache_flush text")


_UPGRADES: tuple[Any, ...] = (_add_device, _noisy_is_ok, _add_models, _add_cache_flush)


def _create_tables(conn: psycopg.Connection[Any]) -> None:
    """Create the tables at the current version (inside the caller's transaction)."""
    for statement in _TABLES:
        conn.execute(statement.encode())
    for upgrade in _UPGRADES:
        upgrade(conn)
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('application', %s), ('schema_version', %s)",
        (APPLICATION, str(_CREATED_VERSION + len(_UPGRADES))),
    )


# -- helpers ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def _translate(sql: str) -> str:
    """SQLite's spelling to psycopg's: ``?`` placeholders become ``%s`` (``%`` is escaped)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(
            "a PostgreSQL database needs the psycopg package: "
            "pip install 'schedule-explorer[postgres]'"
        ) from None
    return psycopg


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).strip().splitlines()[:1]) or type(exc).__name__


# What libpq says of a URL parameter it refuses ("invalid sslmode value", "invalid integer
# value ... for connection option"), and the server of one in ``options``.
_BAD_PARAMETER = re.compile(
    r"invalid (uri|\w+ value|value for parameter)|connection option|unrecognized configuration"
)


def _connect_error(where: str, exc: Exception) -> StoreError:
    """One sentence for a failed connection: what was wrong, from libpq's words."""
    text = " ".join(str(exc).split())
    detail = text.split(" failed: ", 1)[-1].replace("FATAL: ", "").strip()
    lowered = text.lower()
    if "password authentication failed" in lowered or "no password supplied" in lowered:
        return ServerError(
            f"cannot connect to {where}: the server refused the login ({detail}); check the "
            "user and password (in the URL, ~/.pgpass or $PGPASSWORD)"
        )
    if "does not exist" in lowered and "database" in lowered:
        return StoreError(f"cannot connect to {where}: {detail} on that server")
    if "connection refused" in lowered:
        return ServerError(
            f"cannot connect to {where}: the connection was refused (is the PostgreSQL server "
            "running there and accepting TCP/IP connections on that port?)"
        )
    if "resolve host" in lowered or "translate host name" in lowered:
        return ServerError(f"cannot connect to {where}: the host name is unknown ({detail})")
    if "timeout expired" in lowered:
        return ServerError(f"cannot connect to {where}: no answer from the server (timed out)")
    if _BAD_PARAMETER.search(lowered):  # the URL's fault, checked by libpq or the server
        return StoreError(f"{where} is not a valid PostgreSQL URL ({detail})")
    return ServerError(f"cannot connect to {where}: {detail}")
