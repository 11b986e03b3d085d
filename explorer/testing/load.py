"""A busy machine on demand: CPU-bound processes beside a test or a benchmark.

The explorer's users measure on laptops and shared servers, with a build or a browser beside
them. Verdicts (which schedule is faster, whether a kernel is correct) must hold there too, so
the tests that assert them and the load benchmark run beside ``cpu_burners``::

    with cpu_burners(2):
        ...  # every core has another process wanting it

Each burner is a separate Python process spinning in a loop, started in a process group of its
own and killed with it when the block ends, however it ends: nothing outlives the block.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

_SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def cpu_burners(n: int) -> Iterator[list[int]]:
    """Run ``n`` CPU-bound processes for the duration of the block; yields their pids."""
    if n < 0:
        raise ValueError(f"the number of burners must be >= 0 (got {n})")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(n):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", _SPIN],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # its own process group, killed whole below
                )
            )
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in procs:
            proc.wait()
