"""The dashboards at 100k trials: refresh time and points shipped, against naive baselines.

Run: ``python benchmarks/bench_dashboard.py [--runs 20] [--per-run 5000]``

Fills a temporary SQLite store with ``runs x per_run`` trials of one workload on one target (the
worst case: every trial belongs to the dashboard's workload), through ``add_trials`` in batches:
four strategies, 10 % failures, two cost models' predictions on the model-based runs, real
knob-space schedules with a latency that depends on their knobs. Then it times, in this run:

* baseline ``store.trials()``: decoding every trial of the workload (what a dashboard reading
  records would pay on each refresh, and its memory);
* first load, before and after: a ``TrialTable`` built run by run from decoded records
  (``store.trials(run_id=...)``, what the dashboards did) against one built from
  ``store.trial_rows(run_id=...)`` (columns only, traces hashed but never decoded), and
  ``store.trial_rows(workload=...)`` alone;
* baseline naive figures: every trial in one scatter plus every run's full best-so-far line
  (what a dashboard without decimation would ship to the browser);
* ``Dashboards`` cold: the first refresh (loading the ``TrialTable`` run by run) and warm: a
  refresh after one more batch of 64 trials (the live cost during a search), with the
  breakdown of the analyses and figure builders;

and prints each time, its ratio to the baselines, and the numbers shipped to the browser.
Every stored trace is distinct, as in a real search (a repeated trace within a run is a
re-measurement, which the dashboards count apart). Targets: a warm refresh well under the 0.5 s
throttle interval, a few thousand points shipped, a first load several times faster than
decoding the records.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
import numpy as np
import plotly.graph_objects as go
from _timing import median_ms

from explorer import plots
from explorer.analysis import (
    TrialTable,
    convergence_info,
    knob_effects_info,
    predicted_vs_measured_info,
    run_curve,
    run_curves,
    strategy_comparison_info,
)
from explorer.measure import Candidate, MeasureResult
from explorer.session import ScheduleSession
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import NewTrial, SQLiteStore
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import get_workload
from widgets._context import Context
from widgets.dashboards import Dashboards

STRATEGIES = ("random", "autotvm", "droplet", "evolutionary")
MODELS = ("xgb-rank", "metaschedule-xgb")
TARGET_WARM_MS = 500.0
TARGET_LOAD_SPEEDUP = 3.0


def _candidates(space: KnobSpace, n: int) -> list[Candidate]:
    rng = np.random.default_rng(0)
    out: list[Candidate] = []
    while len(out) < n:
        cand = space.materialize(space.random_point(rng))
        if cand is not None:
            out.append(cand)
    return out


def _latency_secs(cand: Candidate, noise: float) -> float:
    values = cand.decisions["values"]
    unroll = values[3]
    inner = values[0][-1] * values[1][-1]
    return 1e-4 * (1 + 0.5 * unroll + 4.0 / inner) * (1 + noise)


def _distinct(cand: Candidate, tag: int) -> Candidate:
    """``cand`` with a trace no other trial has (a tag after its instructions and decisions): a
    search measures each schedule once, and the traces are never replayed here."""
    return Candidate(cand.workload, cand.target, [*cand.trace, ["bench", tag]], cand.decisions)


def _fill(store: SQLiteStore, space: KnobSpace, num_runs: int, per_run: int, batch: int) -> None:
    cands = _candidates(space, 64)
    rng = np.random.default_rng(1)
    flops = space.workload.flops()
    for r in range(num_runs):
        strategy = STRATEGIES[r % len(STRATEGIES)]
        run = store.create_run(space.workload, space.target, strategy, settings={"seed": r})
        modelled = strategy in ("autotvm", "evolutionary")
        for start in range(0, per_run, batch):
            size = min(batch, per_run - start)
            picks = rng.integers(len(cands), size=size)
            noise = rng.normal(0, 0.05, size=size)
            fails = rng.random(size) < 0.1
            trials = []
            for j, (c_idx, eps, failed) in enumerate(zip(picks, noise, fails, strict=True)):
                cand = _distinct(cands[c_idx], r * per_run + start + j)
                secs = _latency_secs(cand, eps)
                if failed:
                    result = MeasureResult(MeasureStatus.BUILD_ERROR, error_msg="failed")
                else:
                    result = MeasureResult(MeasureStatus.OK, (secs, secs * 1.01), flops=flops)
                predicted = (
                    {MODELS[0]: -secs * (1 + eps), MODELS[1]: float(rng.normal())}
                    if modelled
                    else {}
                )
                trials.append(NewTrial(cand, result, predicted))
            store.add_trials(run.id, trials)
        store.finish_run(run.id)


def _naive_figures(table: TrialTable, store: SQLiteStore) -> list[go.Figure]:
    """What a dashboard ships without decimation: every trial, every best-so-far step."""
    ok = table.is_ok
    scatter = go.Figure(
        [
            go.Scatter(x=scores[ok], y=table.latency_secs[ok] * 1e3, mode="markers", name=name)
            for name, scores in table.predicted.items()
        ]
    )
    lines = go.Figure()
    for run in store.runs():
        bsf = store.best_so_far(run.id)
        lines.add_trace(go.Scatter(x=bsf.seq, y=bsf.best_secs, mode="lines"))
    return [scatter, lines]


def _json_kb(figs: list[go.Figure]) -> float:
    return sum(len(f.to_json()) for f in figs) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--per-run", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    total = args.runs * args.per_run
    workload = get_workload("matmul", M=64, N=64, K=64)
    target = Target.local_cpu()
    space = KnobSpace(DesignSpace.of(workload, target))

    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "records.db")
        t0 = time.perf_counter()
        _fill(store, space, args.runs, args.per_run, args.batch)
        print(f"filled {total:,} trials in {time.perf_counter() - t0:.1f} s\n")

        # Baseline 1: decode every record of the workload (once: ~30 KB of objects each).
        t0 = time.perf_counter()
        records = store.trials(workload=workload, target=target)
        decode_ms = (time.perf_counter() - t0) * 1e3
        del records
        gc.collect()

        # First load, before (decoded records, run by run: the dashboards' old path; the table
        # now also hashes each decoded trace) and after (trial rows, run by run).
        runs = store.runs(workload=workload, target=target)
        t0 = time.perf_counter()
        old_table = TrialTable.empty()
        for run in runs:
            old_table = old_table.extend(store.trials(run_id=run.id))
        load_old_ms = (time.perf_counter() - t0) * 1e3
        del old_table
        gc.collect()
        t0 = time.perf_counter()
        new_table = TrialTable.empty()
        for run in runs:
            new_table = new_table.extend(store.trial_rows(run_id=run.id))
        load_new_ms = (time.perf_counter() - t0) * 1e3
        assert len(new_table) == total and new_table.num_remeasured == 0
        del new_table
        t0 = time.perf_counter()
        num_rows = len(store.trial_rows(workload=workload, target=target))
        rows_ms = (time.perf_counter() - t0) * 1e3
        gc.collect()

        # The dashboard, as a notebook runs it.
        ctx = Context(store=store, target=target)
        dash = Dashboards(ctx)
        dash.close()  # live refreshes off: no timer thread competes with the timings below
        session = ScheduleSession(workload, target)
        ctx.set_session(session)
        dash._on_session(session)  # what the (now closed) "session" listener does
        t0 = time.perf_counter()
        dash.refresh()
        cold_ms = (time.perf_counter() - t0) * 1e3
        table = dash._table
        assert table is not None and len(table) == total

        origin = space.materialize(space.origin())
        assert origin is not None
        extra_result = MeasureResult(MeasureStatus.OK, (2e-4,), flops=workload.flops())
        extra_tags = iter(range(total, 10 * total))

        def add_batch_and_refresh() -> None:
            extra = [_distinct(origin, next(extra_tags)) for _ in range(64)]
            batch = store.add_trials(
                store.runs()[-1].id, [NewTrial(c, extra_result) for c in extra]
            )
            dash._on_batch(batch)  # what the subscription does (it is closed here)
            dash.refresh()

        warm_ms = median_ms(add_batch_and_refresh, repeat=3)
        table = dash._table
        assert table is not None

        # Baseline 2: the naive figures.
        naive_figs: list[go.Figure] = []
        naive_ms = median_ms(lambda: naive_figs.append(_naive_figures(table, store)), repeat=1)
        naive_kb = _json_kb(naive_figs[-1])
        naive_points = int(np.count_nonzero(table.is_ok)) * len(table.predicted) + len(table)

        curves = run_curves(store, workload, target)
        conv = convergence_info(curves)
        cmp = strategy_comparison_info(curves)
        pvm = predicted_vs_measured_info(table)
        knobs = knob_effects_info(table, space)
        steps = [
            ("run_curves (trial_rows per run)", lambda: run_curves(store, workload, target)),
            ("run curves from the table", lambda: [run_curve(table, r) for r in store.runs()]),
            ("convergence_info", lambda: convergence_info(curves)),
            ("strategy_comparison_info", lambda: strategy_comparison_info(curves)),
            ("predicted_vs_measured_info", lambda: predicted_vs_measured_info(table)),
            ("knob_effects_info", lambda: knob_effects_info(table, space)),
            ("TrialTable.extend(64 trials)", lambda: table.extend(store.trials(limit=64))),
            ("update 4 figures", lambda: (
                plots.update_convergence_figure(dash.convergence_fig, conv),
                plots.update_strategy_comparison_figure(dash.comparison_fig, cmp),
                plots.update_predicted_vs_measured_figure(dash.pred_vs_meas_fig, pvm),
                plots.update_knob_effects_figure(dash.knobs_fig, knobs),
            )),
        ]  # fmt: skip
        figs = [dash.convergence_fig, dash.pred_vs_meas_fig, dash.comparison_fig, dash.knobs_fig]
        shipped_cmp = sum(len(g.values) for g in cmp.groups)
        shipped = conv.num_points + pvm.num_points + knobs.num_points + shipped_cmp

        print(f"baseline store.trials(workload) [{total:,} records]: {decode_ms:9.0f} ms")
        print(
            f"first load, TrialTable from store.trials (before):  {load_old_ms:9.0f} ms\n"
            f"first load, TrialTable from trial_rows (after):     {load_new_ms:9.0f} ms "
            f"({load_old_ms / load_new_ms:.1f}x faster)\n"
            f"store.trial_rows(workload) [{num_rows:,} rows]:      {rows_ms:9.0f} ms "
            f"({decode_ms / rows_ms:.1f}x faster than store.trials)"
        )
        print(
            f"baseline naive figures (all points):        {naive_ms:9.0f} ms, {naive_kb:,.0f} KB"
        )
        print(
            f"dashboard cold refresh (load table):         {cold_ms:9.0f} ms "
            f"({cold_ms / decode_ms:.2f}x store.trials)"
        )
        print(
            f"dashboard warm refresh (+64 trials):         {warm_ms:9.0f} ms "
            f"({warm_ms / decode_ms:.4f}x store.trials, {warm_ms / naive_ms:.3f}x naive figures)"
        )
        print("\nwarm refresh breakdown:")
        for name, fn in steps:
            print(f"  {name:36} {median_ms(fn, repeat=3):8.1f} ms")
        print(
            f"\npoints shipped: {shipped:,} (naive: {naive_points:,}; "
            f"{naive_points / max(shipped, 1):.0f}x fewer), figure JSON "
            f"{_json_kb(figs):,.0f} KB (naive {naive_kb:,.0f} KB)"
        )
        print(
            f"  convergence {conv.num_points:,} | predicted-vs-measured {pvm.num_points:,} | "
            f"knob effects {knobs.num_points:,} | comparison {shipped_cmp}"
        )
        verdict = "met" if warm_ms < TARGET_WARM_MS else "NOT met"
        print(f"target warm refresh < {TARGET_WARM_MS:.0f} ms: {verdict}")
        speedup = load_old_ms / load_new_ms
        verdict = "met" if speedup >= TARGET_LOAD_SPEEDUP else "NOT met"
        print(f"target first load >= {TARGET_LOAD_SPEEDUP:.0f}x faster than before: {verdict}")
        ctx.close()
        store.close()


if __name__ == "__main__":
    main()
