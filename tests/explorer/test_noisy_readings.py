"""A noisy reading is information, never a failure (issue 21): every command that once treated a
correct, busy-machine timing as "not ok" counts it as what it is.

Seen on main under load: `explorer check` said "15 not ok" for 15 correct schedules whose timings
spread; the MetaSchedule export dropped such trials without a word ("exported 39" of 48).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from explorer import _tvm
from explorer.measure import Candidate, MeasureResult
from explorer.storage import NewTrial, get_store
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

pytestmark = pytest.mark.serial  # `check` times kernels beside two burners

MATMUL = get_workload("matmul", M=32, N=32, K=32)


def tiled(target, ti: int) -> Candidate:
    sch = _tvm.Schedule(MATMUL.mod())
    i, _j, _k = sch.get_loops(sch.get_sblock("C"))
    sch.split(i, [None, ti])
    return Candidate(MATMUL, target, _tvm.trace_to_json(sch.trace))


def explorer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args], capture_output=True, text=True, timeout=600
    )


def test_the_metaschedule_export_keeps_noisy_trials_and_names_what_it_left_out(
    tmp_path, cpu_target
):
    db = tmp_path / "records.db"
    with get_store(db) as store:
        run = store.create_run(MATMUL, cpu_target, "random")
        tight = MeasureResult(MeasureStatus.OK, (1e-4, 1e-4, 1e-4), flops=1)
        spread = MeasureResult(MeasureStatus.OK, (1e-4, 5e-4, 1.2e-4), flops=1)
        failed = MeasureResult(MeasureStatus.RUN_ERROR, error_msg="crashed")
        store.add_trials(
            run.id,
            [
                NewTrial(tiled(cpu_target, 2), tight),
                NewTrial(tiled(cpu_target, 4), spread),
                NewTrial(tiled(cpu_target, 8), spread),
                NewTrial(tiled(cpu_target, 16), failed),
            ],
        )
    out = explorer("export", "--format", "metaschedule", str(tmp_path / "ms"), "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        f"exported 3 MetaSchedule tuning records to {tmp_path / 'ms'}; left out: 1 failed trial "
        "(MetaSchedule keeps no failures)"
    )
    again = explorer("export", "--format", "metaschedule", str(tmp_path / "ms"), "--db", str(db))
    assert "exported 0 MetaSchedule tuning records" in again.stdout
    assert "3 already in" in again.stdout


def test_check_counts_correct_schedules_as_ok_on_a_busy_machine(tmp_path, cpu_target, burners):
    db = tmp_path / "records.db"
    with get_store(db) as store:
        run = store.create_run(MATMUL, cpu_target, "metaschedule")
        unchecked = MeasureResult(MeasureStatus.UNCHECKED, (1e-4,), flops=1)
        store.add_trials(
            run.id, [NewTrial(tiled(cpu_target, t), unchecked) for t in (1, 2, 4, 8, 16)]
        )
    out = explorer("check", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("5 ok, 0 not ok"), out.stdout
