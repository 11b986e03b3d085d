"""Processes that time kernels run in a session of their own.

On Linux with autogroup scheduling (the default of most distributions' kernels) a session is
one scheduling group: the cores are shared between groups first, and between a group's threads
second. A multi-thread kernel needs all its threads running at once; in the caller's session it
competes thread by thread with every CPU hog of that session (a test suite's other workers, a
build started from the same shell), and its worker threads wait for their time slices.

Measured on a 2-core Intel Xeon beside two CPU burners of the caller's session: a 2-thread
schedule of matmul 256 read 0.31 ms in one measurement and 4-5 ms in the next (0.29 ms quiet),
the unscheduled program 27 ms instead of 16, and a 2-trial tune of matmul 8 took 50 s instead of
5. With the runner in a session of its own it read 0.29 ms and 16.4 ms there, and the tune took
7.5 s. Nothing changes on a quiet machine or where autogroup is off; the process stays its
parent's child (it is still stopped by its pid, and a worker still ends with its parent).

So the measurer's runner leaves the session as it starts (``leave_session``, a fork of the fork
server), and the children that time a network, NumPy or the machine's peak are started with
``start_new_session=True``.
"""

from __future__ import annotations

import contextlib
import os


def leave_session() -> None:
    """Make this process a session (and scheduling group) of its own; nothing where that is
    not possible (not POSIX, or already a group leader)."""
    with contextlib.suppress(OSError, AttributeError):
        os.setsid()
