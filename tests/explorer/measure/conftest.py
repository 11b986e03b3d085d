"""Fixtures for the measure package: real TVM, small shapes, one shared measurer per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _measure_cases import FAST

from explorer.measure import LocalMeasurer
from explorer.target import Target
from explorer.testing import hooks
from explorer.workloads import Workload, get_workload


@pytest.fixture(scope="session")
def target() -> Target:
    return Target.local_cpu()


@pytest.fixture(scope="session")
def mm() -> Workload:
    return get_workload("matmul", M=64, N=64, K=64)


@pytest.fixture(scope="module", autouse=True)
def hook_family() -> Iterator[None]:
    """The test-only ``hook`` family, registered only while this package's tests run."""
    with hooks.registered():
        yield


@pytest.fixture(scope="module")
def measurer() -> Iterator[LocalMeasurer]:
    with LocalMeasurer(FAST, num_build_workers=2) as m:
        yield m
