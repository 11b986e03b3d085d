"""The evolutionary population, scaled to the round ("auto") against MetaSchedule's 512.

``evolutionary`` and ``evolutionary+droplet`` cut a small budget into small MetaSchedule rounds
(a quarter of the budget; for ``evolutionary+droplet`` a quarter of its 30 % exploration), and
MetaSchedule evolves its whole population once per round. With 512 traces at every round of 16
(or of 4), a 64-trial run evolved 4x (or 20x) what ``tune_tir`` evolves for its one round of 64.
``population_size="auto"`` keeps MetaSchedule's proportion instead: 8 traces per candidate of a
round, at least 64. This benchmark runs both arms on the same seeds, interleaved, re-times every
row's best few schedules in interleaved rounds with one timer (``_retime``), and prints GFLOPS
(median [range] over seeds), trials per minute, and the ratios auto ÷ 512.

    python benchmarks/bench_population.py [--workload matmul_512] [--trials 64] [--seeds 4]
"""

from __future__ import annotations

import argparse

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _ab import Arm, compare
from bench_search import MEASURE, _workload

ARMS = {
    "auto": Arm(MEASURE, {"population_size": "auto"}),
    "512": Arm(MEASURE, {"population_size": 512}),
}
STRATEGIES = ("evolutionary", "evolutionary+droplet")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="matmul_512")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seeds", type=int, default=4)
    args = p.parse_args()
    compare(
        _workload(args.workload),
        STRATEGIES,
        ARMS,
        trials=args.trials,
        seeds=args.seeds,
        what="population",
    )


if __name__ == "__main__":
    main()
