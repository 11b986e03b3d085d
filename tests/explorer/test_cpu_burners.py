"""The busy machine the load tests and benchmarks run beside: where its burners run, and that
none outlives what started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from explorer.testing.load import cpu_burners


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("shared", [False, True])
def test_burners_run_where_asked_and_end_with_the_block(shared):
    with cpu_burners(2, shared_session=shared) as pids:
        assert len(pids) == 2
        for pid in pids:
            assert os.getpgid(pid) == pid  # a process group of its own: killed whole
            assert (os.getsid(pid) == os.getsid(0)) is shared, pid
            # It burns (its share of a core: other tests may be burning too), never sleeps.
            assert psutil.Process(pid).cpu_percent(interval=0.3) > 0
    assert all(_gone(pid) for pid in pids)


def test_a_burner_ends_when_what_started_it_is_killed_outright():
    # The block's cleanup never runs after SIGKILL: two burners of a benchmark killed that way
    # kept spinning and slowed the next benchmark on the same machine.
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from explorer.testing.load import cpu_burners\n"
         "with cpu_burners(1) as pids:\n"
         "    print(pids[0], flush=True)\n"
         "    time.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None
    burner = int(child.stdout.readline())
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 10
    while not _gone(burner) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(burner)


def test_a_negative_count_is_refused():
    with pytest.raises(ValueError, match="must be >= 0"), cpu_burners(-1):
        pass
