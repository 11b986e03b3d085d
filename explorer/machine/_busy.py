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
    counts as another's."""

    def __init__(self, helpers: Callable[[], Iterable[int]] = tuple) -> None:
        self.helpers = helpers
        self.start = (time.monotonic(), _busy_secs(), self._own_secs())

    def share(self) -> float:
        wall = (time.monotonic() - self.start[0]) * (os.cpu_count() or 1)
        own = self._own_secs()
        ours = sum(secs - self.start[2].get(pid, 0.0) for pid, secs in own.items())
        others = (_busy_secs() - self.start[1]) - ours
        return min(max(others / wall, 0.0), 1.0) if wall > 0 else 0.0

    def cores(self) -> float:
        """``share()`` in cores: how many of them others kept busy, on average."""
        return self.share() * (os.cpu_count() or 1)

    def _own_secs(self) -> dict[int, float]:
        """CPU seconds of this process and of each helper, by pid. Without the times of the
        children they waited for: a worker replaced meanwhile would bring all its life's."""
        found: dict[int, float] = {}
        for pid in {os.getpid(), *self.helpers()}:
            with contextlib.suppress(psutil.Error):
                t = psutil.Process(pid).cpu_times()
                found[pid] = float(t.user + t.system)
        return found


def _busy_secs() -> float:
    t = psutil.cpu_times()
    # time stolen by the hypervisor is time another machine had our cores: busy, not ours
    idle = t.idle + getattr(t, "iowait", 0.0)
    guest = getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)  # already in user/nice
    return float(sum(t) - guest - idle)
