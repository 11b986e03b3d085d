"""The UI thread: where every widget write and every session read happens.

ipywidgets sends a widget's new state to the browser from whichever thread sets the trait, and
``ScheduleSession`` has no lock: both are safe only on one thread. ipykernel 7.0 once broke
widget updates made from other threads (ipywidgets #4001, ipykernel #1450). So background
work (a measurement, a prediction, a search, a dashboard refresh) only computes and returns
values; what to show is handed to ``call_soon`` and runs on the UI thread.

The UI thread is the main thread: the one a kernel runs cells and widget callbacks on. In a
kernel, a posted call is run by the kernel's event loop as soon as the current cell or
callback returns. Without a kernel (tests, scripts) nothing runs an event loop, so calls wait
in the queue until the UI thread runs ``drain()``, which ``Job.wait`` does while it waits.

Widget callbacks run on the main thread only while JupyterLab sends widget messages to the
kernel's main shell. JupyterLab 4.6 sends them to a kernel subshell by default (its setting
Kernels > "Kernel Comms over subshells"), and ipykernel 7.4 then handles a widget's message on
the main thread or on the subshell's thread, by where that widget last sent something from:
a loop picked after a click on Apply, while the kernel was busy, was set on the subshell's
thread before the click ran on the main thread, and the step split the loop picked after it.
The explorer's package sets that JupyterLab setting to "disabled" (its ``overrides.d`` file:
every widget message goes to the main thread, in the order the page sent it). Where a user
sets it back, a panel's callback that arrives on another thread is handed to the UI thread
(``on_ui_thread``) and a warning says so once: the panels keep one thread, but a choice can
then still land before a click sent earlier.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_calls: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]]] = queue.SimpleQueue()


def is_ui_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def call_soon(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` on the UI thread, after what runs there now. Safe from any thread."""
    _calls.put((fn, args))
    loop = _kernel_loop()
    if loop is not None:
        loop.add_callback(drain)  # tornado: thread-safe


def on_ui_thread(fn: Callable[..., Any], *args: Any) -> bool:
    """True on the UI thread (the caller goes on); elsewhere ``fn(*args)`` is handed to it with
    ``call_soon`` and False is returned (the caller returns). Warns once per process."""
    if is_ui_thread():
        return True
    global _warned_off_thread
    if not _warned_off_thread:
        _warned_off_thread = True
        log.warning(
            "a widget message reached the kernel on thread %r, not the main thread: "
            "JupyterLab sends widget messages to a kernel subshell (Settings > Kernels > "
            "Kernel Comms over subshells); set it to Disabled, or a choice can overtake a "
            "click sent before it",
            threading.current_thread().name,
        )
    call_soon(fn, *args)
    return False


_warned_off_thread = False


def call_later(secs: float, fn: Callable[..., Any], *args: Any) -> threading.Timer:
    """Run ``fn(*args)`` on the UI thread in ``secs`` seconds; ``.cancel()`` the timer to
    drop it (a call already queued still runs)."""
    timer = threading.Timer(max(secs, 0.0), call_soon, (fn, *args))
    timer.daemon = True
    timer.start()
    return timer


def drain() -> int:
    """Run the queued calls (on the UI thread only); returns how many ran.

    A call that raises is logged: the rest still run, and the kernel never sees it.
    """
    if not is_ui_thread():
        raise RuntimeError("drain() runs the UI's calls: call it from the main thread")
    ran = 0
    while True:
        try:
            fn, args = _calls.get_nowait()
        except queue.Empty:
            return ran
        ran += 1
        try:
            fn(*args)
        except Exception:
            log.exception("UI call %r failed", fn)


def wait_for(event: threading.Event, timeout: float | None) -> bool:
    """``event.wait(timeout)``; on the UI thread, running the queued calls meanwhile (the
    event may be set by one of them, and in a busy cell the kernel's loop cannot run them)."""
    if not is_ui_thread():
        return event.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        drain()
        if event.is_set():
            return True
        left = 0.01 if deadline is None else min(0.01, deadline - time.monotonic())
        if left <= 0:
            drain()
            return event.is_set()
        event.wait(left)


def _kernel_loop() -> Any:
    """The running kernel's event loop (a tornado ``IOLoop``), or ``None`` outside one."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover  (IPython comes with ipywidgets)
        return None
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    return getattr(kernel, "io_loop", None)
