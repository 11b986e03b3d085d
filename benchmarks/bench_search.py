"""The search benchmark: every strategy on one suite at equal budgets, with the papers' targets.

Every run goes through the same Tuner, measurer and database, so results are comparable; the
ratios printed at the end are measured in this run (nothing is compared with numbers from
elsewhere). Output: a table on stdout, ``bench_results/search.csv`` (one row per run),
``bench_results/search.html`` (plotly convergence curves, when plotly is installed) and the
database itself (``bench_results/search.db``), which the notebooks can open.

    python benchmarks/bench_search.py            # the full suite (hours on 2 cores)
    python benchmarks/bench_search.py --quick    # one workload, small budgets (minutes)
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from explorer.cost_models._metrics import record_latency, spearman
from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.target import Target
from explorer.tuner import Tuner
from explorer.workloads import get_workload

OUT = Path("bench_results")
FULL_SUITE = (
    "matmul_512",
    "matmul_1024",
    "resnet18_c2",
    "resnet18_c6",
    "resnet18_c12",
    "depthwise_112",
    "batch_matmul_8x128",
    "softmax_128x1024",
)
STRATEGIES = ("random", "autotvm", "evolutionary", "droplet", "evolutionary+droplet")


@dataclass(frozen=True)
class RunRow:
    workload: str
    strategy: str
    budget: str
    seed: int
    trials: int
    secs: float
    best_gflops: float
    trials_to_95: int | None
    secs_to_95: float | None
    spearman: float
    trials_per_min: float
    run_id: int


def _options(strategy: str, trials: int) -> dict:
    # Scale the papers' batch sizes down to small budgets, so a model is fitted at least once.
    plan = max(8, min(64, trials // 4))
    return {
        "autotvm": {"plan_size": plan},
        "evolutionary": {"num_trials_per_iter": plan, "num_warmup_samples": plan},
        "evolutionary+droplet": {
            "explore_trials": max(8, int(trials * 0.3)),
            "num_trials_per_iter": plan,
            "num_warmup_samples": plan,
        },
    }.get(strategy, {})


def run_one(tuner, store, workload, target, strategy, *, trials, secs, seed, budget) -> RunRow:
    t0 = time.monotonic()
    result = tuner.run(
        workload,
        target,
        make_strategy(strategy, **_options(strategy, trials)),
        max_trials=trials,
        max_secs=secs,
        seed=seed,
    )
    elapsed = time.monotonic() - t0
    records = store.trials(run_id=result.run.id)[: result.num_trials]  # confirmations excluded
    lat = np.array([record_latency(r) for r in records])
    best = np.minimum.accumulate(lat) if len(lat) else lat
    final = result.best_secs or math.inf
    hit = np.nonzero(best <= final / 0.95)[0] if len(best) else []
    t_hit = int(hit[0]) + 1 if len(hit) else None
    s_hit = records[t_hit - 1].created_at - result.run.started_at if t_hit else None
    predicted = [(r.predicted, record_latency(r)) for r in records if r.predicted]
    rho = math.nan
    if predicted:
        name = next(iter(predicted[0][0]))
        pairs = [(p[name], lat) for p, lat in predicted if name in p]
        rho = spearman([p for p, _ in pairs], [lat for _, lat in pairs])
    return RunRow(
        workload.key(),
        strategy,
        budget,
        seed,
        result.num_trials,
        elapsed,
        result.best_gflops or 0.0,
        t_hit,
        s_hit,
        rho,
        60 * result.num_trials / max(elapsed, 1e-9),
        result.run.id,
    )


def numpy_gflops(workload) -> float | None:
    """What NumPy (OpenBLAS) reaches on the same matmul, timed the same way (median of 5)."""
    if workload.family not in ("matmul", "batch_matmul"):
        return None
    a, b = workload.random_inputs()
    (a @ b).sum()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < 0.05:
            a @ b
            n += 1
        times.append((time.perf_counter() - t0) / n)
    return workload.flops() / statistics.median(times) / 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="one workload, small budgets")
    p.add_argument("--workloads", nargs="*", default=None)
    p.add_argument("--strategies", nargs="*", default=None)
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument(
        "--targets",
        action="store_true",
        help="only the runs the papers' targets compare (no budget grid, no wall-clock runs)",
    )
    args = p.parse_args()
    quick = args.quick
    suite = args.workloads or (["matmul_512"] if quick else list(FULL_SUITE))
    strategies = args.strategies or list(STRATEGIES)
    seeds = range(args.seeds or (1 if quick else 3))
    budgets = [32] if quick else [64, 256]
    wall_secs = 60.0 if quick else 300.0
    long_budget = 100 if quick else 1000  # evolutionary's long run (the Droplet paper's 1000)
    droplet_budget = 30 if quick else 300

    OUT.mkdir(exist_ok=True)
    db = OUT / ("search_quick.db" if quick else "search.db")
    db.unlink(missing_ok=True)
    store = get_store(db)
    target = Target.local_cpu()
    rows: list[RunRow] = []
    refs: dict[str, float | None] = {}
    with LocalMeasurer(MeasureConfig(repeat=5, min_repeat_secs=0.02)) as measurer:
        tuner = Tuner(measurer=measurer, store=store, batch_size=8, confirm_top=3)

        def go(workload, strategy, trials, secs, seed, budget):
            row = run_one(
                tuner,
                store,
                workload,
                target,
                strategy,
                trials=trials,
                secs=secs,
                seed=seed,
                budget=budget,
            )
            rows.append(row)
            print(
                f"{row.workload:48s} {strategy:22s} {budget:>8s} seed {seed}: "
                f"{row.best_gflops:8.1f} GFLOPS in {row.trials} trials, {row.secs:6.1f} s",
                flush=True,
            )
            return row

        for name in suite:
            w = get_workload(name)
            refs[w.key()] = numpy_gflops(w)
            for seed in seeds:
                if args.targets:
                    n = budgets[0]
                    long = go(w, "evolutionary", long_budget, None, seed, f"{long_budget}")
                    # evolutionary@256 is the first 256 trials of the same seeded run: with the
                    # same settings TVM proposes exactly the same batches up to that point.
                    rows.append(_prefix(store, long, budgets[-1]))
                    go(w, "evolutionary+droplet", droplet_budget, None, seed, f"{droplet_budget}")
                    go(w, "droplet", droplet_budget, None, seed, f"{droplet_budget}")
                    go(w, "autotvm", n, None, seed, f"{n}")
                    go(w, "random", 2 * n, None, seed, f"2x{n}")
                    go(w, "static", 8, None, seed, "8")
                    go(w, "value", 32, None, seed, "32")
                    continue
                for strategy in strategies:
                    for n in budgets:
                        go(w, strategy, n, None, seed, f"{n}")
                    go(w, strategy, 10**6, wall_secs, seed, f"{wall_secs:.0f}s")
                # the papers' own comparisons
                go(w, "random", 2 * budgets[-1], None, seed, f"2x{budgets[-1]}")
                go(w, "evolutionary", long_budget, None, seed, f"{long_budget}")
                go(w, "droplet", droplet_budget, None, seed, f"{droplet_budget}")
                go(w, "evolutionary+droplet", droplet_budget, None, seed, f"{droplet_budget}")
                go(w, "static", 8, None, seed, "8")
                go(w, "value", 32, None, seed, "32")  # trained on every record above
    _write(rows)
    pair = budgets[0] if args.targets else budgets[-1]  # autotvm@pair vs random@2*pair
    _report(rows, refs, pair, budgets[-1], long_budget, droplet_budget)
    _html(store, rows)


def _prefix(store, row: RunRow, n: int) -> RunRow:
    """The row a run would have had if it had stopped after ``n`` trials (unconfirmed best)."""
    curve = store.best_so_far(row.run_id)
    secs = curve.best_secs[min(n, row.trials) - 1]
    flops = store.get_run(row.run_id).workload.flops()
    gflops = flops / secs / 1e9 if math.isfinite(secs) and secs > 0 else 0.0
    return RunRow(
        row.workload, row.strategy, f"{n}", row.seed, min(n, row.trials),
        curve.elapsed_secs[min(n, row.trials) - 1], gflops, None, None, row.spearman,
        row.trials_per_min, row.run_id,
    )  # fmt: skip


def _best(rows, workload, strategy, budget) -> float:
    vals = [
        r.best_gflops
        for r in rows
        if (r.workload, r.strategy, r.budget) == (workload, strategy, budget)
    ]
    return statistics.median(vals) if vals else math.nan


def _report(rows, refs, n, n_evo, long_budget, droplet_budget) -> None:
    print(
        f"\n{'workload':48s} {'strategy':22s} {'budget':>8s} {'GFLOPS':>8s} {'vs evo':>7s} "
        f"{'vs numpy':>8s} {'t95':>5s} {'rho':>6s} {'trials/min':>10s}"
    )
    for r in rows:
        evo = _best(rows, r.workload, "evolutionary", r.budget)
        ref = refs.get(r.workload)
        print(
            f"{r.workload:48s} {r.strategy:22s} {r.budget:>8s} {r.best_gflops:8.1f} "
            f"{r.best_gflops / evo if evo else math.nan:7.2f} "
            f"{(r.best_gflops / ref) if ref else math.nan:8.2f} {r.trials_to_95 or '-':>5} "
            f"{r.spearman:6.2f} {r.trials_per_min:10.1f}"
        )
    print("\nTargets (median over seeds; ratio >= 1 means met):")
    for w in sorted({r.workload for r in rows}):
        evo_long = _best(rows, w, "evolutionary", f"{long_budget}")
        drop = max(
            _best(rows, w, "droplet", f"{droplet_budget}"),
            _best(rows, w, "evolutionary+droplet", f"{droplet_budget}"),
        )
        print(f"  {w}")
        print(
            f"    droplet-or-hybrid@{droplet_budget} / evolutionary@{long_budget}: "
            f"{drop / evo_long:.2f}"
        )
        print(
            f"    autotvm@{n} / random@{2 * n}: "
            f"{_best(rows, w, 'autotvm', f'{n}') / _best(rows, w, 'random', f'2x{n}'):.2f}"
        )
        best_any = max(r.best_gflops for r in rows if r.workload == w)
        print(
            f"    static@8 / best measured (target >= 1/1.5 = 0.67): "
            f"{_best(rows, w, 'static', '8') / best_any:.2f}"
        )
        print(
            f"    value@32 / evolutionary@{n_evo} (target >= 0.90): "
            f"{_best(rows, w, 'value', '32') / _best(rows, w, 'evolutionary', f'{n_evo}'):.2f}"
        )
        if refs.get(w):
            print(
                f"    best / NumPy (target >= 0.80 for matmul 1024): {best_any / refs[w]:.2f}"
                f"  (NumPy {refs[w]:.1f} GFLOPS)"
            )


def _write(rows) -> None:
    path = OUT / "search.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    print(f"\nwrote {path}")


def _html(store, rows) -> None:
    try:
        import plotly.graph_objects as go
    except ImportError:
        print("plotly not installed: no HTML report")
        return
    fig = go.Figure()
    for r in rows:
        curve = store.best_so_far(r.run_id)
        gflops = [
            store.get_run(r.run_id).workload.flops() / s / 1e9 if math.isfinite(s) else 0
            for s in curve.best_secs[: r.trials]
        ]
        fig.add_trace(
            go.Scattergl(
                x=list(range(1, len(gflops) + 1)),
                y=gflops,
                mode="lines",
                name=f"{r.workload[:20]} {r.strategy} {r.budget} s{r.seed}",
            )
        )
    fig.update_layout(
        title="Best-so-far GFLOPS vs trials", xaxis_title="trials", yaxis_title="GFLOPS"
    )
    fig.write_html(OUT / "search.html", include_plotlyjs=True)
    print(f"wrote {OUT / 'search.html'}")


if __name__ == "__main__":
    main()
