"""Run lifecycle in the SQLite store: owners, leases, interrupted runs, re-measurements.

Real processes and real signals: a run's owner is another Python process, killed with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from explorer._process import ProcessIdentity, owned_temp_dir, remove_stale_temp_dirs
from explorer.core._records import TrialRow
from explorer.errors import RunInUseError
from explorer.storage import RunStatus, SQLiteStore, summarize_run
from explorer.storage._schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

# A process that creates (or claims) a run, says so, then waits for SIGKILL or its stdin to close.
OWNER = textwrap.dedent(
    """
    import sys
    from explorer.storage import SQLiteStore
    from explorer.testing.contracts._store import make_trial
    from explorer.target import Target
    from explorer.workloads import get_workload

    db, action = sys.argv[1], sys.argv[2]
    store = SQLiteStore(db)
    if action == "create":
        w = get_workload("matmul", M=64, N=64, K=64)
        run = store.create_run(w, Target.local_cpu(), "random", settings={"seed": 1})
        store.add_trials(run.id, [make_trial(w, Target.local_cpu())])
        print(run.id, flush=True)
    else:
        print("ready", flush=True)  # imported, store open
        for line in sys.stdin:  # "go": every claimer starts at once
            break
        try:
            print("claimed", store.claim_run(int(action)).id, flush=True)
        except Exception as exc:
            print("refused", type(exc).__name__, exc, flush=True)
    sys.stdin.read()
    """
)


def owner(db: Path, action: str = "create") -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", OWNER, str(db), action],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def kill_9(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def test_a_run_records_its_owner_until_it_ends(store, workload, target):
    run = store.create_run(workload, target, "random")
    me = ProcessIdentity.current()
    assert run.status is RunStatus.RUNNING and run.owner == me and run.heartbeat_at
    assert store.get_run(run.id).owner == me
    store.heartbeat(run.id, active_secs=12.5)
    assert store.get_run(run.id).active_secs == 12.5
    done = store.finish_run(run.id, "interrupted")
    assert done.status == "interrupted" and done.owner is None and done.ended_at
    with pytest.raises(RunInUseError, match="no longer owned"):
        store.heartbeat(run.id, active_secs=13.0)
    again = store.claim_run(run.id)  # resumable: running again, owned by this process
    assert again.status is RunStatus.RUNNING and again.owner == me and again.ended_at is None
    assert again.active_secs == 12.5  # the time spent so far is kept for the time budget
    with pytest.raises(RunInUseError, match="already running .in this process"):
        store.claim_run(run.id)
    with pytest.raises(KeyError):
        store.claim_run(999)
    assert str(RunStatus.INTERRUPTED) == f"{RunStatus.INTERRUPTED}" == "interrupted"


def test_a_run_whose_owner_was_killed_reads_interrupted_and_can_be_claimed(tmp_path):
    db = tmp_path / "records.db"
    proc = owner(db)
    run_id = int(proc.stdout.readline())
    with SQLiteStore(db) as store:
        run = store.get_run(run_id)
        assert run.status is RunStatus.RUNNING and run.owner.pid == proc.pid
        with pytest.raises(RunInUseError, match=f"pid {proc.pid}"):
            store.claim_run(run_id)
        kill_9(proc)
        run = store.get_run(run_id)
        assert run.status is RunStatus.INTERRUPTED and store.runs() == [run]
        assert store.count_trials(run_id=run_id) == 1  # its stored trial is kept
        assert store.claim_run(run_id).owner == ProcessIdentity.current()
        store.finish_run(run_id)


def test_of_two_concurrent_claims_exactly_one_wins(tmp_path, workload, target):
    db = tmp_path / "records.db"
    with SQLiteStore(db) as store:
        run = store.create_run(workload, target, "random")
        store.finish_run(run.id, "interrupted")
    claimers = [owner(db, str(run.id)) for _ in range(3)]
    assert [proc.stdout.readline().strip() for proc in claimers] == ["ready"] * 3
    for proc in claimers:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    answers = sorted(proc.stdout.readline().split()[0] for proc in claimers)
    assert answers == ["claimed", "refused", "refused"]
    for proc in claimers:
        kill_9(proc)
    with SQLiteStore(db) as store:
        assert store.get_run(run.id).status is RunStatus.INTERRUPTED  # the winner died too


def row(trial_id, secs, trace=1, *, ok=True, again=False) -> TrialRow:
    from explorer.types import MeasureStatus

    return TrialRow(
        id=trial_id, run_id=1, seq=trial_id, median_secs=None,
        status=MeasureStatus.OK if ok else MeasureStatus.RUN_ERROR,
        run_secs=secs if ok else (), predicted={}, decisions=None, trace_hash=trace,
        created_at=0.0, is_remeasure=again,
    )  # fmt: skip


def test_summary_counts_trials_not_re_measurements_and_ranks_confirmed_schedules():
    rows = [
        row(1, (3.0, 3.0, 3.0), trace=1),
        row(2, (1.0,), trace=2),  # a lucky single timing...
        row(3, (2.0, 2.0, 2.0), trace=3),
        row(4, (2.5, 2.5, 2.5, 2.5), trace=3, again=True),  # ...but only 1 and 3 were re-timed
        row(5, (2.9,), trace=1, again=True),
    ]
    s = summarize_run(1, rows)
    assert (s.num_trials, s.num_remeasured) == (3, 2)
    assert s.best_trial_id == 3 and s.best_secs == 2.5 and s.is_confirmed  # median of 7 pooled
    s = summarize_run(1, rows[:3])  # nothing re-timed yet (interrupted): the fastest median
    assert s.best_trial_id == 2 and s.best_secs == 1.0 and not s.is_confirmed
    failed = [*rows[:3], row(4, (), trace=3, ok=False, again=True), rows[4]]
    assert summarize_run(1, failed).best_trial_id == 1  # a failed re-timing is out
    empty = summarize_run(1, [])
    assert empty.num_trials == 0 and empty.best_trial_id is None and empty.best_secs is None


def test_migration_flags_stored_re_measurements_and_old_running_runs(tmp_path, workload, target,
                                                                      make_trial):  # fmt: skip
    # Step 1. A version-2 database as the previous release wrote it: a run with 2 trials and a
    # re-timing of the first, still marked running (no owner was recorded then).
    db = tmp_path / "v2.db"
    with SQLiteStore(tmp_path / "donor.db") as donor:
        run = donor.create_run(workload, target, "random", settings={"seed": 1})
        donor.add_trials(run.id, [make_trial(workload, target, 2e-3, trace=0),
                                  make_trial(workload, target, 1e-3, trace=1)])  # fmt: skip
        donor.add_trials(run.id, [make_trial(workload, target, 2.5e-3, trace=0)])
    src = sqlite3.connect(tmp_path / "donor.db")
    conn = sqlite3.connect(db, isolation_level=None)
    for migrate in MIGRATIONS[:2]:
        migrate(conn)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    cols = [c[1] for c in conn.execute("PRAGMA table_info(runs)")]
    conn.executemany(
        f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        src.execute(f"SELECT {', '.join(cols)} FROM runs").fetchall(),
    )
    conn.execute("UPDATE runs SET status = 'running', ended_at = NULL")
    cols = [c[1] for c in conn.execute("PRAGMA table_info(trials)")]
    conn.executemany(
        f"INSERT INTO trials ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        src.execute(f"SELECT {', '.join(cols)} FROM trials").fetchall(),
    )
    conn.close()
    src.close()
    # Step 2. Opening migrates it.
    with SQLiteStore(db) as store:
        (run,) = store.runs()
        assert run.status is RunStatus.INTERRUPTED and run.owner is None
        assert [t.is_remeasure for t in store.trials()] == [False, False, True]
        assert store.count_trials(remeasures=False) == 2 and store.count_trials() == 3
        with pytest.raises(Exception, match="append-only"):  # the trigger is back
            store._connection().execute("UPDATE trials SET is_remeasure = 0")
    assert SCHEMA_VERSION >= 3


def test_stale_temp_dirs_of_dead_processes_are_removed(tmp_path):
    prefix = "explorer-test-stale-"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from explorer._process import owned_temp_dir;"
         f"print(owned_temp_dir({prefix!r}), flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    theirs = proc.stdout.readline().strip()
    mine = owned_temp_dir(prefix)
    legacy = tempfile.mkdtemp(prefix=prefix)  # no owner in its name: never touched
    try:
        assert os.path.isdir(theirs) and os.path.isdir(mine)
        assert remove_stale_temp_dirs(prefix) == []  # both owners are alive
        kill_9(proc)
        assert remove_stale_temp_dirs(prefix) == [theirs]
        assert not os.path.exists(theirs) and os.path.isdir(mine) and os.path.isdir(legacy)
    finally:
        for path in (mine, legacy):
            os.rmdir(path)


def test_a_measurer_removes_the_directory_of_a_killed_one(tmp_path):
    from explorer.measure import LocalMeasurer

    code = (
        "import sys; from explorer.measure import LocalMeasurer; m = LocalMeasurer();"
        "m._ensure_pool(); print(m._artifact_dir, flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    left = proc.stdout.readline().strip()
    assert os.path.basename(left).startswith("explorer-measure-") and os.path.isdir(left)
    kill_9(proc)
    assert os.path.isdir(left)  # kill -9: nobody cleaned up
    with LocalMeasurer() as m:
        m._ensure_pool()
        assert not os.path.exists(left)
