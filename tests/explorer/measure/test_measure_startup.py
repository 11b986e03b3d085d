"""How many workers start, and when: each one costs a TVM import (about a second of CPU)."""

from __future__ import annotations

import subprocess
import sys

import psutil
from _measure_cases import FAST, MEMORY_LIMIT, tiled, unscheduled

from explorer.core._pool import WorkerPool
from explorer.measure import Candidate, LocalMeasurer
from explorer.types import MeasureStatus

HOOKS = "explorer.testing.hooks"


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_importing_the_measurer_does_not_import_tvm():
    # `explorer measure` starts its workers before this process loads TVM for the workload.
    script = "import sys, explorer.measure; print(sorted(m for m in sys.modules if m == 'tvm'))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_batch_of_one_is_built_by_the_runner_without_a_builder(mm, target):
    with LocalMeasurer(FAST, num_build_workers=2) as m:
        (r,) = m.measure([unscheduled(mm, target)])
        assert r.build_secs is not None and r.build_secs > 0
        assert len(r.run_secs) == FAST.repeat, r.error_msg
        assert m.worker_pids()["build"] == []
        runner = m.worker_pids()["run"]
        assert len(runner) == 1

        (bad,) = m.measure([Candidate(mm, target, [[], ["nonsense"]])])
        assert bad.status is MeasureStatus.BUILD_ERROR
        assert "json decision" in bad.error_msg  # TVM's own message
        assert m.worker_pids()["run"] == runner  # a refused trace does not cost the runner

        m.measure([tiled(mm, target, 8, 16), tiled(mm, target, 16, 8)])  # not built before
        assert len(m.worker_pids()["build"]) == 2
        assert m.num_workers_replaced == 0


def test_started_workers_are_the_ones_measure_uses(mm, target):
    with LocalMeasurer(FAST, num_build_workers=2) as m:
        m.start_workers(num_candidates=1)  # returns before they have imported TVM
        started = m.worker_pids()
        assert started["build"] == [] and len(started["run"]) == 1
        (r,) = m.measure([unscheduled(mm, target)])
        assert len(r.run_secs) == FAST.repeat, r.error_msg
        assert m.worker_pids() == started


def test_closing_while_workers_still_start_leaves_no_process():
    m = LocalMeasurer(FAST, num_build_workers=2)
    m.start_workers(num_candidates=5)
    pids = set(sum(m.worker_pids().values(), []))
    assert len(pids) == 3  # two builders (the pool's size) and the runner
    m.close()
    assert not pids & _children()


def test_the_pool_starts_only_the_builders_asked_for_and_reuses_a_live_one():
    pool = WorkerPool(num_build_workers=2, memory_limit_bytes=MEMORY_LIMIT)
    try:
        pool.start(num_builders=1)
        (first,) = pool.pids()["build"]
        for _ in range(2):  # one build at a time: the live builder, never a new one
            assert pool.call(f"{HOOKS}:getpid", role="build")["value"] == first
        assert pool.pids()["build"] == [first]
    finally:
        pool.close()


def test_a_closed_worker_leaves_by_itself_with_status_zero():
    pool = WorkerPool(num_build_workers=1, memory_limit_bytes=MEMORY_LIMIT)
    pool.start(runner_threads=1)
    workers = [w for w in [*pool._builders, pool._runner] if w is not None]
    assert len(workers) == 2
    pool.close()
    assert [w._proc.returncode for w in workers] == [0, 0]  # not killed after the grace time
