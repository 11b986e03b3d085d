"""A model task's unscheduled program is its own reference (``explorer.workloads.TASK``): timing
it as a run's baseline (every task of an import, every tune's first measurement) compared it
with a second compile of itself, a fifth of a ResNet-18 import's work. Its check's call is
still made and timed; only the reference and the comparison are left out. A scheduled
candidate of the same task, and a catalog operator's baseline, are checked as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.measure._base import is_own_reference
from explorer.measure._worker import _Worker
from explorer.search import baseline_candidate
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import _task, get_workload, task_workload

ADD = _task._EXAMPLE  # a broadcast add, as the Relax lowering writes one


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.local_cpu(num_cores=1)


@pytest.fixture(scope="module")
def task():
    return task_workload("add", ADD)


def _scheduled(cand):
    """The same program with one loop split: a schedule, no longer the baseline."""
    from explorer import _tvm
    from explorer.core import Candidate

    sch = _tvm.Schedule(cand.workload.mod())
    i, _ = sch.get_loops(sch.get_sblock("add"))
    sch.split(i, factors=[None, 8])
    return Candidate(cand.workload, cand.target, _tvm.trace_to_json(sch.trace))


def test_only_a_task_s_baseline_is_its_own_reference(task, target):
    base = baseline_candidate(task, target)
    assert is_own_reference(base)
    assert not is_own_reference(_scheduled(base))
    assert not is_own_reference(baseline_candidate(get_workload("matmul", M=8, N=8, K=8), target))


def _run(worker: _Worker, cand, path: Path, *, own: bool) -> dict:
    built = worker.build(
        {
            "workload": cand.workload.to_json(),
            "target": cand.target.to_json(),
            "trace": cand.trace,
            "path": str(path),
        }
    )
    assert built["ok"], built
    request = {"workload": cand.workload.to_json(), "path": str(path), "check": True}
    request |= {"own_reference": own, "repeat": 2, "min_repeat_secs": 0.001}
    return worker.run(request)


def test_the_baseline_is_called_not_compared_and_a_schedule_is_compared(
    task, target, tmp_path, monkeypatch
):
    compiled = []
    default_build = _task._default_build.__wrapped__
    monkeypatch.setattr(
        _task, "_default_build", lambda text: compiled.append(text) or default_build(text)
    )
    worker = _Worker("runner", 1 << 30)
    worker.pinned = True  # in this process: never move the test's own thread between cores
    base = baseline_candidate(task, target)

    reply = _run(worker, base, tmp_path / "base.so", own=True)
    assert reply["ok"] and reply["run_secs"], reply
    assert compiled == []  # no second compile of the same program

    reply = _run(worker, _scheduled(base), tmp_path / "split.so", own=False)
    assert reply["ok"], reply
    assert compiled == [dict(task.params)["tir"]]  # a schedule is still compared with it


def test_a_measurer_times_a_task_s_baseline_as_before(task, target):
    config = MeasureConfig(repeat=2, min_repeat_secs=0.001, warmup_secs=0.0)
    with LocalMeasurer(config) as measurer:
        base, split = measurer.measure(
            [baseline_candidate(task, target), _scheduled(baseline_candidate(task, target))]
        )
    assert base.status is MeasureStatus.OK and len(base.run_secs) == 2, base.error_msg
    assert split.status is MeasureStatus.OK, split.error_msg
