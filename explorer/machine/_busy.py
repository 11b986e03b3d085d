"""How much of the CPUs other processes used while something was measured.

A reading taken beside another busy process is slower than the machine is, and says nothing
about it; what measures (the peak, a model's untuned tasks, a tune's chunks, a race) watches the
machine with ``BusyElsewhere`` and says so when others used ``BUSY`` or more of it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable

import psutil

BUSY = 0.25
"""The share of the CPUs' time (0 to 1) other processes used from which a reading is said to
come from a busy machine: on two cores, one core busy half of the time."""


class BusyElsewhere:
    """Started when made: ``share()`` is the share of the CPUs' time (0 to 1) that other
    processes used since. This process and ``helpers`` (the pids of processes that work for it,
    such as a measurer's workers: ``Measurer.helper_pids``) are its own work; a helper
    that starts meanwhile counts from its start, one that ends meanwhile (a worker replaced)
    counts as another's, and so does one reported only after the window opened that had
    started before it (its time before the window is not known)."""

    def __init__(self, helpers: Callable[[], Iterable[int]] = tuple) -> None:
        self.helpers = helpers
        self.opened = time.time()  # what a process's create_time() is compared with
        self.start = (time.monotonic(), _busy_secs(), self._own_secs())

    def share(self) -> float:
        wall = (time.monotonic() - self.start[0]) * (os.cpu_count() or 1)
        seen = self.start[2]
        # A helper not reported when the window opened counts from its start only if it started
        # in the window: one that ran before (a fork server another measurer had started, not
        # yet listed) would bring its whole life's time, more than others used meanwhile (a
        # first Measure beside two burners read 0 % busy); its time in the window, forking
        # workers, counts as others'.
        ours = sum(
            secs - seen.get(pid, 0.0)
            for pid, (secs, created) in self._own_secs_since().items()
            if pid in seen or created >= self.opened - _CREATE_TIME_SLACK
        )
        others = (_busy_secs() - self.start[1]) - ours
        return min(max(others / wall, 0.0), 1.0) if wall > 0 else 0.0

    def cores(self) -> float:
        """``share()`` in cores: how many of them others kept busy, on average."""
        return self.share() * (os.cpu_count() or 1)

    def _own_secs(self) -> dict[int, float]:
        """CPU seconds of this process and of each helper, by pid."""
        return {pid: secs for pid, (secs, _) in self._own_secs_since().items()}

    def _own_secs_since(self) -> dict[int, tuple[float, float]]:
        """(CPU seconds, creation time) of this process and of each helper, by pid. Without
        the times of the children they waited for: a worker replaced meanwhile would bring
        all its life's."""
        found: dict[int, tuple[float, float]] = {}
        for pid in {os.getpid(), *self.helpers()}:
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                t = process.cpu_times()
                found[pid] = (float(t.user + t.system), process.create_time())
        return found


_CREATE_TIME_SLACK = 0.5  # s: psutil's creation times are rounded to the kernel's clock ticks


def _busy_secs() -> float:
    t = psutil.cpu_times()
    # time stolen by the hypervisor is time another machine had our cores: busy, not ours
    idle = t.idle + getattr(t, "iowait", 0.0)
    guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)  # already in user/nice
    return float(sum(t) - guest - idle)
