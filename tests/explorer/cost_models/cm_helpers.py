"""Helpers shared by the cost-model tests (imported by module name, like session_helpers)."""

from __future__ import annotations

import numpy as np

from explorer.measure import MeasureResult
from explorer.storage import TrialRecord
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

MATMUL = get_workload("matmul", M=64, N=64, K=64)


def make_records(candidates, latencies):
    """TrialRecords with the given latencies (``inf``: a failed run)."""
    out = []
    for i, (c, secs) in enumerate(zip(candidates, latencies, strict=True)):
        if np.isfinite(secs):
            result = MeasureResult(MeasureStatus.OK, run_secs=(secs, secs))
        else:
            result = MeasureResult(MeasureStatus.RUN_ERROR, error_msg="crashed")
        out.append(TrialRecord(i, 1, i, c, result, {}, 0.0))
    return out


def tile_latency(candidate) -> float:
    """A synthetic landscape: the larger the innermost factor of the first tile, the slower."""
    inner = candidate.decisions["values"][0][-1]
    return 1e-4 * (1.0 + inner)
