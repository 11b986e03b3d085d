"""Fixtures of the headless widget tests: a real in-memory store, real sessions, real measurers.

Widgets are driven as a user would (``button.click()``, setting ``.value``) with no browser and
no kernel; background jobs are awaited with ``job.wait(timeout)``.

``replay_measurer`` (fixture ``make_replay``) is the core's ``ReplayMeasurer`` answering from a
rule instead of a recording: deterministic latencies (one tenth of a millisecond per trace
instruction), so ranks are predictable and nothing is compiled. ``local_ctx`` uses the real
``LocalMeasurer``.
"""

from __future__ import annotations

import math
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
        ctx = Context(store=":memory:", make_measurer=lambda: m)
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
    # Timing quality is not what these tests check: a correct kernel must not turn NOISY because
    # the shared test machine disturbed its 5 ms repeats (test_cost.py renders NOISY apart).
    config = MeasureConfig(repeat=3, min_repeat_secs=0.005, max_spread=math.inf)
    with LocalMeasurer(config, num_build_workers=1) as m:
        yield m


class _Borrowed(Measurer):
    """Lends the session-wide ``LocalMeasurer`` to one ``Context`` without letting it close it."""

    def __init__(self, inner: Measurer) -> None:
        self.inner = inner

    def measure(self, candidates: list[Candidate]) -> list[MeasureResult]:  # type: ignore[override]
        return self.inner.measure(candidates)


@pytest.fixture
def local_ctx(make_ctx: Callable[..., Context], local_measurer: LocalMeasurer) -> Context:
    return make_ctx(_Borrowed(local_measurer))
