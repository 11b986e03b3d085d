"""A schedule made by hand, as a user makes one: where start-point and trace tests begin."""

from __future__ import annotations

from explorer.session import ScheduleSession
from explorer.target import Target
from explorer.workloads import Workload


def hand_session(workload: Workload, target: Target | None = None) -> ScheduleSession:
    """A matmul-like ``C[i, j] += A[i, k] * B[k, j]`` scheduled by hand: ``i`` split by 8, ``j``
    by 16, reordered to ``i_0, j_0, k, i_1, j_1``, ``j_1`` vectorized, ``i_0`` parallel."""
    s = ScheduleSession(workload, target)
    s.apply("split", loop="i", factors=[None, 8])
    s.apply("split", loop="j", factors=[None, 16])
    s.apply("reorder", loops=["i_0", "j_0", "k", "i_1", "j_1"])
    s.apply("vectorize", loop="j_1")
    s.apply("parallel", loop="i_0")
    return s
