"""A run's life through the `explorer` command: real processes, real signals, a real database.

kill -9, SIGTERM and Ctrl-C (SIGINT) end a run as `interrupted`; `explorer tune --resume RUN`
alone continues it on its own terms; a second resume of a live run is refused; `runs` and `tune`
agree on the count and the best.
"""

from __future__ import annotations

import csv
import glob
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _terminal import EXPLORER

from explorer.storage import RunStatus, SQLiteStore

TINY = ["matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16"]


def explorer(*args: str, db: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "explorer", *args, "--db", str(db)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def start(*args: str, db: Path) -> subprocess.Popen:
    cmd = [*EXPLORER, *args, "--db", str(db)]  # Ctrl-C's default action, as in a terminal
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ended(proc: subprocess.Popen, timeout: float = 60) -> str:
    """The process's stderr once it ended; if it did not within ``timeout``, the failure shows
    where each of its threads was (``explorer`` prints them on SIGUSR1)."""
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        stacks = proc.communicate()[1]
        raise AssertionError(f"still running after {timeout} s:\n{stacks}") from None


def wait_for_trials(db: Path, n: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until run 1 has ``n`` stored trials (the process is then between or in batches)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if db.exists():
            with SQLiteStore(db) as store:
                if store.runs() and store.count_trials(run_id=1) >= n:
                    return
        time.sleep(0.2)
    raise AssertionError(f"run 1 never reached {n} trials")


def status(db: Path) -> RunStatus:
    with SQLiteStore(db) as store:
        return store.get_run(1).status


def listing(db: Path) -> tuple[int, str, str]:
    """Run 1's row of `explorer runs`: trials, best, status (the speed-up over the unscheduled
    baseline, "-" without one, sits between best and status)."""
    out = explorer("runs", db=db)
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stdout.splitlines() if ln.split()[0] == "1"]
    m = re.match(r"\s*1 random\s+(\d+)\s+([\d.]+ \S+)\s+(?:[\d.]+x|-)\s+(\w+)", line)
    assert m, line
    return int(m.group(1)), m.group(2), m.group(3)


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch) -> Path:
    """The runs' own temporary directory: any measurer starting in another test removes the
    directory a killed run left behind (as it should), which would race these checks."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def measure_dirs(pid: int) -> list[str]:
    pattern = os.path.join(os.environ["TMPDIR"], f"explorer-measure-*-{pid}-*")
    return glob.glob(pattern)


def test_kill_9_then_resume_alone_finishes_the_run_on_its_own_terms(tmp_path):
    db = tmp_path / "records.db"
    proc = start("tune", *TINY, "--trials", "12", "--batch", "4", "--seed", "3", "-q", db=db)
    wait_for_trials(db, 4, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert status(db) is RunStatus.INTERRUPTED  # its owner is gone: not `running` forever
    assert listing(db)[2] == "interrupted"
    left = measure_dirs(proc.pid)
    assert left  # kill -9 leaves the measurer's directory behind...

    refused = explorer("tune", "--resume", "1", "--trials", "64", "--strategy", "autotvm", db=db)
    assert refused.returncode == 2 and "--trials 64 (the run has 12)" in refused.stderr
    assert "--strategy autotvm (the run has random)" in refused.stderr
    assert "Traceback" not in refused.stderr and status(db) is RunStatus.INTERRUPTED
    missing = explorer("tune", "--resume", "99", db=db)
    assert missing.returncode == 2 and "no run 99" in missing.stderr

    resumed = explorer("tune", "--resume", "1", "-q", db=db)  # no workload, no options
    assert resumed.returncode == 0, resumed.stderr
    assert (
        "run 1: 12 trials (the trial budget was used)" in resumed.stdout
    )  # the run's budget, not the default 64
    assert not any(os.path.exists(d) for d in left)  # ...removed by the next measurer
    best = re.search(
        r", (\S+ \S+), its fastest repeat re-timed side by side", resumed.stdout
    ).group(1)
    assert listing(db) == (12, best, "finished")  # `runs` agrees with `tune`

    again = explorer("tune", "--resume", "1", "-q", db=db)  # finished: nothing to do
    assert again.returncode == 0 and "run 1: 12 trials" in again.stdout
    assert f", {best}, its fastest repeat re-timed side by side" in again.stdout
    export = explorer("export", "--format", "csv", str(tmp_path / "t.csv"), db=db)
    assert export.returncode == 0, export.stderr
    rows = list(csv.DictReader((tmp_path / "t.csv").open()))
    assert sum(r["is_remeasure"] == "0" for r in rows) == 12
    # the baseline, then the 3 best and the baseline re-timed side by side once (1 to 3 rounds
    # each: a schedule 3x slower than a round's fastest sits out the later ones), not per resume
    retimed = [r for r in rows if r["is_remeasure"] == "1"]
    assert 1 + 4 <= len(retimed) <= 1 + 4 * 3
    assert len({r["created_at"] for r in retimed[1:]}) == 1  # one confirmation, one batch
    assert 2 <= sum(r["is_baseline"] == "1" for r in rows) <= 4


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["sigterm", "ctrl-c"]
)
def test_sigterm_and_ctrl_c_end_a_run_as_interrupted_and_say_how_to_resume(tmp_path, signum, code):
    db = tmp_path / "records.db"
    proc = start("tune", *TINY, "--trials", "40", "--batch", "4", "-q", db=db)
    wait_for_trials(db, 4, proc)
    proc.send_signal(signum)
    err = ended(proc)
    assert proc.returncode == code, err
    assert f"explorer tune --resume 1 --db {db}" in err and "Traceback" not in err
    with SQLiteStore(db) as store:
        run = store.get_run(1)
        assert run.status == "interrupted" and run.owner is None  # stored, released
        assert store.count_trials(run_id=1) >= 4
    assert measure_dirs(proc.pid) == []  # cleaned up on the way out


def test_a_running_command_says_where_its_threads_are_on_sigusr1_and_goes_on(tmp_path):
    db = tmp_path / "records.db"
    proc = start("tune", *TINY, "--trials", "40", "--batch", "4", "-q", db=db)
    wait_for_trials(db, 4, proc)
    proc.send_signal(signal.SIGUSR1)
    wait_for_trials(db, 8, proc)  # it went on measuring
    proc.send_signal(signal.SIGTERM)
    err = ended(proc)
    assert proc.returncode == 143, err
    assert "Current thread" in err and "(most recent call first)" in err, err


def test_a_second_resume_of_a_live_run_is_refused(tmp_path):
    db = tmp_path / "records.db"
    first = start("tune", *TINY, "--trials", "40", "--batch", "4", "-q", db=db)
    wait_for_trials(db, 4, first)
    second = explorer("tune", "--resume", "1", "-q", db=db)
    assert second.returncode == 2, second.stderr
    assert f"already running (in pid {first.pid}" in second.stderr
    first.send_signal(signal.SIGTERM)
    ended(first)
    with SQLiteStore(db) as store:
        searched = [t for t in store.trials(run_id=1) if not t.is_remeasure]
        keys = {t.candidate.decisions["point"].__repr__() for t in searched}
        assert len(keys) == len(searched)  # nothing measured twice


def test_a_start_that_fails_stores_nothing_and_manual_runs_end(tmp_path):
    db = tmp_path / "records.db"
    no_workload = explorer("tune", "-q", db=db)
    assert no_workload.returncode == 2 and "needs a workload" in no_workload.stderr
    trace = tmp_path / "t.json"
    trace.write_text("[[], []]")
    refused = explorer("tune", *TINY, "--strategy", "random", "--start", str(trace), db=db)
    assert refused.returncode == 2
    assert not db.exists() or SQLiteStore(db).runs() == []
    measured = explorer("measure", *TINY, db=db)
    assert measured.returncode == 0, measured.stderr
    with SQLiteStore(db) as store:
        (run,) = store.runs()
        assert run.strategy == "manual" and run.status == "finished" and run.owner is None
