"""A process's identity (host, pid, start) outlives a wall-clock step.

The kernel derives its boot time from the wall clock: after a step (NTP, a virtual machine
resumed) every wall-clock start moves by the step. Read that way, a live tune's owner looked
like another process: a second `--resume` took the live run over, the tune itself found its run
"no longer owned by this process", and a new measurer removed a live one's build folder as a
dead process's leftovers. The kernel's boot time is moved here as a step moves it."""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest
from psutil import _pslinux

from explorer._process import (
    ProcessIdentity,
    _start_time,
    owned_temp_dir,
    remove_stale_temp_dirs,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /proc")


@pytest.fixture
def clock_step(monkeypatch):
    """``clock_step(secs)``: the kernel reports its boot time ``secs`` later from now on."""

    def step(secs: float) -> None:
        booted = _pslinux.boot_time()
        monkeypatch.setattr(_pslinux, "boot_time", lambda: booted + secs)

    return step


def test_a_live_process_stays_itself_after_a_clock_step(clock_step) -> None:
    me = ProcessIdentity.current()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = _start_time(child.pid)
        assert started is not None
        theirs = ProcessIdentity(me.host, child.pid, started)
        folder = owned_temp_dir("explorer-identity-test-")
        before = psutil.Process(child.pid).create_time()
        clock_step(90.0)
        # the wall-clock start moved with the step: what the identity must not follow
        assert psutil.Process(child.pid).create_time() == pytest.approx(before + 90.0)
        assert ProcessIdentity.current() == me, "this process became another"
        assert me.is_alive() and theirs.is_alive()
        assert remove_stale_temp_dirs("explorer-identity-test-") == []
        assert os.path.isdir(folder)
    finally:
        child.kill()
        child.wait()
    assert not theirs.is_alive()  # gone: what it owned is free
    assert remove_stale_temp_dirs("explorer-identity-test-") == []  # ours: this process lives
    os.rmdir(folder)
