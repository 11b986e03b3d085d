"""Where a search's wall time goes: trials per minute, split into the strategy's ask/tell, the
measurer (build + run in the workers) and the record store.

    python benchmarks/bench_time_split.py evolutionary droplet --trials 64

Each strategy runs once on matmul 512 (seed 0) through the real ``Tuner``, ``LocalMeasurer`` and
SQLite store, with timers wrapped around the calls the Tuner makes. ``baseline`` is the
unscheduled program's measurement before the search, ``confirmation`` the re-timing of the best
three beside it at the end (both services of the run's verdict, not search); ``measure`` is the
search's own. ``build`` is the sum of the workers' compile times divided by the builder count
(an estimate of the build's share of ``measure``); ``other`` is what no timer covers (start-up,
the run's bookkeeping). The split, not an absolute number, is the point: it names the part to
make faster next.

    python benchmarks/bench_time_split.py droplet random --shipped

``--shipped`` first runs TVM's ``tune_tir`` as shipped on the same workload, seed and trials,
and prints each strategy's trials per minute over it twice: over the whole run, as
``bench_search.py`` counts them, and over the searching alone (the run without its baseline
and confirmation), the most that making those cheaper could bring.

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
import tempfile
import time
from collections import defaultdict

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _timing import kernel_secs

from explorer.measure import LocalMeasurer
from explorer.search import make_strategy
from explorer.search._metaschedule import run_metaschedule
from explorer.storage import get_store
from explorer.target import Target, available_cores, cpu_model
from explorer.tuner import Tuner
from explorer.workloads import Workload, get_workload


def _timed(
    obj: object, name: str, totals: dict[str, float], label: str, *, owns: tuple[str, ...] = ()
) -> None:
    """Add the time of ``obj.name`` to ``totals[label]``. ``owns``: the labels whose time
    inside it is its own (the baseline's and the confirmation's measuring and storing), not
    added to them too."""
    fn = getattr(obj, name)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        t0, inner = time.perf_counter(), {k: totals[k] for k in owns}
        try:
            return fn(*args, **kwargs)
        finally:
            totals[label] += time.perf_counter() - t0
            totals.update(inner)

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
            services = {"_measure_baseline": "baseline", "_confirm_best": "confirmation"}
            for name, label in services.items():
                _timed(tuner, name, totals, label, owns=("measure", "store"))
            t0 = time.perf_counter()
            result = tuner.run(workload, target, strategy, max_trials=trials, seed=seed)
            wall = time.perf_counter() - t0
        store.close()
    baseline_calls = calls[0] if calls else 0.0  # the run's first measurement
    n = result.num_trials
    build = (sum(built) - (built[0] if built else 0.0)) / max(1, available_cores())
    covered = sum(totals.values())
    searching = wall - totals["baseline"] - totals["confirmation"]
    print(f"\n{strategy_name}: {n} trials in {wall:.1f} s = {60 * n / wall:.0f} trials/min; "
          f"searching alone {searching:.1f} s = {60 * n / searching:.0f} trials/min")  # fmt: skip
    for label in ("baseline", "ask", "tell", "predictions", "measure", "store", "confirmation"):
        print(f"  {label:12s} {totals[label]:7.1f} s  {100 * totals[label] / wall:5.1f} %")
        if label == "baseline":
            print(f"    (its kernel calls {baseline_calls:.1f} s)")
        if label == "measure":
            print(f"    (build est. {build:.1f} s of measure)")
            print(f"    (kernel calls est. {sum(calls[1:]):.1f} s of measure: check, warm-up, "
                  "repeats)")  # fmt: skip
    print(f"  {'other':12s} {wall - covered:7.1f} s  {100 * (wall - covered) / wall:5.1f} %")
    return {**totals, "wall": wall, "build": build, "searching": searching, "trials": n}


def run_shipped(trials: int, workload: Workload, seed: int) -> float:
    """Trials per minute of TVM's ``tune_tir`` as shipped (its own builder, runner and search),
    counted over its whole call, as ``bench_search.py`` counts it."""
    with tempfile.TemporaryDirectory() as tmp:
        store = get_store(os.path.join(tmp, "shipped.db"))
        t0 = time.perf_counter()
        run = run_metaschedule(
            workload, Target.local_cpu(), store, max_trials=trials,
            num_trials_per_iter=min(64, trials), seed=seed, shipped=True,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        n = sum(1 for t in store.trials(run_id=run.id) if not t.is_remeasure)
        store.close()
    print(f"\ntune_tir as shipped: {n} trials in {wall:.1f} s = {60 * n / wall:.0f} trials/min")
    return 60 * n / wall


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
    parser.add_argument("--shipped", action="store_true", help="also tune_tir as shipped, first")
    args = parser.parse_args()
    print(f"CPU: {cpu_model()} ({Target.local_cpu()})")
    if args.resnet18_task is None:
        workload = get_workload(args.workload)
        shipped = run_shipped(args.trials, workload, args.seed) if args.shipped else None
        splits = {s: run_one(s, args.trials, workload, args.seed) for s in args.strategies}
        if shipped is not None:
            print(f"\ntrials/min / tune_tir as shipped ({shipped:.0f}): whole run, searching")
            for name, split in splits.items():
                whole = 60 * split["trials"] / split["wall"] / shipped
                alone = 60 * split["trials"] / split["searching"] / shipped
                print(f"  {name:22s} {whole:5.2f}x  {alone:5.2f}x")
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
