"""Ctrl-C and SIGTERM held while TVM runs our Python code on its own threads.

Python raises a signal's exception (``KeyboardInterrupt``, the command line's ``Terminated``)
in the main thread, wherever it is. MetaSchedule's evolution samples and mutates schedules in
TVM's ``parallel_for``, the main thread among its workers, and each schedule goes through our
Python postprocessor (the packed sketches' register-tile check): an exception raised there
unwinds through TVM's C++ threads. A Ctrl-C from a terminal during a model tune killed the
process by SIGSEGV or SIGABRT ("terminate called without an active exception"), or came back
as ``RuntimeError: parallel_for_dynamic error``, which failed the run as an internal error
(3 of 3 tries, 2026-12-07). Held, the signal is delivered as soon as the call returns: a Ctrl-C
waits for the rest of one round of the evolution (seconds), and then ends the command as it
always did.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Inside, SIGINT and SIGTERM that a Python handler would raise on are kept; on the way
    out each kept one is raised again, for that handler. Elsewhere than in the main thread, or
    for a signal that is ignored or left to its default action, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept: list[int] = []

    def keep(signum: int, frame: Any) -> None:
        if signum not in kept:
            kept.append(signum)

    previous = {}
    for signum in _SIGNALS:
        handler = signal.getsignal(signum)
        if callable(handler):
            previous[signum] = signal.signal(signum, keep)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for held in kept:
            signal.raise_signal(held)  # its handler runs now, in this thread
