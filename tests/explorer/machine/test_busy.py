"""How busy other processes keep the CPUs while something is measured (``BusyElsewhere``):
real CPU-bound processes, told apart from the processes that work for the watcher."""

from __future__ import annotations

import time

from explorer.machine import BUSY, BusyElsewhere
from explorer.measure import LocalMeasurer, MeasureConfig, ReplayMeasurer
from explorer.testing.load import cpu_burners


def test_burners_count_as_others_unless_they_work_for_the_watcher() -> None:
    with cpu_burners(2) as pids:
        time.sleep(0.3)  # both spinning before the window opens
        elsewhere = BusyElsewhere()
        helped = BusyElsewhere(lambda: pids)  # the same burners, as if they were its workers
        time.sleep(2.0)
        others, others_helped = elsewhere.share(), helped.share()
    # Two burners on two cores. Other processes (a parallel test's worker, a browser) only add
    # to `others`, but take cores from the burners: the burners' own share is what differs.
    assert others >= BUSY, others
    assert others - others_helped >= BUSY, (others, others_helped)


def test_a_local_measurer_watches_this_machine_and_counts_its_workers_as_its_own() -> None:
    with LocalMeasurer(MeasureConfig(repeat=3)) as measurer:
        measurer.start_workers()
        deadline = time.monotonic() + 120
        while not measurer.worker_pids()["run"] and time.monotonic() < deadline:
            time.sleep(0.2)
        pids = [pid for role in measurer.worker_pids().values() for pid in role]
        assert pids, "its runner never started"
        watch = measurer.watch_busy()
        helpers = set(watch.helpers()) if watch is not None else set()
        assert set(pids) < helpers  # its workers, and the fork server they come from
    assert ReplayMeasurer({}).watch_busy() is None  # it times nothing on this machine
