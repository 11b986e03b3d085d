"""The time-split benchmark: a real run's baseline and confirmation are timed apart from its
search, and the parts it prints never add up to more than the run took; a kernel's calls are
counted as the protocol makes them (the unscheduled matmul 1024's were counted twice over)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from explorer.core import MeasureResult
from explorer.measure import MeasureConfig
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

# The benchmarks are scripts, not a package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _timing import kernel_secs
from bench_time_split import run_one


def test_the_split_separates_the_verdicts_services_from_the_search(capsys):
    split = run_one("random", 4, get_workload("matmul", M=64, N=64, K=64), seed=0)

    assert split["trials"] == 4
    # The unscheduled program is measured before the search and re-timed after it.
    assert split["baseline"] > 0 and split["confirmation"] > 0
    assert split["searching"] == split["wall"] - split["baseline"] - split["confirmation"]
    # Each second counted once: the baseline's and the confirmation's measuring and storing
    # are theirs alone, so the parts never add up to more than the run.
    parts = ("baseline", "ask", "tell", "predictions", "measure", "store", "confirmation")
    assert sum(split[p] for p in parts) <= split["wall"]
    assert split["measure"] > 0  # the search's own measuring, the baseline's taken out
    out = capsys.readouterr().out
    assert "random: 4 trials in" in out and "searching alone" in out


def test_a_long_calls_kernel_time_is_its_repeats_alone():
    config = MeasureConfig()
    # The unscheduled matmul 1024: about 6 s a call, timed call by call, the check's call
    # its first repeat. Two calls were made, not four.
    slow = MeasureResult(MeasureStatus.OK, run_secs=(6.0, 6.2))
    assert kernel_secs(slow, config) == pytest.approx(2 * 6.1)
    # A short kernel: the check (also the warm-up), TVM's untimed call, and 5 repeats of 20 ms.
    fast = MeasureResult(MeasureStatus.OK, run_secs=(0.001,) * 5)
    assert kernel_secs(fast, config) == pytest.approx(
        config.warmup_secs + 0.001 + 5 * config.min_repeat_secs
    )
