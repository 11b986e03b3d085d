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
import statistics
import tempfile
import time
from pathlib import Path

from _retime import retime, top_candidates
from bench_search import MEASURE, _workload

from explorer.measure import LocalMeasurer
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.target import Target
from explorer.tuner import Tuner

ARMS = {"auto": "auto", "512": 512}
STRATEGIES = ("evolutionary", "evolutionary+droplet")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workload", default="matmul_512")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seeds", type=int, default=4)
    args = p.parse_args()
    workload, target = _workload(args.workload), Target.local_cpu()
    rows: list[tuple[str, str, int, int, float]] = []  # strategy, arm, seed, run id, trials/min
    with tempfile.TemporaryDirectory() as tmp, LocalMeasurer(MEASURE) as measurer:
        store = get_store(Path(tmp) / "population.db")
        tuner = Tuner(measurer=measurer, store=store, batch_size=8, confirm_top=3)
        for seed in range(args.seeds):
            for strategy in STRATEGIES:
                for arm, population in ARMS.items():
                    search = make_strategy(strategy, population_size=population)
                    t0 = time.monotonic()
                    result = tuner.run(workload, target, search, max_trials=args.trials, seed=seed)
                    tpm = 60 * result.num_trials / (time.monotonic() - t0)
                    rows.append((strategy, arm, seed, result.run.id, tpm))
                    found = result.best_gflops or 0.0
                    print(
                        f"{strategy:22s} population {arm:4s} seed {seed}: {tpm:6.1f} "
                        f"trials/min, {found:6.1f} GFLOPS",
                        flush=True,
                    )
        retimed = retime(
            measurer, [(run, top_candidates(store, run, args.trials)) for *_, run, _ in rows]
        )
        store.close()
    gflops = {run: workload.flops() / secs / 1e9 for run, secs in retimed.best_secs.items()}
    print(f"\n{workload.key()}, {args.trials} trials, {args.seeds} seeds, re-timed:")
    for strategy in STRATEGIES:
        medians = {}
        for arm in ARMS:
            mine = [r for r in rows if r[:2] == (strategy, arm)]
            g = [gflops.get(r[3], 0.0) for r in mine]
            tpm = statistics.median(r[4] for r in mine)
            medians[arm] = (statistics.median(g), tpm)
            print(f"  {strategy:22s} population {arm:4s}: {medians[arm][0]:6.1f} GFLOPS "
                  f"[{min(g):.0f}-{max(g):.0f}], {tpm:6.1f} trials/min")  # fmt: skip
        (g_auto, t_auto), (g_512, t_512) = medians["auto"], medians["512"]
        print(f"  {strategy:22s} auto / 512: GFLOPS {g_auto / g_512:.2f}, "
              f"trials/min {t_auto / t_512:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
