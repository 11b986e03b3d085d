"""The transfer benchmark: its plan reads transfer's effect at equal budgets, and its
per-workload copies are scratch it remakes every run (a run killed mid-search leaves a ``-wal``
holding commits beside its copy; the next run was refused with "...-wal beside it holds
commits")."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from explorer.storage import get_store

# The benchmarks are scripts, not a package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_transfer import Row, _fresh_copy, _goals, _plan

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


def test_every_transfer_row_has_its_twin_without_transfer():
    plan = _plan(["evolutionary", "autotvm"], seeds=2, budgets=(32, 64, 128))
    ours = {(label, budget, seed) for label, budget, seed in plan if label != "tune_tir_fast"}
    assert ours == {
        (f"{s}{t}", b, seed)
        for s in ("evolutionary", "autotvm")
        for t in ("", "+T")
        for b in (32, 64)
        for seed in (0, 1)
    }
    assert {(b, seed) for label, b, seed in plan if label == "tune_tir_fast"} == {
        (b, seed) for b in (64, 128) for seed in (0, 1)
    }


def test_the_goals_read_medians_of_the_re_timed_rows():
    gflops = {  # (label, budget): re-timed GFLOPS of seeds 0, 1, 2
        ("tune_tir_fast", 64): (90, 100, 110),
        ("tune_tir_fast", 128): (150, 160, 500),
        ("evolutionary+T", 32): (200, 210, 1),
        ("evolutionary", 32): (150, 140, 160),
        ("evolutionary+T", 64): (220, 220, 220),
        ("evolutionary", 64): (90, 95, 99),
    }
    rows = [
        Row("w", label, budget, seed, budget, 1.0, 0, 0.0, g, 0)
        for (label, budget), values in gflops.items()
        for seed, g in enumerate(values)
    ]
    lines = _goals(rows, ["evolutionary"], (32, 64, 128))
    assert "evolutionary+T@32 / tune_tir_fast@128 =  1.25" in lines[0]  # 200 / 160
    assert "with transfer  2.20, without  0.95" in lines[1]  # 220 / 100, 95 / 100
    assert "transfer's effect on evolutionary@32:  1.33x" in lines[2]  # 200 / 150


def test_only_held_out_workloads_are_accepted(tmp_path):
    """``--workloads pretrain`` would name its copy ``transfer_pretrain.db``, the pretraining
    database itself; any preset outside the held-out five was pretrained on."""
    bench = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_transfer.py"
    for name in ("pretrain", "matmul_512"):
        done = subprocess.run(
            [sys.executable, str(bench), "--workloads", name, "--out", str(tmp_path / "out")],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2
        assert f"invalid choice: '{name}'" in done.stderr
        assert not (tmp_path / "out").exists()  # refused before anything was written
