"""``explorer measure --trace`` and ``explorer tune --start`` with files nobody here picked.

Bad input is refused before any measurement: exit 2, one ``error:`` line naming the file and
what is wrong with it, nothing stored. Random mutations of real traces go through the real CLI;
each is refused that way or measured exactly as written.
"""

from __future__ import annotations

import copy
import json
import sqlite3
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.cli import main
from explorer.session import ScheduleSession
from explorer.workloads import get_workload

sys.path.insert(0, str(Path(__file__).parent / "session"))
from test_trace_fuzz import _mutations, _real_traces, _searched

SHAPE = ["matmul", "-p", "M=64", "-p", "N=64", "-p", "K=64"]


def _rows(db: Path) -> tuple[int, int]:
    if not db.exists():
        return (0, 0)
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        trials = conn.execute("SELECT count(*) FROM trials").fetchone()[0]
    return runs, trials


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], db: Path) -> str:
    before = _rows(db)
    code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "Check failed" not in err
    assert _rows(db) == before  # nothing stored, not even an empty run
    return lines[0]


def _refused_or_ran(
    code: int, capsys: pytest.CaptureFixture[str], db: Path, before: object
) -> bool:
    """Whether ``main`` refused its input as the contract says (exit 2, one error line, nothing
    stored); otherwise it must have run (exit 0 or 1), never with a traceback."""
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out
    assert code in (0, 1, 2), err
    if code != 2:
        return False
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert _rows(db) == before
    return True


def _bad_files(tmp: Path) -> dict[str, Path]:
    trace = _searched()[0]
    zero = copy.deepcopy(trace)
    zero[1][0] = [zero[1][0][0], [1, 1, 0, 64]]
    index999 = copy.deepcopy(trace)
    index999[1][0] = [999, index999[1][0][1]]
    wrong_attr = copy.deepcopy(trace)
    wrong_attr[0][4][2] = ["x", 64]
    product = copy.deepcopy(trace)
    product[1][0] = [product[1][0][0], [2, 2, 2, 2]]
    values: dict[str, object] = {
        "unknown_instruction": [[["NoSuchInstruction", [], [], []]], []],
        "wrong_attributes": wrong_attr,
        "a_string": "a trace",
        "a_number": 5,
        "null": None,
        "trace_5": {"trace": 5},
        "zero_factor": zero,
        "index_999": index999,
        "product_mismatch": product,
        "no_trace_field": {"steps": []},
    }
    files = {}
    for name, value in values.items():
        files[name] = tmp / f"{name}.json"
        files[name].write_text(json.dumps(value))
    files["binary"] = tmp / "binary.json"
    files["binary"].write_bytes(bytes(range(256)) * 4)
    files["missing"] = tmp / "nope" / "missing.json"
    files["other_workload"] = tmp / "other.json"  # a saved session of another shape
    ScheduleSession(get_workload("matmul", M=64, N=64, K=32)).save(files["other_workload"])
    return files


@pytest.mark.parametrize("command", ["measure", "tune"])
def test_bad_trace_files_are_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    db = tmp_path / "records.db"
    option = "--trace" if command == "measure" else "--start"
    extra = [] if command == "measure" else ["--strategy", "droplet", "--trials", "4", "-q"]
    for name, path in _bad_files(tmp_path).items():
        line = _refused(capsys, [command, *SHAPE, option, str(path), "--db", str(db), *extra], db)
        assert path.name in line, (name, line)
        if name in ("zero_factor", "index_999", "product_mismatch", "unknown_instruction"):
            assert "instruction" in line, (name, line)
        if name == "other_workload":
            assert "K=32" in line, line


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(trace=_mutations(), data=st.data())
def test_measure_mutated_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trace: object, data: st.DataObject
) -> None:
    del data
    db = tmp_path / "fuzz.db"
    path = tmp_path / "mutated.json"
    path.write_text(json.dumps(trace))
    before = _rows(db)
    code = main(["measure", *SHAPE, "--trace", str(path), "--db", str(db), "--repeat", "1"])
    if _refused_or_ran(code, capsys, db, before):
        return
    # Accepted: measured as written, one manual run with one trial whose trace is the file's.
    assert code in (0, 1)
    runs, trials = _rows(db)
    assert (runs, trials) == (before[0] + 1, before[1] + 1)
    with sqlite3.connect(db) as conn:
        (stored,) = conn.execute("SELECT trace_json FROM trials ORDER BY id DESC").fetchone()
    assert sorted(json.loads(stored)[1]) == sorted(trace[1])  # type: ignore[index]


def test_real_traces_measure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "records.db"
    path = tmp_path / "hand.json"
    path.write_text(_real_traces()[0])
    assert main(["measure", *SHAPE, "--trace", str(path), "--db", str(db), "--repeat", "1"]) == 0
    assert "ok" in capsys.readouterr().out


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(trace=_mutations())
def test_tune_start_with_mutated_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trace: object
) -> None:
    db = tmp_path / "start.db"
    path = tmp_path / "start.json"
    path.write_text(json.dumps(trace))
    before = _rows(db)
    argv = ["tune", *SHAPE, "--strategy", "droplet", "--start", str(path), "--trials", "2"]
    code = main([*argv, "--batch", "2", "-q", "--db", str(db)])
    if _refused_or_ran(code, capsys, db, before):
        return
    # Accepted: the run's first trial is the user's schedule, exactly as the file has it.
    assert code in (0, 1)
    with sqlite3.connect(db) as conn:
        (first,) = conn.execute(
            "SELECT trace_json FROM trials WHERE run_id = (SELECT max(id) FROM runs) "
            "AND is_remeasure = 0 ORDER BY seq LIMIT 1"  # its unscheduled baseline comes first
        ).fetchone()
    assert sorted(json.loads(first)[1]) == sorted(trace[1])  # type: ignore[index]
