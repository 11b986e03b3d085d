"""Shared fixtures and options for the whole suite."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

from explorer.machine import CACHE_ENV as PEAK_CACHE_ENV
from explorer.nas import JAX_CACHE_ENV

# No per-example time limit: Hypothesis's default deadline (200 ms) is a timing assertion, and
# on a busy machine an example of a storage property took 472 ms once and 3 ms when replayed
# (a clean-clone CI, 2026-12-03). Speed is measured in the benchmarks; a test that needs a
# limit sets its own.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

GOLDEN_DIR = Path(__file__).parent / "golden"
# The machine's measured peak is kept in the user's cache (explorer.machine). A suite measures
# it under its own load (two test processes, CPU burners), and its notebooks measure fleet
# devices' peaks: neither reading may become the user's. The suite keeps its own, in a folder
# made by the first process (the controller: xdist's workers inherit its environment) and
# removed with it; so are the programs XLA compiles for the NAS tests (explorer.nas), which
# start cold and are then shared by the suite's processes.
_OWN_CACHE_FOLDER = "EXPLORER_TESTS_CACHE_FOLDER"
_cache_folder_key = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(_OWN_CACHE_FOLDER):  # an xdist worker: the controller made it
        return
    folder = tempfile.mkdtemp(prefix="explorer-tests-cache-")
    os.environ[_OWN_CACHE_FOLDER] = folder
    os.environ[PEAK_CACHE_ENV] = os.path.join(folder, "peak.json")
    os.environ[JAX_CACHE_ENV] = os.path.join(folder, "jax")  # XLA's programs, shared by the suite
    config.stash[_cache_folder_key] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_cache_folder_key, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(_OWN_CACHE_FOLDER, None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files from the current output instead of comparing",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest):
    """``golden("session/matmul_tiling.txt", text)`` compares ``text`` with the stored file.

    Run ``pytest --update-golden`` to rewrite the files (review the diff before committing). The
    TVM version is written in each file's header so an upgrade shows up as one reviewable diff.
    """
    from explorer import _tvm

    update = request.config.getoption("--update-golden")

    def check(relpath: str, text: str) -> None:
        path = GOLDEN_DIR / relpath
        body = f"# TVM {_tvm.TVM_VERSION}\n{text.rstrip()}\n"
        if update or not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
            if not update:
                pytest.fail(f"golden file {relpath} did not exist; written, review and re-run")
            return
        assert body == path.read_text(), f"output differs from golden file {relpath}"

    return check


@pytest.fixture(scope="session")
def cpu_target():
    from explorer.target import Target

    return Target.local_cpu()


@pytest.fixture
def burners():
    """Two CPU-bound processes beside the test, stopped with it: the explorer's verdicts must
    hold on a busy machine (a laptop with a build running), not only on a quiet one."""
    from explorer.testing.load import cpu_burners

    with cpu_burners(2) as pids:
        yield pids


@pytest.fixture
def shared_burners():
    """``burners`` in the test's own session: its scheduling group on Linux, where they
    compete with the explorer's threads one by one (a suite's other workers, a build started
    from the same shell)."""
    from explorer.testing.load import cpu_burners

    with cpu_burners(2, shared_session=True) as pids:
        yield pids
