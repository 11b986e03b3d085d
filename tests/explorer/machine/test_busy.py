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


def test_a_helper_reported_only_after_the_window_opened_does_not_hide_the_others() -> None:
    """A cost panel's first Measure beside two burners read "not busy" now and then. Its
    measurer had no workers when the window opened, so the fork server (started long before by
    another measurer of the process, its CPU time spent importing TVM) was not among the
    helpers then; at the end it was, and its whole life's CPU time was counted as the
    watcher's own work, more than the burners had used meanwhile: 0 % busy."""
    import subprocess
    import sys

    spent = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5: pass\n"
    helper = subprocess.Popen(
        [sys.executable, "-c", spent + "import sys; sys.stdout.write('+'); sys.stdout.flush()\n"
         "time.sleep(60)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert helper.stdout is not None and helper.stdout.read(1) == b"+"  # 1.5 s of CPU spent
        reported: list[int] = []
        watch = BusyElsewhere(lambda: reported)  # no helper yet when the window opens
        with cpu_burners(1):
            time.sleep(1.0)
        reported.append(helper.pid)  # ... and one, from before, at the end
        share = watch.share()
    finally:
        helper.kill()
        helper.wait()
    # one burner on two cores for about 1 s of a window of about 1.2 s
    assert share >= BUSY, share
