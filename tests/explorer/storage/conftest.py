"""Fixtures for the storage tests: real workloads, real TVM traces, real SQLite files."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from explorer import _tvm
from explorer.measure._base import Candidate, MeasureResult
from explorer.storage import NewTrial, SQLiteStore
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload, get_workload

SPLIT_FACTORS = (4, 8, 16, 32)


@functools.cache
def split_trace(workload: Workload, factor: int) -> Any:
    """A real JSON trace: the first loop of ``C`` split by ``factor``."""
    sch = _tvm.Schedule(workload.mod())
    i = sch.get_loops(sch.get_sblock("C"))[0]
    sch.split(i, [None, factor])
    return _tvm.trace_to_json(sch.trace)


@pytest.fixture(scope="session")
def workload() -> Workload:
    return get_workload("matmul", M=64, N=64, K=64)


@pytest.fixture(scope="session")
def other_workload() -> Workload:
    return get_workload("matmul", M=32, N=32, K=64)


@pytest.fixture(scope="session")
def target() -> Target:
    return Target.local_cpu()


@pytest.fixture(scope="session")
def other_target() -> Target:
    return Target(kind="llvm", mcpu="generic", num_cores=1, name="generic, 1 core")


@pytest.fixture(scope="session")
def make_trial() -> Callable[..., NewTrial]:
    """``make_trial(workload, target, secs, status=OK, trace=0, decisions=None, predicted=None,
    **other MeasureResult fields)``; ``trace`` indexes ``SPLIT_FACTORS``."""

    def make(
        workload: Workload,
        target: Target,
        secs: float | tuple[float, ...] | None = 1e-3,
        *,
        status: MeasureStatus = MeasureStatus.OK,
        trace: int = 0,
        decisions: Any = None,
        predicted: dict[str, float] | None = None,
        **fields: Any,
    ) -> NewTrial:
        run_secs = () if secs is None else secs if isinstance(secs, tuple) else (secs,)
        if status is not MeasureStatus.OK:
            fields.setdefault("error_msg", f"{status.value}: it broke")
        return NewTrial(
            Candidate(workload, target, split_trace(workload, SPLIT_FACTORS[trace]), decisions),
            MeasureResult(status, run_secs, flops=workload.flops(), **fields),
            predicted or {},
        )

    return make


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Any):
    s = SQLiteStore(tmp_path / "records.db" if request.param == "file" else ":memory:")
    yield s
    s.close()


@pytest.fixture
def db_path(tmp_path: Any) -> Any:
    """A fresh database path in its own directory (so sibling files can be checked)."""
    path = tmp_path / "db" / "records.db"
    path.parent.mkdir()
    return path
