"""Fixtures for the storage tests: real workloads, real TVM traces, real SQLite files, and a
real PostgreSQL server of the tests' own (``postgres_server``, ``pg_url``)."""

from __future__ import annotations

import atexit
import importlib.util
import os
from collections.abc import Callable, Iterator
from typing import Any, NoReturn

import pytest
from _pg_server import PostgresServer, find_bin_dir

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


# -- PostgreSQL ----------------------------------------------------------------------------------
def _unavailable(reason: str) -> NoReturn:
    """No server for the PostgreSQL tests: a failure under CI (``make test`` installs one),
    a skip elsewhere."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL tests cannot run: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests need a server: {reason}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A private server (Debian's binaries, run as the ``postgres`` user when we are root) on a
    free 127.0.0.1 port, for the whole session; stopped and removed afterwards."""
    if importlib.util.find_spec("psycopg") is None:
        _unavailable("the psycopg package is missing (pip install -e '.[dev]')")
    bin_dir = find_bin_dir()
    if bin_dir is None:
        _unavailable(
            "no /usr/lib/postgresql/*/bin/pg_ctl (`make postgresql` installs Debian's package)"
        )
    server = PostgresServer(bin_dir)
    atexit.register(server.stop)  # also when the session dies before its teardown
    try:
        server.start()
    except Exception as exc:  # noqa: BLE001 - whatever stopped the server, the tests say it
        server.stop()
        _unavailable(f"the test server did not start: {exc}")
    yield server
    server.stop()
    assert not server.is_running()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """The URL of a new, empty database on the test server."""
    return postgres_server.url(postgres_server.create_database())
