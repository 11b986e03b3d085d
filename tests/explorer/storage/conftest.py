"""Fixtures for the storage tests: real workloads, real TVM traces, real SQLite files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from explorer.storage import NewTrial, SQLiteStore
from explorer.target import Target
from explorer.testing.contracts._store import make_trial
from explorer.workloads import Workload, get_workload


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


@pytest.fixture(scope="session", name="make_trial")
def make_trial_fixture() -> Callable[..., NewTrial]:
    """``make_trial(workload, target, secs, status=OK, trace=0, ...)`` (the contract kit's)."""
    return make_trial


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
