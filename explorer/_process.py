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

# Start times come from the kernel's boot time plus clock ticks; the boot time is derived from
# the wall clock and may move by a second between reads (NTP). Temporary directory names keep
# whole seconds. Two seconds cover both.
_START_TOLERANCE_SECS = 2.0


@dataclass(frozen=True)
class ProcessIdentity:
    """One process, identified beyond its (reusable) pid.

    Attributes:
        host: ``socket.gethostname()`` of the machine it runs on.
        pid: its process id there.
        started_at: when it started (unix seconds, as ``psutil.Process.create_time``).
    """

    host: str
    pid: int
    started_at: float

    @classmethod
    def current(cls) -> ProcessIdentity:
        """This process (computed on each call: a forked child is another process)."""
        pid = os.getpid()
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
    """The start time of process ``pid``, or ``None`` when there is no such process."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:  # dead, only not yet reaped by its parent
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
