"""Who owns something (a run, a temporary directory) and whether that owner is still alive.

A pid alone is not an identity: pids are reused, so a run killed with ``kill -9`` could look
alive for as long as some unrelated process happens to get its pid. An owner is therefore
(host, pid, process start time); on this host it is alive only while a process with that pid
*and* that start time exists. On another host nothing can be checked (``is_alive`` is ``None``)
and callers fall back on a heartbeat.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass

import psutil

# A start time is the kernel's count of clock ticks from boot to the process's start: it never
# changes. The wall-clock start (boot time plus that count) does: the kernel derives the boot
# time from the wall clock, so a clock step (NTP, a virtual machine resumed) moves every
# process's wall-clock start by the step, and a live owner read as another process (a live
# run was taken over, a live measurer's build folder removed). Temporary directory names keep
# whole seconds: one second covers that, two leave a margin.
_START_TOLERANCE_SECS = 2.0


@dataclass(frozen=True)
class ProcessIdentity:
    """One process, identified beyond its (reusable) pid.

    Attributes:
        host: ``socket.gethostname()`` of the machine it runs on.
        pid: its process id there.
        started_at: when it started, in seconds after the host booted (the kernel's clock
            ticks: no wall-clock step moves it; psutil's wall-clock start where there is no
            ``/proc``).
    """

    host: str
    pid: int
    started_at: float

    @classmethod
    def current(cls) -> ProcessIdentity:
        """This process (computed on each call: a forked child is another process)."""
        return cls.of(os.getpid())

    @classmethod
    def of(cls, pid: int) -> ProcessIdentity:
        """Process ``pid`` of this host (start 0 when it is gone: it never reads as alive)."""
        return cls(socket.gethostname(), pid, _start_time(pid) or 0.0)

    @property
    def is_local(self) -> bool:
        return self.host == socket.gethostname()

    def is_alive(self) -> bool | None:
        """``True``/``False`` for a process on this host; ``None`` when it runs elsewhere."""
        if not self.is_local:
            return None
        started = _start_time(self.pid)
        return started is not None and abs(started - self.started_at) <= _START_TOLERANCE_SECS

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"


def _start_time(pid: int) -> float | None:
    """When process ``pid`` started, in seconds after boot, or ``None`` when there is no such
    process (or only its zombie, not yet reaped by its parent)."""
    try:  # Linux: the clock ticks from boot in /proc/PID/stat, after the command's ")"
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return None if fields[0] == b"Z" else int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except FileNotFoundError:
        return None
    except (OSError, IndexError, ValueError):
        pass
    try:  # elsewhere: psutil's wall-clock start, the best this platform gives
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(proc.create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return None


# -- temporary directories owned by a process ----------------------------------------------------
# A process killed with kill -9 (or SIGTERM without a handler) never deletes its temporary
# directories. Their names carry their owner (host digest, pid, start second), so the next
# process to make one can tell the dead owners' leftovers from a live process's and remove them.


def owned_temp_dir(prefix: str) -> str:
    """``tempfile.mkdtemp`` with this process's identity in the name; removes the directories
    with the same ``prefix`` left behind by processes that are gone, first."""
    remove_stale_temp_dirs(prefix)
    me = ProcessIdentity.current()
    return tempfile.mkdtemp(
        prefix=f"{prefix}{_host_digest(me.host)}-{me.pid}-{int(me.started_at)}-"
    )


def remove_stale_temp_dirs(prefix: str, directory: str | None = None) -> list[str]:
    """Delete ``<prefix><host>-<pid>-<start>-*`` directories of this host whose process is gone.

    Directories of other hosts, of live processes, or named otherwise are left alone. Returns
    the removed paths.
    """
    directory = directory or tempfile.gettempdir()
    host = socket.gethostname()
    pattern = re.compile(re.escape(prefix) + r"([0-9a-f]{8})-(\d+)-(\d+)-")
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        m = pattern.match(name)
        if m is None or m.group(1) != _host_digest(host):
            continue
        owner = ProcessIdentity(host, int(m.group(2)), float(m.group(3)))
        if owner.is_alive():
            continue
        path = os.path.join(directory, name)
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            removed.append(path)
    return removed


def _host_digest(host: str) -> str:
    return hashlib.blake2b(host.encode(), digest_size=4).hexdigest()
