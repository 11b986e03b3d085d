"""The transfer benchmark's per-workload copies are scratch it remakes every run: a run killed
mid-search leaves a ``-wal`` holding commits beside its copy, and the next run must still start
(it was refused with "...-wal beside it holds commits")."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from explorer.storage import get_store

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_transfer import _fresh_copy  # the benchmarks are scripts, not a package

# A writer that dies without closing: its commits stay in the -wal (no checkpoint on close).
_DIE_MID_WRITE = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode = WAL")
conn.execute("PRAGMA wal_autocheckpoint = 0")
conn.execute("CREATE TABLE scratch (x)")
conn.execute("INSERT INTO scratch VALUES (1)")
os._exit(0)
"""


def test_a_killed_runs_copy_is_replaced(tmp_path):
    pre = get_store(tmp_path / "pretrain.db")
    dest = tmp_path / "transfer_matmul.db"
    _fresh_copy(pre, dest)
    subprocess.run([sys.executable, "-c", _DIE_MID_WRITE, str(dest)], check=True)
    assert Path(f"{dest}-wal").stat().st_size > 0  # the state the killed run left

    assert _fresh_copy(pre, dest) == dest
    pre.close()
    assert not Path(f"{dest}-wal").exists()
    with contextlib.closing(sqlite3.connect(f"file:{dest}?mode=ro", uri=True)) as copy:
        tables = {r[0] for r in copy.execute("SELECT name FROM sqlite_master")}
    assert {"runs", "trials"} <= tables  # the store's schema
    assert "scratch" not in tables  # the new copy is the pretraining database, not the old one
