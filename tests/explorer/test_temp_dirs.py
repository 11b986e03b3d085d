"""Temporary folders a process leaves behind when it dies before its exit handlers run (a
notebook kernel killed on restart, a tune killed with SIGKILL) are removed by the next process
that makes one of the same kind on this machine."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from explorer.core import WorkerPool
from explorer.replay import open_copy
from explorer.replay._recording import EXAMPLE

# Each child makes its folder, then leaves with os._exit: no exit handler runs, as in a kill.
REPLAY = "from explorer.replay import open_copy; open_copy({path!r})"
WORKERS = (
    "from explorer.core import WorkerPool; WorkerPool(num_build_workers=1, memory_limit_bytes=0)"
)


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _dies_leaving(private_tmp: Path, code: str, prefix: str) -> list[Path]:
    subprocess.run(
        [sys.executable, "-c", f"import os; {code}; os._exit(0)"], check=True, timeout=120
    )
    left = sorted(private_tmp.glob(f"{prefix}*"))
    assert len(left) == 1  # what a killed process leaves
    return left


def test_a_dead_processs_replay_copy_is_removed_by_the_next_copy(private_tmp):
    (left,) = _dies_leaving(private_tmp, REPLAY.format(path=str(EXAMPLE)), "explorer-replay-")
    store = open_copy(EXAMPLE)
    try:
        assert not left.exists()
        assert len(list(private_tmp.glob("explorer-replay-*"))) == 1  # this process's own
    finally:
        store.close()


def test_a_dead_processs_worker_logs_are_removed_by_the_next_pool(private_tmp):
    (left,) = _dies_leaving(private_tmp, WORKERS, "explorer-workers-")
    pool = WorkerPool(num_build_workers=1, memory_limit_bytes=0)
    try:
        assert not left.exists()
        assert [Path(pool.log_dir)] == list(private_tmp.glob("explorer-workers-*"))
    finally:
        pool.close()
    assert not Path(pool.log_dir).exists()
