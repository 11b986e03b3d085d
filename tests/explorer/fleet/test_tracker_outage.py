"""A tracker outage during `explorer tune` (issue 21): the run's summary says what was lost.

Seen on main: the fleet died mid-run, 16 of 32 trials became `run_error`, and the summary still
said "32 trials (the trial budget was used)" and "best ... (re-measured)" although the final
re-measurement had failed too. Real tracker, real server, real CLI; the fleet is killed (process
groups, SIGKILL) as soon as the run's first batch is stored.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

from explorer.errors import StoreError
from explorer.fleet import default_servers, start_fleet, stop_fleet
from explorer.storage import get_store
from explorer.testing.ports import free_port


def stored_trials(db) -> int:
    """The trials `tune` stored so far (0 while it is still creating the database: a read-only
    open refuses a file that holds no database yet)."""
    try:
        with get_store(db, read_only=True) as store:
            return store.count_trials(remeasures=False)
    except StoreError:
        return 0


def test_a_dead_fleet_leaves_failed_trials_and_an_unconfirmed_best_said_plainly(tmp_path):
    state, db = tmp_path / "fleet.json", tmp_path / "records.db"
    fleet = start_fleet(default_servers(1, threads=1), state=state, port=free_port())
    cmd = [
        sys.executable, "-m", "explorer", "tune", "matmul",
        "-p", "M=64", "-p", "N=64", "-p", "K=64", "--strategy", "random",
        "--trials", "8", "--batch", "4", "--seed", "0", "-q",
        "--tracker", str(fleet.tracker), "--key", "local", "--db", str(db),
    ]  # fmt: skip
    tune = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and tune.poll() is None:
            if stored_trials(db) >= 4:
                break
            time.sleep(0.2)
        stop_fleet(state)  # the tracker and its server go away mid-run
        out, err = tune.communicate(timeout=600)
    finally:
        if tune.poll() is None:
            tune.kill()
        stop_fleet(state)
    assert tune.returncode == 0, out + err
    lines = out.splitlines()
    # the second batch, measured with no fleet left (all of it, unless a kernel was quicker)
    said = re.fullmatch(
        r"run 1: 8 trials \(the trial budget was used\), ([1-4]) of them failed \(\1 run_error\)",
        lines[0],
    )
    assert said, out
    best = next(line for line in lines if line.startswith("best: "))
    assert "not confirmed: re-timing it failed" in best and "re-timed side by side" not in best
