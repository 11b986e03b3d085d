"""A device server with several threads keeps the session's launching thread off the cores of
TVM's worker threads (issue 21, a busy machine must not flip a verdict).

TVM binds each worker thread to a core and leaves the launching thread (it runs the first share
of every parallel loop itself) free to move; on a busy machine the OS moves it onto a worker's
core and a 2-thread kernel runs its halves one after the other. Local runs have bound it since
session 31 (``explorer.measure.keep_off_worker_cores``); a fleet's servers did not, so a
2-thread device read 2x slower from one session to the next. Checked here on a real tracker and
server: the session's thread is bound once the pool exists, never before, and a measurement on
such a device goes through the binding.
"""

from __future__ import annotations

import math
import os

import pytest

from explorer.core import PIN_LAUNCHER_FUNC, device_info, open_session
from explorer.fleet import ServerSpec, start_fleet, stop_fleet
from explorer.measure import MeasureConfig, RemoteMeasurer
from explorer.session import ScheduleSession
from explorer.testing.ports import free_port
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

FAST = MeasureConfig(repeat=3, min_repeat_secs=0.002, run_timeout_secs=10.0, max_spread=math.inf)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a 2-thread device needs 2 cores")
def test_a_two_thread_device_binds_its_launching_thread_once_the_pool_exists(tmp_path) -> None:
    state = tmp_path / "fleet.json"
    fleet = start_fleet([ServerSpec(key="two", threads=2)], state=state, port=free_port())
    try:
        session, _ = open_session(fleet.tracker, "two", session_timeout=60, queue_timeout=30)
        info = device_info(session)
        pin = session.get_function(PIN_LAUNCHER_FUNC)
        assert str(pin()) == "", "no kernel ran: TVM's pool (its workers' cores) does not exist"
        session.get_function("runtime.config_threadpool")(0, 2)  # what a parallel kernel does
        cores = {int(c) for c in str(pin()).split(",")}
        assert cores and cores < set(info["cores"]), (cores, info["cores"])
        del pin, session  # ends the session: the server serves one at a time

        with RemoteMeasurer(fleet.tracker, "two", FAST) as measurer:
            parallel = ScheduleSession(
                get_workload("matmul", M=64, N=64, K=64), measurer.device_target()
            )
            parallel.apply("parallel", loop="i")
            (result,) = measurer.measure([parallel.candidate()])
        assert result.status == MeasureStatus.OK, result.error_msg
        assert result.num_threads == 2
    finally:
        stop_fleet(state)
