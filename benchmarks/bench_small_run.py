"""A small run's wall time with the measurer's kept builds against without them.

    python benchmarks/bench_small_run.py            # 6 rounds, 1 and 8 trials
    python benchmarks/bench_small_run.py --rounds 3 --trials 1

A run ends with its confirmation: its best schedules, its start and its unscheduled baseline
re-timed side by side. Without kept builds the measurer built each of them again (it deleted
every build after its batch); a NAS search's tunings at 1 trial each spent about a second of
their 2.4-3.0 s there. Each round runs every workload and budget twice, with kept builds
(``BuildCache()``, emptied before each run so nothing is carried from one run to the next) and
without (``BuildCache(0)``), in alternating order, on one measurer, each run in a fresh
in-memory database; it prints the median seconds a run of each arm and their ratio (without
over with). The runs measure for real (TVM builds, the runner, the confirmation's 3 rounds).
"""

from __future__ import annotations

import argparse
import statistics
import time

import _checkout  # noqa: F401  (first: this checkout's explorer)

from explorer.measure import LocalMeasurer
from explorer.measure._builds import BuildCache
from explorer.storage import get_store
from explorer.target import Target, cpu_model
from explorer.tuner import Tuner
from explorer.workloads import get_workload

WORKLOADS = {
    "conv2d 64ch 28x28 3x3": dict(N=1, H=28, W=28, CI=64, CO=64, KH=3, KW=3, stride=1, padding=1),
    "matmul 256": dict(M=256, N=256, K=256),
}
ARMS = {"kept": lambda: BuildCache(), "rebuilt": lambda: BuildCache(capacity=0)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--trials", type=int, nargs="+", default=[1, 8])
    args = p.parse_args()
    target = Target.local_cpu()
    print(f"machine: {cpu_model()}, {target.num_cores} cores", flush=True)
    secs: dict[tuple[str, int, str], list[float]] = {}
    with LocalMeasurer() as measurer:
        for rnd in range(args.rounds):
            order = list(ARMS) if rnd % 2 == 0 else list(reversed(ARMS))
            for name, params in WORKLOADS.items():
                family = "conv2d" if name.startswith("conv2d") else "matmul"
                workload = get_workload(family, **params)
                for trials in args.trials:
                    for arm in order:
                        measurer._builds = ARMS[arm]()
                        with get_store(":memory:") as store:
                            tuner = Tuner(measurer=measurer, store=store, batch_size=8)
                            start = time.perf_counter()
                            result = tuner.run(
                                workload, target, "random", max_trials=trials, seed=rnd
                            )
                            took = time.perf_counter() - start
                        assert result.num_trials == trials, result
                        secs.setdefault((name, trials, arm), []).append(took)
                        print(
                            f"round {rnd} {name:22s} {trials:2d} trials {arm:8s} {took:6.2f} s",
                            flush=True,
                        )
    print("\nmedian seconds a run (rounds alternate the arms' order):")
    for name in WORKLOADS:
        for trials in args.trials:
            kept = statistics.median(secs[(name, trials, "kept")])
            rebuilt = statistics.median(secs[(name, trials, "rebuilt")])
            print(
                f"{name:22s} {trials:2d} trials: kept builds {kept:5.2f} s, rebuilt "
                f"{rebuilt:5.2f} s, rebuilt / kept {rebuilt / kept:4.2f}x"
            )


if __name__ == "__main__":
    main()
