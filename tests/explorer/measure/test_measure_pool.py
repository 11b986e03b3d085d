"""The worker pool on its own: protocol, environment, and the three ways to lose a worker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import MEMORY_LIMIT

from explorer.measure._pool import WorkerLost, WorkerPool

HOOKS = "explorer.testing.hooks"


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    p = WorkerPool(num_build_workers=1, memory_limit_bytes=MEMORY_LIMIT)
    yield p
    p.close()


def test_call_returns_the_value_from_the_worker_process(pool):
    reply = pool.call(f"{HOOKS}:getpid", num_threads=2)
    assert reply == {"ok": True, "value": pool.pids()["run"][0]}


def test_thread_counts_are_set_in_the_worker_environment(pool):
    assert pool.call(f"{HOOKS}:getenv", "TVM_NUM_THREADS", num_threads=2)["value"] == "2"
    assert pool.call(f"{HOOKS}:getenv", "TVM_NUM_THREADS", role="build")["value"] == "1"


def test_runner_is_restarted_for_another_thread_count(pool):
    pid2 = pool.call(f"{HOOKS}:getpid", num_threads=2)["value"]
    pid1 = pool.call(f"{HOOKS}:getpid", num_threads=1)["value"]
    assert pid1 != pid2
    assert pool.call(f"{HOOKS}:getenv", "TVM_NUM_THREADS", num_threads=1)["value"] == "1"


def test_an_exception_in_the_worker_is_a_reply_not_a_loss(pool):
    pid = pool.pids()["run"]
    reply = pool.call("explorer.testing.hooks:no_such_function", num_threads=1)
    assert reply["ok"] is False and "no_such_function" in reply["error"]
    assert pool.pids()["run"] == pid


def test_segfault_loses_the_worker_with_the_signal_name(pool):
    lost = pool.call(f"{HOOKS}:segfault", role="build")
    assert isinstance(lost, WorkerLost) and lost.kind == "crash"
    assert "signal SIGSEGV" in lost.message
    assert pool.call(f"{HOOKS}:getenv", "TVM_NUM_THREADS", role="build")["ok"]  # replaced


def test_timeout_kills_the_worker(pool):
    lost = pool.call(f"{HOOKS}:sleep", 60, num_threads=1, timeout=0.5)
    assert isinstance(lost, WorkerLost) and lost.kind == "timeout"
    assert "timeout of 0.5 s" in lost.message
    assert pool.call(f"{HOOKS}:sleep", 0, num_threads=1)["value"] == 0


def test_unbounded_allocation_is_killed_at_the_memory_limit(pool):
    lost = pool.call(f"{HOOKS}:allocate_forever", num_threads=1, timeout=60)
    assert isinstance(lost, WorkerLost) and lost.kind == "memory"
    assert "killed: exceeded the memory limit of 512 MiB" in lost.message
    assert pool.call(f"{HOOKS}:sleep", 0, num_threads=1)["ok"]


def test_closed_pool_refuses_work():
    p = WorkerPool(num_build_workers=1, memory_limit_bytes=0)
    p.close()
    with pytest.raises(RuntimeError, match="closed"):
        p.call(f"{HOOKS}:getpid")
