"""Fixtures of the headless widget tests: a real in-memory store, real sessions, real measurers.

Widgets are driven as a user would (``button.click()``, setting ``.value``) with no browser and
no kernel; background jobs are awaited with ``job.wait(timeout)``, which runs the UI thread's
queued calls meanwhile (``widgets._ui``). Every test here checks that no widget was written and
no session read outside the UI thread (``ui_thread_only``).

``replay_measurer`` (fixture ``make_replay``) is the core's ``ReplayMeasurer`` answering from a
rule instead of a recording: deterministic latencies (one tenth of a millisecond per trace
instruction), so ranks are predictable and nothing is compiled. ``local_ctx`` uses the real
``LocalMeasurer``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from explorer.measure import (
    Candidate,
    LocalMeasurer,
    MeasureConfig,
    Measurer,
    MeasureResult,
    ReplayMeasurer,
)
from explorer.session import ScheduleSession
from explorer.types import MeasureStatus
from explorer.workloads import Workload, get_workload
from widgets import _ui
from widgets._context import Context

WAIT = 120.0  # seconds: generous, the machine is shared


def replay_latency(candidate: Candidate) -> float:
    """A made-up latency that grows with the trace: every extra step costs 0.1 ms."""
    return 1e-4 * (1 + len(candidate.trace[0]))


def replay_result(candidate: Candidate, status: MeasureStatus = MeasureStatus.OK) -> MeasureResult:
    secs = replay_latency(candidate)
    return MeasureResult(
        status,
        run_secs=(secs, secs, secs),
        error_msg=None if status is MeasureStatus.OK else f"replayed {status.value}",
        build_secs=0.01,
        flops=candidate.workload.flops(),
    )


def replay_measurer(
    status: MeasureStatus = MeasureStatus.OK, gate: threading.Event | None = None
) -> Measurer:
    """A ``ReplayMeasurer`` giving ``replay_result``; with ``gate``, each answer waits for it."""

    def lookup(candidate: Candidate) -> MeasureResult:
        if gate is not None and not gate.wait(WAIT):
            raise TimeoutError("the test never opened the gate")
        return replay_result(candidate, status)

    return ReplayMeasurer(lookup)


# What the UI thread alone may do: write a widget (any trait of any ipywidget, plotly's
# a LiveFigure's state included), read or change a schedule session.
_SESSION_METHODS = ("candidate", "apply", "undo", "redo", "loops", "load_trace", "goto")


@pytest.fixture(autouse=True)
def ui_thread_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Fails the test if a widget was written or a session used from a non-UI thread."""
    import ipywidgets

    offenders: list[str] = []

    def checked(owner: type, name: str) -> None:
        original = getattr(owner, name)

        def wrapper(self: object, *args: object, **kwargs: object) -> object:
            if not _ui.is_ui_thread():
                what = f"{type(self).__name__}.{name}"
                if name == "notify_change" and args:
                    what += f"({getattr(args[0], 'name', '?')})"
                offenders.append(f"{what} on thread {threading.current_thread().name}")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    checked(ipywidgets.Widget, "notify_change")
    for name in _SESSION_METHODS:
        if hasattr(ScheduleSession, name):
            checked(ScheduleSession, name)
    yield offenders
    _ui.drain()  # what the test left queued runs here, on the UI thread
    assert not offenders, "off the UI thread: " + "; ".join(dict.fromkeys(offenders))


@pytest.fixture
def make_replay() -> Callable[..., Measurer]:
    """``make_replay(status=OK, gate=None)``: see ``replay_measurer``."""
    return replay_measurer


@pytest.fixture
def matmul64() -> Workload:
    return get_workload("matmul", M=64, N=64, K=64)


@pytest.fixture
def make_ctx() -> Iterator[Callable[..., Context]]:
    """``make_ctx(measurer=None)``: a ``Context`` on a fresh in-memory store (closed after)."""
    made: list[Context] = []

    def make(measurer: Measurer | None = None) -> Context:
        m = measurer if measurer is not None else replay_measurer()
        ctx = Context(store=":memory:", measurer=m)
        made.append(ctx)
        return ctx

    yield make
    for ctx in made:
        ctx.close()


@pytest.fixture
def ctx(make_ctx: Callable[..., Context]) -> Context:
    return make_ctx()


@pytest.fixture
def session(ctx: Context, matmul64: Workload) -> ScheduleSession:
    """A matmul 64x64x64 session, current in ``ctx``."""
    s = ScheduleSession(matmul64, ctx.target)
    ctx.set_session(s)
    return s


@pytest.fixture(scope="session")
def local_measurer() -> Iterator[LocalMeasurer]:
    """The real measurer, started once (its worker processes take a second or two)."""
    config = MeasureConfig(repeat=3, min_repeat_secs=0.005)
    with LocalMeasurer(config, num_build_workers=1) as m:
        yield m


@pytest.fixture
def local_ctx(make_ctx: Callable[..., Context], local_measurer: LocalMeasurer) -> Context:
    return make_ctx(local_measurer)  # lent: a Context never closes a measurer it is given
