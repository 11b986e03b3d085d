"""The PostgreSQL store against a real server of the tests' own (``postgres_server``): the
shipped contract unchanged, PostgreSQL specifics, errors as sentences, several processes writing,
live subscriptions, and whole databases moved between SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _pg_server import PASSWORD, USER, free_port
from test_storage_concurrency import Writer, _check_batches

from explorer.cli import main
from explorer.core import ModelInput, ModelRace, ModelRecord, ModelTask, RaceEntry
from explorer.core._records import TrialRecord
from explorer.errors import StoreError
from explorer.storage import (
    SCHEMA_VERSION,
    PostgresStore,
    SQLiteStore,
    copy_records,
    get_store,
)
from explorer.testing.contracts import RecordStoreContract
from explorer.testing.recordings import PATH as RECORDING
from explorer.types import CacheFlush, MeasureStatus
from explorer.workloads import get_workload

try:
    import psycopg
except ImportError:  # the dev extra has it; CI must not silently skip (conftest._unavailable)
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        raise
    pytest.skip("PostgreSQL tests need the psycopg package", allow_module_level=True)

TUNE = Path(__file__).parent.parent / "_tune_replay.py"


class TestPostgres(RecordStoreContract):
    @pytest.fixture(autouse=True)
    def _database(self, pg_url: str) -> None:
        self.url = pg_url  # a new empty database for each test

    def make_store(self, directory):
        return PostgresStore(self.url)


def _sql(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql.encode())
        return cur.fetchall() if cur.description else []


# -- the tables ---------------------------------------------------------------------------------
def test_values_keep_their_precision_and_history_cannot_be_rewritten(
    pg_url, workload, target, make_trial
):
    with PostgresStore(pg_url) as store:
        run = store.create_run(workload, target, "random")
        secs = (1.2345678901234567e-3, 3.000000000000001e-7)
        (record,) = store.add_trials(run.id, [make_trial(workload, target, secs)])
        assert store.get_trial(record.id).result.run_secs == secs  # float8, not 4-byte real
        assert store.get_trial(record.id).created_at == record.created_at
        (version,) = _sql(pg_url, "SELECT value FROM meta WHERE key = 'schema_version'")
        assert version == (str(SCHEMA_VERSION),)
    for sql in (
        "UPDATE trials SET median_secs = 0",
        "DELETE FROM trials",
        "TRUNCATE trials CASCADE",
        "DELETE FROM runs",
        "TRUNCATE runs CASCADE",
        "UPDATE runs SET strategy = 'other'",
    ):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only|may change"):
            _sql(pg_url, sql)
    _sql(pg_url, "UPDATE runs SET status = 'failed'")  # the one allowed update
    assert _sql(pg_url, "SELECT count(*) FROM trials") == [(1,)]


def test_another_applications_database_is_refused_untouched(postgres_server):
    url = postgres_server.url(postgres_server.create_database())
    _sql(url, "CREATE TABLE customers (id int); CREATE TABLE meta (key text, value text)")
    _sql(url, "INSERT INTO meta VALUES ('application', 'billing')")
    with pytest.raises(StoreError, match=r"not a Schedule Explorer record database .*customers"):
        PostgresStore(url)
    tables = _sql(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
    assert tables == [("customers",), ("meta",)]
    _sql(url, "ALTER TABLE meta RENAME COLUMN key TO name")  # a meta that does not even parse
    with pytest.raises(StoreError, match="not a Schedule Explorer record database"):
        PostgresStore(url)
    # Another schema of the same database holds a record database beside them.
    _sql(url, "CREATE SCHEMA explorer")
    with PostgresStore(f"{url}?options=-csearch_path%3Dexplorer") as store:
        assert store.runs() == []
    assert _sql(url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'explorer'") == [(6,)]


def test_a_newer_schema_is_refused_and_read_only_never_writes(pg_url, workload, target):
    with pytest.raises(StoreError, match="holds no record database yet"):
        PostgresStore(pg_url, read_only=True)
    assert _sql(pg_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
    with PostgresStore(pg_url) as store:
        run = store.create_run(workload, target, "random")
    with PostgresStore(pg_url, read_only=True) as reader:
        assert reader.is_read_only and [r.id for r in reader.runs()] == [run.id]
        with pytest.raises(StoreError, match="read-only"):
            reader.create_run(workload, target, "random")
    _sql(pg_url, "UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99, newer than this code supports"):
        PostgresStore(pg_url)


def test_check_refuses_a_database_without_records_and_creates_no_tables(pg_url, capsys):
    """As for a missing SQLite file: `explorer check` adds its re-measurements to a record
    database, and never makes one of an empty database (the reading commands refuse it too)."""
    assert main(["check", "--db", pg_url]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "holds no record database yet" in err, err
    assert _sql(pg_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]


def test_a_lost_connection_fails_one_call_and_the_next_reconnects(
    pg_url, workload, target, make_trial
):
    with PostgresStore(pg_url) as store:
        run = store.create_run(workload, target, "random")
        _sql(
            pg_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'schedule-explorer'",
        )
        with pytest.raises(StoreError, match="lost the connection") as info:
            store.add_trials(run.id, [make_trial(workload, target)])
        assert "\n" not in str(info.value)
        assert store.count_trials() == 0  # that batch was not stored
        store.add_trials(run.id, [make_trial(workload, target)])  # a new connection
        assert [t.seq for t in store.trials()] == [0]


# -- errors: one sentence each ------------------------------------------------------------------
def _bad_urls(server) -> dict[str, tuple[str, str, int]]:
    """name -> (URL, what the message says, exit code of `explorer runs --db URL`)."""
    db = server.create_database()
    return {
        "refused": (f"postgresql://postgres@127.0.0.1:{free_port()}/x", "was refused", 3),
        "unknown database": (server.url("nope"), 'database "nope" does not exist', 2),
        "wrong password": (
            server.url(db, user=USER, password="wrong"),
            f'password authentication failed for user "{USER}"',
            3,
        ),
        "no password": (server.url(db, user=USER), "no password supplied", 3),
        "bad port": ("postgresql://me@127.0.0.1:port/db", "not a valid PostgreSQL URL", 2),
        "bad option": ("postgresql://me@127.0.0.1/db?colour=blue", "not a valid", 2),
        # a URL parameter's bad value is the URL's fault (was exit 3), whoever finds it
        "bad value": (server.url(db) + "?sslmode=sometimes", "invalid sslmode value", 2),
        "bad setting": (
            server.url(db) + "?options=-cno_such_setting%3D1",
            'unrecognized configuration parameter "no_such_setting"',
            2,
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "refused",
        "unknown database",
        "wrong password",
        "no password",
        "bad port",
        "bad option",
        "bad value",
        "bad setting",
    ],
)
def test_connection_problems_are_one_sentence(postgres_server, capsys, case):
    url, says, code = _bad_urls(postgres_server)[case]
    with pytest.raises(StoreError) as info:
        PostgresStore(url)
    message = str(info.value)
    assert says in message and "\n" not in message, message
    assert "wrong" not in message  # a password is never shown
    assert info.value.__cause__ is None and info.value.__suppress_context__  # no psycopg chain
    assert main(["runs", "--db", url]) == code
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err


def test_a_good_password_opens_and_the_url_is_shown_without_it(postgres_server):
    db = postgres_server.create_database(owner=USER)
    url = postgres_server.url(db, user=USER, password=PASSWORD)
    with PostgresStore(url) as store:
        assert PASSWORD not in repr(store) and PASSWORD not in store.path
        assert store.path == f"postgresql://{USER}:***@127.0.0.1:{postgres_server.port}/{db}"


def test_a_password_is_never_shown_printed_logged_or_stored(
    postgres_server, capsys, caplog, tmp_path, workload, target, make_trial
):
    """Seen: the resume hint printed `--db postgresql://user:pw@...` in clear."""
    db = postgres_server.create_database(owner=USER)
    query_db = postgres_server.create_database(owner=USER)
    urls = [
        postgres_server.url(db, user=USER, password=PASSWORD),
        postgres_server.url(query_db, user=USER) + f"?password={PASSWORD}",  # libpq takes both
    ]
    laptop = tmp_path / "laptop.db"
    with SQLiteStore(laptop) as store:
        budget = {"max_trials": 4, "max_secs": None, "seed": 0, "batch_size": 4}
        run = store.create_run(workload, target, "random", settings=budget)
        store.add_trials(run.id, [make_trial(workload, target)])
        store.finish_run(run.id)
    caplog.set_level("DEBUG")
    for url in urls:
        shown = url.replace(PASSWORD, "***")
        assert main(["import", "--db", url, str(laptop)]) == 0
        assert main(["runs", "--db", url]) == 0
        assert main(["export", "--db", url, str(tmp_path / "out.csv")]) == 0
        assert main(["backup", "--db", url, str(tmp_path / f"copy{len(shown)}.db")]) == 0
        assert main(["import", "--db", str(tmp_path / "back.db"), url]) == 0
        # the resume hint, in a refusal that names the run's own command
        assert main(["tune", "--resume", "1", "--trials", "99", "--db", url]) == 2
        assert main(["runs", "--db", url, "--db", url]) == 2  # the option given twice
        assert main(["--db", url, "runs", "--db", url]) == 2
        out, err = capsys.readouterr()
        assert f"`explorer tune --resume 1 --db {shlex.quote(shown)}` alone" in err
        for text in (out, err, caplog.text):
            assert PASSWORD not in text
        with PostgresStore(url) as store:
            for stored in store.runs():
                assert PASSWORD not in json.dumps([stored.settings, stored.environment])
            assert PASSWORD not in repr(store) + store.path


# -- every entry point takes a URL ---------------------------------------------------------------
def test_explorer_db_and_get_store_take_a_url(pg_url, monkeypatch, capsys, workload, target):
    monkeypatch.setenv("EXPLORER_DB", pg_url)
    with get_store() as store:
        assert isinstance(store, PostgresStore)
        run = store.create_run(workload, target, "manual")
        store.finish_run(run.id)
    assert main(["runs"]) == 0  # the default database is the URL
    assert f"{run.id:>4} manual" in capsys.readouterr().out
    monkeypatch.delenv("EXPLORER_DB")
    assert main(["runs", "--db", pg_url]) == 0
    assert "manual" in capsys.readouterr().out


def test_reading_commands_create_no_tables(pg_url, capsys, tmp_path):
    for argv in (["runs"], ["export", str(tmp_path / "out.csv")], ["tune", "--resume", "1"]):
        assert main([*argv, "--db", pg_url]) == 2, argv
        assert "holds no record database yet" in capsys.readouterr().err
    assert _sql(pg_url, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == [(0,)]
    assert not (tmp_path / "out.csv").exists()


def test_a_search_through_the_cli_helper_is_killed_and_resumed_on_postgres(pg_url, tmp_path):
    """A real Tuner in another process (the resume tests' replay search), killed mid-batch
    with SIGKILL and resumed: the run's lease and its trials live in PostgreSQL."""
    cmd = [sys.executable, str(TUNE), pg_url, "random", "--trials", "12", "--batch", "4"]
    cmd += ["--scratch", str(tmp_path)]
    first = subprocess.Popen(
        [*cmd, "--delay", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout is not None
        for line in first.stdout:
            if line.startswith("measuring 1"):
                break
        else:
            raise AssertionError(first.stderr.read() if first.stderr else "no output")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    with PostgresStore(pg_url) as store:
        (run,) = store.runs()
        assert run.status == "interrupted"  # its owner is gone
        stored = store.count_trials(run_id=run.id, remeasures=False)
        assert stored == 4  # the first batch; the second was being measured
    done = subprocess.run(
        [*cmd, "--delay", "0", "--resume", str(run.id)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == [str(run.id), "12"]
    with PostgresStore(pg_url) as store:
        assert store.get_run(run.id).status == "finished"
        assert store.count_trials(run_id=run.id, remeasures=False) == 12
        seqs = [t.seq for t in store.trials(run_id=run.id)]
        assert seqs == list(range(len(seqs)))


# -- several processes at once ------------------------------------------------------------------
def test_processes_writing_at_once_lose_nothing_and_a_subscriber_sees_every_batch(
    pg_url, workload, other_workload, target, tmp_path
):
    with PostgresStore(pg_url) as store:
        shared = store.create_run(workload, target, "random").id
        own = {tag: store.create_run(other_workload, target, "random").id for tag in "ABC"}
    go = tmp_path / "go"
    batches, size = 20, 15
    seen: list[list[TrialRecord]] = []
    delivered = threading.Event()

    def on_batch(records: list[TrialRecord]) -> None:
        seen.append(records)
        if sum(map(len, seen)) == 3 * batches * size:
            delivered.set()

    watcher = PostgresStore(pg_url)
    watcher.subscribe(on_batch)
    args = ["--batches", str(batches), "--size", str(size), "--go", str(go)]
    writers = [Writer(pg_url, [shared, own[tag]], tag, *args) for tag in "ABC"]
    try:
        for w in writers:
            w.wait_for("ready")
        go.touch()  # all start writing at the same moment
        for w in writers:
            w.finish()
        assert delivered.wait(timeout=30), f"{sum(map(len, seen))} trials delivered"
    finally:
        for w in writers:
            w.__exit__()
        watcher.close()

    with PostgresStore(pg_url) as store:
        trials = store.trials()
        assert len(trials) == 3 * batches * size and len({t.id for t in trials}) == len(trials)
        assert [t.id for t in trials] == sorted(t.id for t in trials)
        assert store.count_trials(run_id=shared) == 3 * batches * size // 2
        for run_id in (shared, *own.values()):
            seqs = [t.seq for t in store.trials(run_id=run_id)]
            assert seqs == list(range(len(seqs)))
        assert len(_check_batches(trials, size)) == 3 * batches
        # The subscriber got every batch once, whole, as stored, each in its commit's order.
        assert sorted((r for batch in seen for r in batch), key=lambda r: r.id) == trials
        for batch in seen:
            assert len({r.run_id for r in batch}) == 1 and len(batch) == size
        spans = {
            tag: (min(t.created_at for t in ts), max(t.created_at for t in ts))
            for tag in "ABC"
            for ts in [[t for t in trials if t.candidate.decisions["tag"] == tag]]
        }
        assert spans["A"][0] < spans["B"][1] and spans["B"][0] < spans["A"][1]  # overlapped


def test_a_writer_killed_mid_batch_leaves_complete_batches(pg_url, workload, target, make_trial):
    with PostgresStore(pg_url) as store:
        run_id = store.create_run(workload, target, "random").id
    size = 300
    with Writer(pg_url, [run_id], "k", "--forever", "--size", str(size)) as writer:
        writer.wait_for("committed 1")
        time.sleep(0.05)  # within a later batch
        os.kill(writer.proc.pid, signal.SIGKILL)
        assert writer.proc.wait(timeout=30) == -signal.SIGKILL
    with PostgresStore(pg_url) as store:
        trials = store.trials(run_id=run_id)
        assert [t.seq for t in trials] == list(range(len(trials)))
        batches = sorted(b for _, b in _check_batches(trials, size))
        assert len(batches) >= 2 and batches == list(range(len(batches)))
        # The killed session's transaction is gone: the next writer is not kept waiting.
        (record,) = store.add_trials(run_id, [make_trial(workload, target)])
        assert record.seq == len(trials)


# -- moving whole databases ---------------------------------------------------------------------
def _same_records(a, b) -> None:
    assert a.runs() == b.runs()
    assert [r.owner for r in a.runs()] == [r.owner for r in b.runs()]
    assert [(r.heartbeat_at, r.active_secs) for r in a.runs()] == [
        (r.heartbeat_at, r.active_secs) for r in b.runs()
    ]
    assert a.trials() == b.trials()
    assert a.trial_rows() == b.trial_rows()
    for run in a.runs():
        assert a.best_so_far(run.id) == b.best_so_far(run.id)


def test_backup_moves_records_sqlite_to_postgres_and_back(
    pg_url, tmp_path, capsys, workload, target, make_trial
):
    # The shipped recording (real measurements) plus runs of every status, a re-measurement,
    # failures, predictions and decisions.
    source = tmp_path / "source.db"
    with SQLiteStore(RECORDING, read_only=True) as recording:
        recording.backup(source)
    with SQLiteStore(source) as store:
        run = store.create_run(workload, target, "autotvm", settings={"seed": 3})
        store.add_trials(run.id, [
            make_trial(workload, target, (3e-3, 1e-3), trace=1, predicted={"xgb": 0.5},
                       decisions={"tile": [8, 8]}, build_secs=0.25, num_threads=2),
            make_trial(workload, target, None, status=MeasureStatus.BUILD_ERROR),
        ])  # fmt: skip
        again = make_trial(workload, target, 2e-3, trace=1)
        store.add_trials(run.id, [dataclasses.replace(again, is_remeasure=True)])
        store.finish_run(run.id, "cancelled")
        store.create_run(workload, target, "manual")  # still running: owned by this process
    assert main(["backup", "--db", str(source), pg_url]) == 0
    assert capsys.readouterr().out.startswith("backed up 4 runs, ")
    back = tmp_path / "back.db"
    assert main(["backup", "--db", pg_url, str(back)]) == 0
    with SQLiteStore(source) as a, PostgresStore(pg_url) as b, SQLiteStore(back) as c:
        assert len(a.trials()) == 276 + 3
        _same_records(a, b)
        _same_records(a, c)
        # The copy goes on where the source left off: new ids follow the copied ones.
        (extra,) = b.add_trials(run.id, [make_trial(workload, target)])
        assert extra.id == max(t.id for t in a.trials()) + 1 and extra.seq == 3
    # Exports of the two databases are the same file.
    for db, out in ((str(back), tmp_path / "a.csv"), (pg_url, tmp_path / "b.csv")):
        assert main(["export", "--db", db, "--run", str(run.id), str(out)]) == 0
    csv_a, csv_b = (tmp_path / "a.csv").read_text(), (tmp_path / "b.csv").read_text()
    assert csv_b.startswith(csv_a) and len(csv_b.splitlines()) == len(csv_a.splitlines()) + 1
    # Into a database that holds records already: refused, nothing added.
    capsys.readouterr()
    assert main(["backup", "--db", str(source), pg_url]) == 2
    assert "already holds 4 run(s)" in capsys.readouterr().err
    assert main(["backup", "--force", "--db", str(source), pg_url]) == 2
    assert "--force cannot replace a PostgreSQL database" in capsys.readouterr().err


def test_copy_records_refuses_other_stores(pg_url):
    with PostgresStore(pg_url) as store, pytest.raises(TypeError, match="SQLite or PostgreSQL"):
        copy_records(store, object())  # type: ignore[arg-type]


def _without_ids(store, run) -> tuple:
    """A run and its trials as stored, but for the ids a merge gives anew."""
    trials = [
        dataclasses.replace(t, id=0, run_id=0) for t in store.trials(run_id=run.id)
    ]  # fmt: skip
    return dataclasses.replace(run, id=0), trials


def test_import_merges_new_runs_and_trials_both_ways(
    pg_url, tmp_path, capsys, workload, other_workload, target, make_trial
):
    laptop = tmp_path / "laptop.db"
    with SQLiteStore(laptop) as store:
        mine = store.create_run(workload, target, "random", settings={"seed": 1})
        store.add_trials(mine.id, [make_trial(workload, target, 1e-3 * (i + 1)) for i in range(3)])
        store.finish_run(mine.id)
    with PostgresStore(pg_url) as shared:  # a colleague's run is there already
        theirs = shared.create_run(other_workload, target, "grid")
        shared.add_trials(theirs.id, [make_trial(other_workload, target)] * 2)
        shared.finish_run(theirs.id)
    assert main(["import", "--db", pg_url, str(laptop)]) == 0
    assert "imported 1 new run and 3 trials from" in capsys.readouterr().out
    assert main(["import", "--db", pg_url, str(laptop)]) == 0  # twice: nothing new
    assert "imported 0 new runs and 0 trials" in capsys.readouterr().out
    # The run goes on on the laptop; merging again adds its new trials only.
    with SQLiteStore(laptop) as store:
        store.claim_run(mine.id)
        store.add_trials(mine.id, [make_trial(workload, target, 5e-4, trace=1)] * 2)
        store.finish_run(mine.id)
    assert main(["import", "--db", pg_url, str(laptop)]) == 0
    assert "imported 0 new runs and 2 trials" in capsys.readouterr().out
    with SQLiteStore(laptop) as store, PostgresStore(pg_url) as shared:
        (merged,) = shared.runs(strategy="random")
        assert merged.id != mine.id  # after the colleague's run
        assert _without_ids(shared, merged)[1] == _without_ids(store, store.get_run(mine.id))[1]
        assert shared.count_trials() == 7
        assert [t.seq for t in shared.trials(run_id=merged.id)] == list(range(5))
    # And back: the shared database merged into a new SQLite file.
    assert main(["import", "--db", str(tmp_path / "copy.db"), pg_url]) == 0
    assert "imported 2 new runs and 7 trials" in capsys.readouterr().out
    with SQLiteStore(tmp_path / "copy.db") as copy, PostgresStore(pg_url) as shared:
        assert [_without_ids(copy, r) for r in copy.runs()] == [
            _without_ids(shared, r) for r in shared.runs()
        ]


def test_a_version_3_database_is_upgraded_in_place_keeping_its_trials(
    pg_url, workload, target, make_trial
):
    with PostgresStore(pg_url) as store:  # a database as version 3 wrote it: no device column
        run = store.create_run(workload, target, "random")
        store.add_trials(run.id, [make_trial(workload, target, 2e-3)])
    _sql(pg_url, "ALTER TABLE trials DROP COLUMN device")
    _sql(pg_url, "ALTER TABLE trials DROP COLUMN cache_flush")
    _sql(pg_url, "DROP TABLE model_races, model_runs, models")
    _sql(pg_url, "UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    # ...and its trial "noisy", a status until version 5 (a correct but spread timing)
    _sql(pg_url, "ALTER TABLE trials DISABLE TRIGGER trials_append_only")
    _sql(pg_url, "UPDATE trials SET status = 'noisy'")
    _sql(pg_url, "ALTER TABLE trials ENABLE TRIGGER trials_append_only")
    with pytest.raises(StoreError, match="version 3, older than this code's"):
        PostgresStore(pg_url, read_only=True)
    with PostgresStore(pg_url) as store:
        (old,) = store.trials()
        assert old.median_secs == 2e-3 and old.result.device is None
        assert old.result.cache_flush is CacheFlush.NONE  # version 7's column, NULL
        assert old.status is MeasureStatus.OK and store.best(workload, target)[0].id == old.id
        flushed = make_trial(workload, target, device="a@h:1", cache_flush=CacheFlush.ARGUMENTS)
        (new,) = store.add_trials(run.id, [flushed])
        assert store.get_trial(new.id).result == flushed.result
        assert store.models() == []  # version 6's table, empty
    (version,) = _sql(pg_url, "SELECT value FROM meta WHERE key = 'schema_version'")
    assert version == (str(SCHEMA_VERSION),) and SCHEMA_VERSION == 7
    assert _sql(pg_url, "SELECT DISTINCT status FROM trials") == [("ok",)]


def _with_a_model(store, workload, target, make_trial):
    """A model with one linked, tuned run and a race (what `explorer model tune` leaves)."""
    task = get_workload("task")
    model = store.add_model(
        ModelRecord(0, "net", "a" * 64, (ModelInput("x", (1, 8), "float32"),),
                    (ModelTask("add", task, 2, task.flops(), 1e-6),), target, 1.0),
        b"\x00onnx bytes\xff",
    )  # fmt: skip
    run = store.create_run(workload, target, "random")  # any run may be linked
    store.add_trials(run.id, [make_trial(workload, target, 1e-6)])
    store.finish_run(run.id)
    store.link_model_run(model.id, run.id, "add", "random/seed0/gradient")
    store.add_model_race(
        ModelRace(0, model.id, "random/seed0/gradient", 1, (RaceEntry("tuned", (1e-3,), 1e-7),),
                  {"cpu_model": "test"}, 2.0)
    )  # fmt: skip
    return model


def _models_of(store) -> list:
    out = []
    for m in store.models():
        runs = [
            (store.get_run(r).workload, task, tune) for r, task, tune in store.model_runs(m.id)
        ]
        races = [dataclasses.replace(r, id=0, model_id=0) for r in store.model_races(m.id)]
        out.append((dataclasses.replace(m, id=0), store.model_source(m.id), runs, races))
    return out


def test_backup_and_import_keep_the_models_their_runs_and_races(
    pg_url, tmp_path, capsys, workload, target, make_trial
):
    source = tmp_path / "source.db"
    with SQLiteStore(source) as store:
        _with_a_model(store, workload, target, make_trial)
        expected = _models_of(store)
    assert main(["backup", "--db", str(source), pg_url]) == 0
    back = tmp_path / "back.db"
    assert main(["backup", "--db", pg_url, str(back)]) == 0
    with PostgresStore(pg_url) as pg, SQLiteStore(back) as copy:
        assert _models_of(pg) == _models_of(copy) == expected
        # ids follow the copied ones
        assert pg.add_model(dataclasses.replace(pg.models()[0], name="n2"), b"x").id == 2
    # merged into a database that holds the same model: nothing twice
    merged = tmp_path / "merged.db"
    for _ in range(2):
        assert main(["import", "--db", str(merged), str(source)]) == 0
    with SQLiteStore(merged) as store:
        assert _models_of(store) == expected
    # another file under the same name: the merge is refused whole
    other = tmp_path / "other.db"
    with SQLiteStore(other) as store:
        store.add_model(
            dataclasses.replace(expected[0][0], source_sha256="b" * 64), b"another file"
        )
    capsys.readouterr()
    assert main(["import", "--db", str(merged), str(other)]) == 2
    assert "imported from different files" in capsys.readouterr().err
