"""Timing shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import _checkout  # noqa: F401  (first: this checkout's explorer)

from explorer.measure._timing import LONG_CALL_SECS


def median_ms(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median wall time of ``fn`` in milliseconds (one warm-up call first)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def kernel_secs(result: Any, config: Any) -> float:
    """What timing one ``MeasureResult`` cost in kernel calls, at least: the correctness
    check's call (which is also the warm-up, or the warm-up's ``warmup_secs``), TVM's untimed
    first call, and each repeat (one call, or as many as fill ``min_repeat_secs``). Extra
    rounds of a wide spread are not counted (a result keeps only its tightest round).

    A kernel of ``LONG_CALL_SECS`` or more a call is timed call by call, its check's call the
    first repeat, with no untimed call: its repeats are all its calls."""
    med = result.median_secs
    if med is None:
        return 0.0
    if med >= LONG_CALL_SECS:
        return len(result.run_secs) * med
    return (
        max(config.warmup_secs, med)
        + med
        + len(result.run_secs) * max(config.min_repeat_secs, med)
    )
