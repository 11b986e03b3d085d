"""A busy machine on demand: CPU-bound processes beside a test or a benchmark.

The explorer's users measure on laptops and shared servers, with a build or a browser beside
them. Verdicts (which schedule is faster, whether a kernel is correct) must hold there too, so
the tests that assert them and the load benchmark run beside ``cpu_burners``::

    with cpu_burners(2):
        ...  # every core has another process wanting it

Each burner is a separate Python process spinning in a loop, started in a process group of its
own and killed with it when the block ends, however it ends: nothing outlives the block.

Where they run matters on Linux, whose autogroup scheduling (on in most distributions'
kernels) shares the cores between sessions first and between a session's threads second. By
default each burner has a session of its own, like another user's job or a build in another
terminal; ``shared_session=True`` keeps them in the caller's session, competing with its
threads one by one, like a test suite's other workers or a build started from the same shell
(and like any CPU hog where autogroup is off).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

# Spins until its parent is gone (looked at every few milliseconds): a burner outlives
# nothing, even a parent killed outright.
_SPIN = """
import os, sys
parent = int(sys.argv[1])  # not its own getppid(): the parent may be gone before it runs
os.write(1, b"+")  # spinning from now: the block starts when every burner said so
while os.getppid() == parent:
    for _ in range(100_000):
        pass
"""


@contextlib.contextmanager
def cpu_burners(n: int, *, shared_session: bool = False) -> Iterator[list[int]]:
    """Run ``n`` CPU-bound processes for the duration of the block; yields their pids.

    ``shared_session``: in the caller's session (its scheduling group) rather than each in
    one of its own; each is its own process group either way."""
    if n < 0:
        raise ValueError(f"the number of burners must be >= 0 (got {n})")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SPIN, str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    # Its own process group either way, killed whole below.
                    start_new_session=not shared_session,
                    preexec_fn=os.setpgrp if shared_session else None,
                )
            )
        # Yielding at once, a short test could be over before the burners' Pythons had
        # started (a cost panel's measurement beside them read 0 % busy, 2 runs in 5 of a
        # parallel test run): the block waits until every one of them spins.
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.read(1) != b"+":
                raise RuntimeError(f"CPU burner {proc.pid} ended before it started spinning")
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
