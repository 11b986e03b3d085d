"""Where a search's wall time goes: trials per minute, split into the strategy's ask/tell, the
measurer (build + run in the workers) and the record store.

    python benchmarks/bench_time_split.py evolutionary droplet --trials 64

Each strategy runs once on matmul 512 (seed 0) through the real ``Tuner``, ``LocalMeasurer`` and
SQLite store, with timers wrapped around the calls the Tuner makes. ``build`` is the sum of the
workers' compile times divided by the builder count (an estimate of the build's share of
``measure``); ``other`` is what no timer covers (baseline, confirmation re-timing, start-up).
The split, not an absolute number, is the point: it names the part to make faster next.

    python benchmarks/bench_time_split.py evolutionary --trials 48 \
        --resnet18-task fused_conv2d9_add7_add8_relu4 --rounds 2

A task of ResNet-18 (``explorer.model``'s network) instead of a catalog workload: each strategy
runs on it lowered both ways in turn, ``--rounds`` times (the model import's lowering, its
weights listed as layout-free so that MetaSchedule's ``RewriteLayout`` lays them out in every
schedule and the measurement times the kernel without the copy; and the lowering before that,
the copy inside the kernel), and the last lines are the layout-free split over the plain one.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _timing import kernel_secs

from explorer.measure import LocalMeasurer
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.target import Target, available_cores, cpu_model
from explorer.tuner import Tuner
from explorer.workloads import Workload, get_workload


def _timed(obj: object, name: str, totals: dict[str, float], label: str) -> None:
    fn = getattr(obj, name)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[label] += time.perf_counter() - t0

    setattr(obj, name, wrapper)


def run_one(strategy_name: str, trials: int, workload: Workload, seed: int) -> dict[str, float]:
    target = Target.local_cpu()
    totals: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory() as tmp:
        store = get_store(os.path.join(tmp, "split.db"))
        with LocalMeasurer() as measurer:
            strategy = make_strategy(strategy_name)
            for name in ("ask", "tell", "predictions"):
                _timed(strategy, name, totals, name)
            _timed(measurer, "measure", totals, "measure")
            _timed(measurer, "remeasure", totals, "remeasure")
            for name in ("add_trials", "heartbeat"):
                _timed(store, name, totals, "store")
            built: list[float] = []
            calls: list[float] = []  # per measured result: the kernel's own calls (estimate)
            orig = measurer.measure

            def measure(cands, **kwargs):
                results = orig(cands, **kwargs)
                built.extend(r.build_secs or 0.0 for r in results)
                calls.extend(kernel_secs(r, measurer.config) for r in results)
                return results

            measurer.measure = measure  # type: ignore[method-assign]
            tuner = Tuner(measurer=measurer, store=store)
            t0 = time.perf_counter()
            result = tuner.run(workload, target, strategy, max_trials=trials, seed=seed)
            wall = time.perf_counter() - t0
        store.close()
    n = result.num_trials
    build = sum(built) / max(1, available_cores())
    covered = sum(totals.values())
    print(f"\n{strategy_name}: {n} trials in {wall:.1f} s = {60 * n / wall:.0f} trials/min")
    for label in ("ask", "tell", "predictions", "measure", "remeasure", "store"):
        print(f"  {label:12s} {totals[label]:7.1f} s  {100 * totals[label] / wall:5.1f} %")
    print(f"    (build est. {build:.1f} s of measure)")
    print(f"    (kernel calls est. {sum(calls):.1f} s of measure: check, warm-up, repeats)")
    print(f"  {'other':12s} {wall - covered:7.1f} s  {100 * (wall - covered) / wall:5.1f} %")
    return {**totals, "wall": wall, "build": build}


def resnet18_tasks(name: str) -> dict[str, Workload]:
    """ResNet-18's task ``name`` as the import lowers it now, and as it did before."""
    from explorer.model._import import lower_onnx, model_tasks
    from explorer.model._networks import resnet18
    from explorer.model._onnx import parse_onnx

    onnx_file = parse_onnx(resnet18().SerializeToString(), "resnet18")
    out = {}
    for label, free in (("plain", False), ("layout-free", True)):
        lowered = lower_onnx(onnx_file, "resnet18", weights_layout_free=free)
        tasks = {n: w for n, _, w in model_tasks(lowered, Target.local_cpu(), "resnet18")}
        if name not in tasks:
            raise SystemExit(f"no task {name!r} in ResNet-18; its tasks: {', '.join(tasks)}")
        out[label] = tasks[name]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("strategies", nargs="+")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--workload", default="matmul_512")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resnet18-task", help="a task of ResNet-18, lowered both ways")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(f"CPU: {cpu_model()} ({Target.local_cpu()})")
    if args.resnet18_task is None:
        for name in args.strategies:
            run_one(name, args.trials, get_workload(args.workload), args.seed)
        return
    tasks = resnet18_tasks(args.resnet18_task)
    for name in args.strategies:
        splits: dict[str, list[dict[str, float]]] = defaultdict(list)
        for _ in range(args.rounds):  # interleaved: plain, layout-free, plain, ...
            for label, workload in tasks.items():
                print(f"\n[{args.resnet18_task}, {label}]", end="")
                splits[label].append(run_one(name, args.trials, workload, args.seed))
        print(f"\n{name}, layout-free / plain, median of {args.rounds} round(s):")
        for part in ("wall", "ask", "tell", "measure", "build"):
            plain = statistics.median(s[part] for s in splits["plain"])
            free = statistics.median(s[part] for s in splits["layout-free"])
            print(f"  {part:8s} {plain:7.1f} s -> {free:7.1f} s  ({free / plain:.2f}x)")


if __name__ == "__main__":
    main()
