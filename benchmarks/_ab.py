"""Two settings of the search or the timing protocol, A against B, on the same seeds.

Each arm is a ``MeasureConfig`` and a strategy's keyword arguments. Every (seed, strategy) runs
arm after arm, so a change in machine load hits both alike; each arm measures with its own
``LocalMeasurer``. At the end every row's best few schedules are re-timed in interleaved rounds
with one timer and the full protocol (``_retime``), so quality is compared on equal terms, and
the function prints GFLOPS (median [range] over seeds), trials per minute and the ratios of the
first arm to the second.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _retime import retime, top_candidates

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.target import Target
from explorer.tuner import Tuner


@dataclass(frozen=True)
class Arm:
    config: MeasureConfig
    options: Mapping[str, Any] = field(default_factory=dict)  # make_strategy's keywords


def compare(
    workload: Any,
    strategies: Sequence[str],
    arms: Mapping[str, Arm],
    *,
    trials: int,
    seeds: int,
    what: str,
) -> None:
    """Run every arm on every seed and strategy, re-time, and print the comparison."""
    target = Target.local_cpu()
    rows: list[tuple[str, str, int, int, float]] = []  # strategy, arm, seed, run id, trials/min
    with tempfile.TemporaryDirectory() as tmp:
        store = get_store(Path(tmp) / "ab.db")
        measurers = {name: LocalMeasurer(arm.config) for name, arm in arms.items()}
        try:
            for seed in range(seeds):
                for strategy in strategies:
                    for name, arm in arms.items():
                        tuner = Tuner(measurer=measurers[name], store=store, batch_size=8)
                        search = make_strategy(strategy, **arm.options)
                        t0 = time.monotonic()
                        result = tuner.run(workload, target, search, max_trials=trials, seed=seed)
                        tpm = 60 * result.num_trials / (time.monotonic() - t0)
                        rows.append((strategy, name, seed, result.run.id, tpm))
                        print(
                            f"{strategy:22s} {what} {name:5s} seed {seed}: {tpm:6.1f} trials/min, "
                            f"{result.best_gflops or 0.0:6.1f} GFLOPS",
                            flush=True,
                        )
            first = next(iter(measurers.values()))
            retimed = retime(
                first, [(run, top_candidates(store, run, trials)) for *_, run, _ in rows]
            )
        finally:
            for m in measurers.values():
                m.close()
            store.close()
    gflops = {run: workload.flops() / secs / 1e9 for run, secs in retimed.best_secs.items()}
    print(f"\n{workload.key()}, {trials} trials, {seeds} seeds, re-timed:")
    a, b = list(arms)[:2]
    for strategy in strategies:
        medians = {}
        for name in arms:
            mine = [r for r in rows if r[:2] == (strategy, name)]
            g = [gflops.get(r[3], 0.0) for r in mine]
            tpm = statistics.median(r[4] for r in mine)
            medians[name] = (statistics.median(g), tpm)
            print(f"  {strategy:22s} {what} {name:5s}: {medians[name][0]:6.1f} GFLOPS "
                  f"[{min(g):.0f}-{max(g):.0f}], {tpm:6.1f} trials/min")  # fmt: skip
        (g_a, t_a), (g_b, t_b) = medians[a], medians[b]
        print(f"  {strategy:22s} {a} / {b}: GFLOPS {g_a / g_b:.2f}, "
              f"trials/min {t_a / t_b:.2f}")  # fmt: skip
