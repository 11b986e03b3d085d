"""The database file under faults: interior corruption, crashes with commits in the -wal,
read-only and permission-denied locations. Real SQLite files; read-only and permission cases run
as another user (root ignores permissions), through real processes."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from explorer.errors import StoreError
from explorer.storage import SCHEMA_VERSION, SQLiteStore, get_store
from explorer.storage._copy import copy_to_file
from explorer.storage._schema import APPLICATION_ID, MIGRATIONS

ROOT = Path(__file__).resolve().parents[3]
WRITER = Path(__file__).with_name("_writer.py")
NOBODY = 65534


def _other_user() -> list[str]:
    """A command prefix that drops root's permission bypass (none when not root).

    ``setpriv`` rather than ``subprocess.run(user=...)``: here the latter cannot execute the
    interpreter, which lives under root's home.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    # A checkout inside a private folder (e.g. a clone under `mktemp -d`, mode 700) cannot be
    # imported by another user at all: that is the checkout's permissions, not the store's.
    probe = [*prefix, "test", "-r", str(ROOT / "explorer" / "__init__.py")]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip(f"{ROOT} is not readable by another user: permissions cannot be tested")
    return prefix


def _run(argv: list[str], *, as_other_user: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": tempfile.gettempdir()}
    prefix = _other_user() if as_other_user else []
    return subprocess.run([*prefix, sys.executable, *argv], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)  # fmt: skip


def _cli(*args: str, as_other_user: bool = False) -> subprocess.CompletedProcess:
    return _run(["-m", "explorer", *args], as_other_user=as_other_user)


def _python_as_other_user(code: str) -> subprocess.CompletedProcess:
    return _run(["-c", textwrap.dedent(code)], as_other_user=True)


def _fill(path, workload, target, make_trial, *, runs=3, per_run=60):
    with SQLiteStore(path) as store:
        for r in range(runs):
            run = store.create_run(workload, target, "random", settings={"r": r})
            secs = [1e-3 * (1 + i) for i in range(per_run)]
            trials = [make_trial(workload, target, x, trace=i % 4) for i, x in enumerate(secs)]
            store.add_trials(run.id, trials)
            store.finish_run(run.id)


def _damage_interior(path):
    """Overwrite pages in the middle of the file; the header and the schema page stay intact."""
    page_size = 4096
    num_pages = path.stat().st_size // page_size
    assert num_pages > 20, "the test database is too small to damage its interior"
    with open(path, "r+b") as fh:
        for page in range(num_pages // 3, 2 * num_pages // 3):
            fh.seek(page * page_size)
            fh.write(bytes([0xA5]) * page_size)


def _siblings(path):
    return sorted(p.name for p in path.parent.iterdir() if p != path)


# -- interior corruption -----------------------------------------------------------------------
def test_interior_corruption_is_refused_before_the_first_write(db_path, workload, target,
                                                               make_trial):  # fmt: skip
    _fill(db_path, workload, target, make_trial)
    _damage_interior(db_path)
    damaged = db_path.read_bytes()
    store = SQLiteStore(db_path)  # opening reads only the header and the schema: it succeeds
    found = r"is corrupt \(SQLite's integrity check found: .*\); it was left untouched"
    with pytest.raises(StoreError, match=found):
        store.create_run(workload, target, "random")
    with pytest.raises(StoreError, match="is corrupt"):
        store.add_trials(1, [make_trial(workload, target, 1e-3)])
    store.close()
    assert db_path.read_bytes() == damaged
    assert not (db_path.parent / f"{db_path.name}-wal").exists()


def test_the_cli_refuses_to_tune_into_a_damaged_file_and_leaves_it_untouched(
    db_path, workload, target, make_trial
):
    _fill(db_path, workload, target, make_trial)
    _damage_interior(db_path)
    damaged = db_path.read_bytes()
    out = _cli("tune", "matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16", "--trials", "2",
               "-q", "--db", str(db_path))  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("error:") == 1 and "Traceback" not in out.stderr
    assert "is corrupt" in out.stderr and str(db_path) in out.stderr
    assert db_path.read_bytes() == damaged


def test_an_intact_file_is_checked_once_and_written(db_path, workload, target, make_trial):
    _fill(db_path, workload, target, make_trial, runs=1, per_run=5)
    with SQLiteStore(db_path) as store:
        run = store.create_run(workload, target, "manual")
        store.add_trials(run.id, [make_trial(workload, target, 1e-3)])
        assert store.count_trials() == 6


# -- consistent copies -------------------------------------------------------------------------
_CRASH = textwrap.dedent(
    """
    import os, sys
    from explorer.storage import SQLiteStore
    from explorer.target import Target
    from explorer.testing.contracts._store import make_trial
    from explorer.workloads import get_workload
    w, t = get_workload("matmul", M=64, N=64, K=64), Target.local_cpu()
    store = SQLiteStore(sys.argv[1])
    for r in range(2):
        run = store.create_run(w, t, "random")
        store.add_trials(run.id, [make_trial(w, t, 1e-3 * (i + 1), trace=i) for i in range(4)])
    os._exit(0)  # a crash: no close, no checkpoint
    """
)


def test_after_a_crash_the_backup_has_everything_a_file_copy_misses(db_path, tmp_path):
    subprocess.run([sys.executable, "-c", _CRASH, str(db_path)], check=True, cwd=ROOT)
    assert (db_path.parent / f"{db_path.name}-wal").stat().st_size > 0  # commits sit in the -wal
    copied = tmp_path / "copied.db"
    shutil.copyfile(db_path, copied)
    with sqlite3.connect(copied) as conn:  # the file alone: no runs (what the issue saw)
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0

    backup = tmp_path / "backups" / "backup.db"
    backup.parent.mkdir()
    out = _cli("backup", str(backup), "--db", str(db_path))
    assert out.returncode == 0, out.stderr
    assert "2 runs" in out.stdout and "8 trials" in out.stdout
    assert _siblings(backup) == []  # one file, no -wal/-shm beside it
    with SQLiteStore(backup, read_only=True) as store:
        assert len(store.runs()) == 2 and store.count_trials() == 8
    with sqlite3.connect(backup) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_backups_of_a_live_database_are_consistent_snapshots(db_path, tmp_path, workload,
                                                             target):  # fmt: skip
    with SQLiteStore(db_path) as store:
        store.create_run(workload, target, "random")
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(db_path), "--runs", "1", "--tag", "w", "--size", "25",
         "--forever"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert writer.stdout.readline().strip() == "ready"
        counts = []
        with SQLiteStore(db_path, read_only=True) as live:
            for i in range(4):
                writer.stdout.readline()  # at least one more commit
                dest = live.backup(tmp_path / f"b{i}.db")
                with sqlite3.connect(dest) as conn:
                    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
                with SQLiteStore(dest, read_only=True) as copy:
                    sizes = Counter(t.candidate.decisions["batch"] for t in copy.trials())
                    assert set(sizes.values()) == {25}  # whole batches only, none torn
                    counts.append(copy.count_trials())
        assert counts == sorted(counts) and counts[0] > 0
    finally:
        writer.kill()
        writer.wait()


def test_a_clean_close_checkpoints_even_while_another_reader_is_open(db_path, workload, target,
                                                                    make_trial):  # fmt: skip
    with SQLiteStore(db_path):
        pass
    reader = sqlite3.connect(db_path)  # keeps the -wal alive past the store's close
    reader.execute("SELECT count(*) FROM runs").fetchone()
    try:
        store = SQLiteStore(db_path)
        run = store.create_run(workload, target, "random")
        store.add_trials(run.id, [make_trial(workload, target, 1e-3)])
        store.close()
        copy = db_path.parent / "copy.db"
        shutil.copyfile(db_path, copy)  # the database file alone, without its -wal
        with sqlite3.connect(copy) as conn:
            assert conn.execute("SELECT count(*) FROM trials").fetchone()[0] == 1
    finally:
        reader.close()


def test_backup_python_api_and_its_refusals(db_path, tmp_path, workload, target, make_trial):
    _fill(db_path, workload, target, make_trial, runs=2, per_run=3)
    with SQLiteStore(db_path) as store:
        dest = store.backup(tmp_path / "b.db")
        assert dest == tmp_path / "b.db"
        with pytest.raises(StoreError, match="already exists"):
            store.backup(dest)
        store.add_trials(1, [make_trial(workload, target, 5e-4)])
        store.backup(dest, overwrite=True)
        with pytest.raises(StoreError, match="onto itself"):
            store.backup(db_path, overwrite=True)
        with pytest.raises(StoreError, match="is a directory"):
            store.backup(tmp_path)
        with pytest.raises(StoreError, match="does not exist"):
            store.backup(tmp_path / "missing" / "b.db")
    with SQLiteStore(dest) as copy:  # a backup opens as a store, and can be written
        assert copy.count_trials() == 7
        copy.create_run(workload, target, "manual")
    assert not list(tmp_path.glob(".*.tmp"))
    with SQLiteStore(":memory:") as memory:  # an in-memory store can be saved too
        memory.create_run(workload, target, "manual")
        memory.backup(tmp_path / "m.db")
    with SQLiteStore(tmp_path / "m.db", read_only=True) as saved:
        assert len(saved.runs()) == 1


def test_a_backup_never_lands_beside_another_databases_commits(db_path, tmp_path, workload,
                                                                target, make_trial):  # fmt: skip
    """A -wal left by a crash holds the commits of the database it sits beside: SQLite would
    replay them into whatever file takes that name (the backup would read as the old database,
    "backed up 2 runs, 8 trials" of a 1-run source). Replacing it is refused, nothing changed."""
    old = tmp_path / "old" / "old.db"
    old.parent.mkdir()
    subprocess.run([sys.executable, "-c", _CRASH, str(old)], check=True, cwd=ROOT)
    before = {p.name: p.read_bytes() for p in old.parent.iterdir()}
    assert sorted(before) == ["old.db", "old.db-shm", "old.db-wal"]
    _fill(db_path, workload, target, make_trial, runs=1, per_run=3)
    out = _cli("backup", str(old), "--force", "--db", str(db_path))
    assert out.returncode == 2 and out.stderr.count("error:") == 1, out.stderr
    assert "old.db-wal beside it holds commits" in out.stderr
    with SQLiteStore(db_path) as store:
        with pytest.raises(StoreError, match="holds commits"):
            store.backup(old, overwrite=True)
        with pytest.raises(StoreError, match="holds commits"):
            copy_to_file(store, old, overwrite=True)
    assert {p.name: p.read_bytes() for p in old.parent.iterdir()} == before
    with SQLiteStore(old) as store:  # opening it once merges the crashed writer's commits
        assert len(store.runs()) == 2
    out = _cli("backup", str(old), "--force", "--db", str(db_path))
    assert out.returncode == 0 and "1 run, 3 trials" in out.stdout, out.stderr


# -- read-only ---------------------------------------------------------------------------------
def test_a_missing_file_is_an_error_when_reading_and_nothing_is_created(tmp_path):
    path = tmp_path / "typo_dir" / "sub" / "records.dbb"
    missing = r"no record database at .*records\.dbb \(the file does not exist\)"
    with pytest.raises(StoreError, match=missing):
        get_store(path, read_only=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["runs"], ["export", "OUT/trials.csv"],
                                     ["export", "--format", "metaschedule", "OUT/ms"],
                                     ["backup", "OUT/b.db"], ["check"]])  # fmt: skip
def test_commands_on_records_refuse_a_missing_database_and_create_nothing(tmp_path, command):
    """The reading commands, and ``check`` (which writes its re-measurements into the
    database, but only into one that holds unchecked timings)."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    args = [a.replace("OUT", str(out_dir)) for a in command]
    db = tmp_path / "typo_dir" / "sub" / "records.dbb"
    out = _cli(*args, "--db", str(db))
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("error:") == 1 and "Traceback" not in out.stderr
    assert "no record database" in out.stderr and "records.dbb" in out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert list(out_dir.iterdir()) == []


def test_reading_writes_nothing_and_writing_is_refused(db_path, workload, target, make_trial):
    _fill(db_path, workload, target, make_trial, runs=2, per_run=3)
    before = db_path.read_bytes()
    with SQLiteStore(db_path, read_only=True) as store:
        assert len(store.runs()) == 2 and store.count_trials() == 6
        assert store.best(workload, target)[0].median_secs == 1e-3
        with pytest.raises(StoreError, match="read-only"):
            store.create_run(workload, target, "manual")
    assert db_path.read_bytes() == before
    with pytest.raises(ValueError, match="in-memory"):
        SQLiteStore(":memory:", read_only=True)


def _version_1_file(path):
    conn = sqlite3.connect(path)
    MIGRATIONS[0](conn)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.commit()
    conn.close()


def test_an_older_schema_is_migrated_when_first_read(db_path):
    _version_1_file(db_path)
    with SQLiteStore(db_path, read_only=True) as store:
        assert store.runs() == [] and store.count_trials() == 0
    with sqlite3.connect(db_path) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)


def test_an_empty_file_is_not_a_database_to_read(db_path):
    db_path.touch()
    with pytest.raises(StoreError, match="is empty"):
        SQLiteStore(db_path, read_only=True)
    assert db_path.read_bytes() == b""


# -- as another user: read-only folders and permission denied ----------------------------------
@pytest.fixture
def shared_dir():
    """A folder another user can enter (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="explorer-perm-"))
    path.chmod(0o755)
    yield path
    for p in [path, *path.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    shutil.rmtree(path)


def test_a_database_in_a_read_only_folder_can_be_listed_and_exported(shared_dir, workload, target,
                                                                     make_trial):  # fmt: skip
    folder = shared_dir / "ro"
    folder.mkdir()
    db = folder / "records.db"
    _fill(db, workload, target, make_trial, runs=2, per_run=3)
    db.chmod(0o644)
    folder.chmod(0o555)
    before = db.read_bytes()
    out = _cli("runs", "--db", str(db), as_other_user=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("random") == 2
    csv = shared_dir / "trials.csv"
    shared_dir.chmod(0o777)
    out = _cli("export", str(csv), "--db", str(db), as_other_user=True)
    assert out.returncode == 0, out.stderr
    assert len(csv.read_text().splitlines()) == 7
    assert sorted(p.name for p in folder.iterdir()) == ["records.db"]  # no -wal, no -shm
    assert db.read_bytes() == before
    # Writing there is refused in a plain sentence, not SQLite's "attempt to write a readonly
    # database".
    out = _cli("import", str(shared_dir / "nothing"), "--db", str(db), as_other_user=True)
    assert out.returncode != 0
    tune = _cli("tune", "matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16", "--trials", "1", "-q",
                "--db", str(db), as_other_user=True)  # fmt: skip
    assert tune.returncode != 0 and tune.stderr.count("error:") == 1, tune.stderr
    assert "read-only" in tune.stderr and str(db) in tune.stderr
    assert "attempt to write" not in tune.stderr and "Traceback" not in tune.stderr
    assert db.read_bytes() == before


def test_permission_problems_are_store_errors_in_plain_words(shared_dir, workload, target,
                                                              make_trial):  # fmt: skip
    locked = shared_dir / "locked"
    locked.mkdir()
    _fill(locked / "records.db", workload, target, make_trial, runs=1, per_run=2)
    (locked / "records.db").chmod(0o600)  # another user cannot read it
    _version_1_file(locked / "old.db")
    (locked / "old.db").chmod(0o644)
    locked.chmod(0o555)
    code = f"""
        from explorer.errors import StoreError
        from explorer.storage import SQLiteStore
        cases = {{
            "new file in a read-only folder": ({str(locked / "new.db")!r}, False),
            "new folder in a read-only folder": ({str(locked / "sub" / "new.db")!r}, False),
            "unreadable file": ({str(locked / "records.db")!r}, False),
            "unreadable file, read-only": ({str(locked / "records.db")!r}, True),
            "old schema, read-only folder": ({str(locked / "old.db")!r}, True),
        }}
        for name, (path, read_only) in cases.items():
            try:
                SQLiteStore(path, read_only=read_only)
                print(name, "| OPENED")
            except StoreError as exc:
                print(name, "|", exc)
        """
    out = _python_as_other_user(code)
    assert out.returncode == 0, out.stderr
    lines = dict(line.split(" | ", 1) for line in out.stdout.splitlines())
    assert "not writable, so the file cannot be created" in lines["new file in a read-only folder"]
    assert "cannot create the folder" in lines["new folder in a read-only folder"]
    assert "permission denied" in lines["new folder in a read-only folder"]
    assert lines["unreadable file"].endswith("records.db: permission denied")
    assert lines["unreadable file, read-only"].endswith("records.db: permission denied")
    assert "has schema version 1, older than this code's" in lines["old schema, read-only folder"]
    assert "cannot be upgraded to be read" in lines["old schema, read-only folder"]
    for message in lines.values():
        assert "unable to open database file" not in message and "Errno" not in message
    assert sorted(p.name for p in locked.iterdir()) == ["old.db", "records.db"]


def test_a_read_only_database_says_only_that_it_is_read_only(shared_dir, workload, target,
                                                             make_trial):  # fmt: skip
    """Seen: "checkpoint on close failed: attempt to write a readonly database" printed after
    the error (and on every close from Python), about a file nobody could write anyway."""
    db = shared_dir / "records.db"
    _fill(db, workload, target, make_trial, runs=1, per_run=2)
    other = shared_dir / "other.db"
    _fill(other, workload, target, make_trial, runs=1, per_run=2)
    for path in (db, other):
        path.chmod(0o444)
    shared_dir.chmod(0o777)  # a -wal may be made beside it: the file itself is read-only
    before = db.read_bytes()
    out = _cli("import", str(other), "--db", str(db), as_other_user=True)
    assert out.returncode == 3, out.stderr
    assert out.stderr.startswith("error: cannot write to") and "read-only" in out.stderr
    assert out.stderr.count("\n") == 1 and "checkpoint" not in out.stderr, out.stderr
    code = f"""
        from explorer.storage import get_store
        get_store({str(db)!r}).close()  # opened for writing, then closed: nothing to say
        """
    closed = _python_as_other_user(code)
    assert closed.returncode == 0 and closed.stderr == "", closed.stderr
    assert db.read_bytes() == before
