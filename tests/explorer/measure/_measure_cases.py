"""What the measure package's tests share: the fast measurement settings and small candidates
(a module with its own name: ``from conftest import ...`` gets whichever conftest Python loaded
first when several directories' tests run together)."""

from __future__ import annotations

from explorer import _tvm
from explorer.measure import Candidate, MeasureConfig
from explorer.target import Target
from explorer.testing import hooks
from explorer.workloads import Workload

MEMORY_LIMIT = 512 << 20  # workers idle at ~280 MiB; the hog kernel wants 1 GiB more
RUN_TIMEOUT = 3.0
FAST = MeasureConfig(
    repeat=3,
    min_repeat_secs=0.002,
    run_timeout_secs=RUN_TIMEOUT,
    build_timeout_secs=60.0,
    memory_limit_bytes=MEMORY_LIMIT,
    # Nor about cutting hopeless kernels short (test_timing.py): every kernel gets its repeats.
    hopeless_ratio=None,
)


def unscheduled(workload: Workload, target: Target) -> Candidate:
    return Candidate(workload, target, hooks.unscheduled_trace(workload))


def tiled(workload: Workload, target: Target, ti: int = 16, tj: int = 16) -> Candidate:
    """Split i and j, parallelise the outer i loop and vectorise the inner j loop."""
    sch = _tvm.Schedule(workload.mod())
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    i0, i1 = sch.split(i, [None, ti])
    j0, j1 = sch.split(j, [None, tj])
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    return Candidate(workload, target, _tvm.trace_to_json(sch.trace))


def hook(kind: str, target: Target) -> Candidate:
    return unscheduled(hooks.hook_workload(kind), target)
