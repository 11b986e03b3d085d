"""The time-split benchmark: a real run's baseline and confirmation are timed apart from its
search, and the parts it prints never add up to more than the run took."""

from __future__ import annotations

import sys
from pathlib import Path

from explorer.workloads import get_workload

# The benchmarks are scripts, not a package.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_time_split import run_one


def test_the_split_separates_the_verdicts_services_from_the_search(capsys):
    split = run_one("random", 4, get_workload("matmul", M=64, N=64, K=64), seed=0)

    assert split["trials"] == 4
    # The unscheduled program is measured before the search and re-timed after it.
    assert split["baseline"] > 0 and split["confirmation"] > 0
    assert split["searching"] == split["wall"] - split["baseline"] - split["confirmation"]
    parts = ("baseline", "ask", "tell", "predictions", "measure", "store", "confirmation")
    assert sum(split[p] for p in parts) <= split["wall"]
    assert split["measure"] > 0  # the search's own measuring, the baseline's taken out
    out = capsys.readouterr().out
    assert "random: 4 trials in" in out and "searching alone" in out
