"""The timing gate: this process's own CPU-heavy work pauses while a kernel is being timed.

The kernel runs in a worker process, but on the same cores as the explorer. Measured on the
2-core machine this was built on (issue 9): a matmul 64^3 that times 0.009 ms alone timed
1.7-4.5 ms, with repeats spread 60-100 %, while another thread of the same notebook trained the
XGBoost cost models (xgboost uses every core), exactly what the cost panel does after a
measurement. The kernel's threads wait at barriers for a thread that xgboost preempted.

Two kinds of holder:

* ``timing()``: exclusive. ``LocalMeasurer`` holds it around the timing of one candidate (never
  during builds), so other work interleaves between kernels. It waits until the work in
  progress is done.
* ``work()``: shared. Cost-model training and prediction (every ``CostModel.update`` and
  ``predict``, see ``explorer.cost_models``) and other CPU-heavy steps enter it. Several may run
  together; none starts while a kernel is timed or a timing is waiting for its turn (otherwise
  a stream of short predictions could keep a measurement waiting for ever).

Why it cannot deadlock:

* ``work()`` is re-entrant per thread: a thread already inside (``update`` calling
  ``predict``) never waits again, even while a timing is waiting.
* Timing holds no lock but this one and waits only for the worker process, which the run
  timeout bounds; it calls nothing that enters ``work()``.
* Entering ``timing()`` from a thread inside ``work()`` would wait for itself: it raises
  ``RuntimeError`` instead. Nothing in the explorer does that (the Tuner measures, then
  predicts, one after the other; the notebook's jobs each run in their own thread).
* The remaining rule for code inside ``work()``: do not wait for another thread that enters
  the gate (the classic reader/writer rule). The explorer's cost models start no threads of
  their own (xgboost's are native threads that never touch the gate).

The gate covers this process only: another notebook or a ``pytest`` on the same machine still
competes for the cores (``MeasureConfig.max_spread`` and the re-timing rounds catch that).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class GateEvent:
    """One step of a holder, for ``TimingGate.recording`` (tests and diagnostics).

    Attributes:
        kind: ``"timing"`` or ``"work"``.
        phase: ``"wait"`` (had to wait for the other kind), ``"enter"`` or ``"leave"``.
        thread: the thread's name.
        at: ``time.monotonic()``.
    """

    kind: str
    phase: str
    thread: str
    at: float


class TimingGate:
    """A reader/writer gate: ``timing()`` exclusive, ``work()`` shared and re-entrant.

    Use the process-wide ``TIMING_GATE``; a private instance is only for tests of the gate.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._timer: int | None = None  # the thread timing a kernel now
        self._timer_depth = 0
        self._waiting_timers = 0
        self._workers: dict[int, int] = {}  # thread id -> nesting depth inside work()
        self._events: list[GateEvent] | None = None

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        """Hold the gate exclusively while a kernel is timed.

        Raises:
            RuntimeError: the calling thread is inside ``work()`` (it would wait for itself).
        """
        me = threading.get_ident()
        with self._cond:
            if me in self._workers:
                raise RuntimeError(
                    "a kernel cannot be timed from inside TimingGate.work(): the thread would "
                    "wait for its own work to finish"
                )
            if self._timer == me:  # nested: already exclusive
                self._timer_depth += 1
            else:
                if self._timer is not None or self._workers:
                    self._log("timing", "wait")
                    self._waiting_timers += 1
                    try:
                        self._cond.wait_for(lambda: self._timer is None and not self._workers)
                    finally:
                        self._waiting_timers -= 1
                self._timer, self._timer_depth = me, 1
                self._log("timing", "enter")
        try:
            yield
        finally:
            with self._cond:
                self._timer_depth -= 1
                if self._timer_depth == 0:
                    self._timer = None
                    self._log("timing", "leave")
                    self._cond.notify_all()

    @contextlib.contextmanager
    def work(self) -> Iterator[None]:
        """Run CPU-heavy work of this process, never while a kernel is timed."""
        me = threading.get_ident()
        with self._cond:
            depth = self._workers.get(me, 0)
            # The timing thread itself is blocked on its worker, so it cannot be doing work;
            # a nested or own-thread entry must pass, or the thread would wait for itself.
            if depth == 0 and self._timer != me:
                if self._timer is not None or self._waiting_timers:
                    self._log("work", "wait")
                    self._cond.wait_for(lambda: self._timer is None and not self._waiting_timers)
                self._log("work", "enter")
            self._workers[me] = depth + 1
        try:
            yield
        finally:
            with self._cond:
                left = self._workers.pop(me) - 1
                if left:
                    self._workers[me] = left
                elif self._timer != me:
                    self._log("work", "leave")
                    self._cond.notify_all()

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[GateEvent]]:
        """Collect every holder's steps while the block runs (the list fills as they happen)."""
        events: list[GateEvent] = []
        with self._cond:
            previous, self._events = self._events, events
        try:
            yield events
        finally:
            with self._cond:
                self._events = previous

    def _log(self, kind: str, phase: str) -> None:
        if self._events is not None:
            name = threading.current_thread().name
            self._events.append(GateEvent(kind, phase, name, time.monotonic()))


TIMING_GATE = TimingGate()
"""The process-wide gate ``LocalMeasurer`` and the cost models share."""


def cpu_heavy(fn: F) -> F:
    """Run ``fn`` inside ``TIMING_GATE.work()`` (a decorator for CPU-heavy functions)."""

    @wraps(fn)
    def gated(*args: Any, **kwargs: Any) -> Any:
        with TIMING_GATE.work():
            return fn(*args, **kwargs)

    return gated  # type: ignore[return-value]  # functools.wraps keeps fn's signature
