"""The `explorer` command, run as a user runs it: a real process, a real database file."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

SMALL = ["matmul", "-p", "M=32", "-p", "N=32", "-p", "K=32"]


def run(*args: str, db: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "explorer", *args]
    if db is not None:
        cmd += ["--db", str(db)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_help_everywhere():
    top = run("--help")
    assert top.returncode == 0
    for command in ("workloads", "show", "measure", "tune", "runs", "export", "import", "model"):
        assert command in top.stdout
        sub = run(command, "--help")
        assert sub.returncode == 0, sub.stderr
        assert "usage: explorer " + command in sub.stdout


def test_workloads_lists_families_and_presets():
    out = run("workloads")
    assert out.returncode == 0
    assert "matmul" in out.stdout and "matmul_1024" in out.stdout
    # a model's task is named MODEL:TASK; its default program is not printed
    assert "named MODEL:TASK" in out.stdout and "T.prim_func" not in out.stdout


def test_show_prints_sizes_and_loop_nest():
    out = run("show", *SMALL, "--script")
    assert out.returncode == 0, out.stderr
    assert "FLOPs:    65,536" in out.stdout  # 2*32*32*32
    assert "C: i(32) > j(32) > k(32)" in out.stdout
    assert "T.sblock" in out.stdout


def test_bad_input_gives_a_clear_error_and_exit_2(tmp_path):
    out = run("show", "matmul", "-p", "M=0")
    assert out.returncode == 2
    assert "'M'" in out.stderr and "at least 1" in out.stderr
    out = run("show", "no_such_op")
    assert out.returncode == 2 and "no_such_op" in out.stderr
    out = run("measure", *SMALL, "--trace", str(tmp_path / "missing.json"), db=tmp_path / "r.db")
    assert out.returncode == 2 and "missing.json" in out.stderr
    out = run("nonsense")
    assert out.returncode == 2


def test_tune_then_runs_then_measure_then_export(tmp_path):
    db = tmp_path / "records.db"
    best = tmp_path / "best.json"
    out = run(
        "tune", *SMALL, "--trials", "6", "--batch", "3", "--save-trace", str(best), "-q", db=db
    )
    assert out.returncode == 0, out.stderr
    assert "run 1: 6 trials (the trial budget was used)" in out.stdout
    assert "GFLOPS" in out.stdout and best.exists()

    listing = run("runs", db=db)
    assert listing.returncode == 0
    assert "random" in listing.stdout and "matmul(K=32,M=32,N=32,dtype=float32)" in listing.stdout

    measured = run("measure", *SMALL, "--trace", str(best), db=db)
    assert measured.returncode == 0, measured.stderr
    assert measured.stdout.startswith("ok: median") and "matches NumPy" in measured.stdout

    # "Start from what I have": Droplet descends from the saved schedule; others refuse.
    started = run("tune", *SMALL, "--strategy", "droplet", "--start", str(best), "--trials",
                  "3", "--batch", "3", "-q", db=db)  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert "run 3: 3 trials" in started.stdout
    refused = run("tune", *SMALL, "--start", str(best), "--trials", "3", "-q", db=db)
    assert refused.returncode == 2 and "cannot start from a given schedule" in refused.stderr

    csv_path = tmp_path / "trials.csv"
    exported = run("export", "--format", "csv", str(csv_path), db=db)
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(csv_path.open()))
    # 6 search trials + re-measured best candidates + the manual measurement
    assert len(rows) >= 8
    assert {r["strategy"] for r in rows} == {"random", "manual", "droplet"}

    ms_dir = tmp_path / "ms"
    exported = run("export", "--format", "metaschedule", str(ms_dir), "--run", "1", db=db)
    assert exported.returncode == 0, exported.stderr
    assert (ms_dir / "database_tuning_record.json").exists()
    imported = run("import", str(ms_dir), db=tmp_path / "other.db")
    # an empty database learns the workloads from the export's explorer_workloads.json
    assert imported.returncode == 0, imported.stderr
    assert "0 with an unknown workload" in imported.stdout
    assert "imported 0 " not in imported.stdout
    imported = run("import", str(ms_dir), db=db)
    assert imported.returncode == 0, imported.stderr
    assert "imported" in imported.stdout and "0 with an unknown workload" in imported.stdout


def test_resume_continues_a_run(tmp_path):
    db = tmp_path / "records.db"
    first = run("tune", *SMALL, "--trials", "3", "--batch", "3", "-q", db=db)
    assert first.returncode == 0, first.stderr
    # a run resumes on its own terms: another budget is refused, the run alone is enough
    other = run("tune", *SMALL, "--trials", "6", "--batch", "3", "--resume", "1", "-q", db=db)
    assert other.returncode == 2 and "--trials 6 (the run has 3)" in other.stderr
    again = run("tune", "--resume", "1", "-q", db=db)
    assert again.returncode == 0, again.stderr
    assert "run 1: 3 trials" in again.stdout


@pytest.mark.parametrize("payload", [b"\x00garbage\xff" * 100])
def test_a_corrupt_database_is_refused_and_left_alone(tmp_path, payload):
    db = tmp_path / "records.db"
    db.write_bytes(payload)
    out = run("runs", db=db)
    assert out.returncode == 2
    assert "not a database" in out.stderr or "corrupt" in out.stderr
    assert db.read_bytes() == payload


def test_measure_reports_status_for_an_unscheduled_kernel(tmp_path):
    out = run("measure", *SMALL, db=tmp_path / "r.db")
    assert out.returncode == 0, out.stderr
    data = run("runs", db=tmp_path / "r.db").stdout
    assert "manual" in data
