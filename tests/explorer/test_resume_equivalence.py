"""A resumed run equals an uninterrupted one: real processes, real kill -9, real SQLite files.

The searches measure with the shipped recording (``tests/explorer/_tune_replay.py``), so timings
are identical in every process and any difference comes from the resume itself.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.measure import trace_key
from explorer.storage import RunStatus, SQLiteStore, summarize_run

SCRIPT = Path(__file__).with_name("_tune_replay.py")
NUM_BATCHES = 6  # 24 trials in batches of 4 (the script's defaults)


def start(db: Path, strategy: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(db), strategy, "--scratch", str(db.parent), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_while_measuring(proc: subprocess.Popen, batch: int) -> None:
    """SIGKILL ``proc`` once it reports measuring ``batch`` (before that batch is stored)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == f"measuring {batch}":
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""


def finish(proc: subprocess.Popen) -> None:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err


def searched(db: Path) -> tuple[list[str], tuple[str, float | None], RunStatus]:
    """The run's trials (trace keys, in order, re-measurements left out), its best and status."""
    with SQLiteStore(db) as store:
        (run,) = store.runs()
        trials = store.trials(run_id=run.id)
        summary = summarize_run(run.id, store.trial_rows(run_id=run.id))
        best = store.get_trial(summary.best_trial_id)
        keys = [trace_key(t.candidate.trace) for t in trials if not t.is_remeasure]
        return keys, (trace_key(best.candidate.trace), summary.best_secs), run.status


@pytest.mark.parametrize("strategy", ["random", "autotvm"])
def test_kill_9_then_resume_measures_what_an_uninterrupted_run_measures(tmp_path, strategy):
    rng = random.Random()
    first_kill = rng.randrange(1, NUM_BATCHES - 1)
    # The resumed process counts its own batches from 0; kill it again before it is done.
    second_kill = rng.randrange(0, NUM_BATCHES - first_kill - 1)
    where = f"killed at batch {first_kill}, then at batch {second_kill} of the resume"

    baseline = start(tmp_path / "whole.db", strategy, "--delay", "0")
    finish(baseline)
    whole, whole_best, whole_status = searched(tmp_path / "whole.db")
    assert len(whole) == 24 and whole_status == "finished"

    db = tmp_path / "killed.db"
    kill_while_measuring(start(db, strategy), first_kill)
    keys, _, status = searched(db)
    assert status is RunStatus.INTERRUPTED, where  # its owner is gone: not "running"
    assert keys == whole[: 4 * first_kill], where
    kill_while_measuring(start(db, strategy, "--resume", "1"), second_kill)
    assert searched(db)[0] == whole[: 4 * (first_kill + second_kill)], where
    finish(start(db, strategy, "--resume", "1", "--delay", "0"))

    keys, best, status = searched(db)
    assert status == "finished", where
    assert keys == whole, where  # the same points, in the same order
    assert best == whole_best, where
