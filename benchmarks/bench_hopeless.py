"""Hopeless kernels cut short (``MeasureConfig.hopeless_ratio=3``) against every kernel timed in
full (``None``), the rest of the protocol alike.

A search's random candidates for matmul 1024 take 20 ms to 2 s a call, and the check call, TVM's
untimed call and 5 repeats of each were most of the search's time (``bench_time_split.py``). With
the cut, a kernel whose check call and first 2 repeats each take 3x the search's best so far stops
there. This benchmark runs both arms on the same seeds, interleaved, re-times every row's best few
schedules with the full protocol (``_ab``), and prints GFLOPS, trials per minute and the ratios
cut ÷ full: the cut should buy throughput without losing quality.

    python benchmarks/bench_hopeless.py [--workload matmul_1024] [--trials 64] [--seeds 2]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _ab import Arm, compare
from bench_search import MEASURE, _workload

ARMS = {
    "cut": Arm(replace(MEASURE, hopeless_ratio=3.0)),
    "full": Arm(replace(MEASURE, hopeless_ratio=None)),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="matmul_1024")
    p.add_argument("--strategies", nargs="+", default=["random", "evolutionary+droplet"])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seeds", type=int, default=2)
    args = p.parse_args()
    compare(
        _workload(args.workload),
        args.strategies,
        ARMS,
        trials=args.trials,
        seeds=args.seeds,
        what="repeats",
    )


if __name__ == "__main__":
    main()
