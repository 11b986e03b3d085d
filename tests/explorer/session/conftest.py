"""Fixtures of the session tests: workloads (with test-only families registered) and a target."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from session_helpers import TEST_FAMILIES

from explorer.target import Target
from explorer.workloads import FAMILIES, Workload, get_workload


@pytest.fixture(scope="module", autouse=True)
def session_test_families() -> Iterator[None]:
    # Module scope: the families must be gone before other packages' tests (the catalog tests
    # check the exact family list) run in the same pytest process.
    added = [f for f in TEST_FAMILIES if f.name not in FAMILIES]
    for family in added:
        FAMILIES[family.name] = family
    yield
    for family in added:
        FAMILIES.pop(family.name, None)


@pytest.fixture(scope="session")
def target() -> Target:
    return Target.local_cpu()


@pytest.fixture
def matmul() -> Workload:
    return get_workload("matmul", M=128, N=128, K=128)


@pytest.fixture
def batched() -> Workload:
    return get_workload("batch_matmul", batch=2, M=32, N=32, K=32)


@pytest.fixture
def mm_relu(session_test_families: None) -> Workload:
    return get_workload("session_mm_relu", N=64)


@pytest.fixture
def chain(session_test_families: None) -> Workload:
    return get_workload("session_chain", N=64)
