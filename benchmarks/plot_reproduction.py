"""Draw the reproduction page's plots and tables from a search benchmark's results.

Reads what ``bench_search.py`` wrote (``search.db``, ``search.csv``, ``targets.csv``) and writes,
under ``docs/reproduction/``:

* ``results.md``: the per-strategy table (re-timed GFLOPS, median and range over seeds, trials
  per minute) and every target with its verdict, as the benchmark printed them;
* ``convergence_<workload>.html``: best-so-far GFLOPS against trials, the median over seeds of
  each (strategy, budget), ``tune_tir`` included (plotly, loads plotly.js from its CDN).

    python benchmarks/plot_reproduction.py [--results bench_results] [--out docs/reproduction]

Nothing here is typed in by hand: re-running the benchmark and this script regenerates it all.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _retime import TIMED

from explorer.storage import get_store


def best_so_far_gflops(store, run_id: int, budget: int) -> list[float]:
    """GFLOPS of the best schedule after each searched trial (re-timings left out)."""
    run = store.get_run(run_id)
    flops = run.workload.flops()
    best, curve = math.inf, []
    for row in store.trial_rows(run_id=run_id):
        if row.is_remeasure:
            continue
        if row.status in TIMED and row.median_secs:
            best = min(best, row.median_secs)
        curve.append(flops / best / 1e9 if math.isfinite(best) else 0.0)
    return curve[:budget]


def _median_curve(curves: list[list[float]]) -> list[float]:
    n = min(len(c) for c in curves)
    return [statistics.median(c[i] for c in curves) for i in range(n)]


def convergence_figure(store, rows: list[dict], workload: str):
    import plotly.graph_objects as go

    groups: dict[tuple[str, int], list[list[float]]] = defaultdict(list)
    for r in rows:
        if r["workload"] == workload:
            curve = best_so_far_gflops(store, int(r["run_id"]), int(r["budget"]))
            if curve:
                groups[(r["strategy"], int(r["budget"]))].append(curve)
    fig = go.Figure()
    for (strategy, budget), curves in sorted(groups.items()):
        y = _median_curve(curves)
        fig.add_trace(
            go.Scatter(
                x=list(range(1, len(y) + 1)),
                y=y,
                mode="lines",
                name=f"{strategy} @{budget} (median of {len(curves)})",
                line={"dash": "dot" if strategy.startswith("tune_tir") else "solid"},
            )
        )
    fig.update_layout(
        title=f"{workload}: best-so-far GFLOPS (own timings) vs trials",
        xaxis_title="trials",
        yaxis_title="GFLOPS",
        xaxis_type="log",
    )
    return fig


def results_markdown(rows: list[dict], targets: list[dict]) -> str:
    groups: dict[tuple[str, str, int], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["workload"], r["strategy"], int(r["budget"]))].append(r)
    lines = [
        "| workload | strategy | budget | GFLOPS re-timed: median [range] | seeds | trials/min "
        "| failed trials |",
        "|---|---|---|---|---|---|---|",
    ]
    for (w, s, b), group in sorted(groups.items()):
        g = [float(r["confirmed_gflops"]) for r in group]
        tpm = statistics.median(float(r["trials_per_min"]) for r in group)
        failed = sum(int(r["failed"]) for r in group)
        total = sum(int(r["trials"]) for r in group)
        lines.append(
            f"| {w} | {s} | {b} | {statistics.median(g):.1f} [{min(g):.0f}-{max(g):.0f}] "
            f"| {len(g)} | {tpm:.1f} | {failed} of {total} |"
        )
    lines += ["", "| workload | target | ratio | goal | verdict |", "|---|---|---|---|---|"]
    for t in targets:
        ratio = float(t["ratio"])
        verdict = "not measured" if not math.isfinite(ratio) else (
            "met" if ratio >= float(t["goal"]) else "**not met**"
        )  # fmt: skip
        lines.append(
            f"| {t['workload']} | {t['name']} | {ratio:.2f} | >= {t['goal']} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", type=Path, default=Path("bench_results"))
    p.add_argument("--out", type=Path, default=Path("docs/reproduction"))
    args = p.parse_args()
    # bench_confirm.py's re-timing (on a quieter machine) replaces the run's own when present
    confirmed = (args.results / "search_confirmed.csv").exists()
    suffix = "_confirmed" if confirmed else ""
    rows = list(csv.DictReader((args.results / f"search{suffix}.csv").open()))
    targets = list(csv.DictReader((args.results / f"targets{suffix}.csv").open()))
    store = get_store(args.results / "search.db")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(results_markdown(rows, targets))
    for workload in dict.fromkeys(r["workload"] for r in rows):
        fig = convergence_figure(store, rows, workload)
        name = "".join(c if c.isalnum() else "_" for c in workload)[:60]
        fig.write_html(args.out / f"convergence_{name}.html", include_plotlyjs="cdn")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
