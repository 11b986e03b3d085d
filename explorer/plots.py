"""Figure factories for the dashboards and the HTML report: one ``make_*_figure(info)`` and
``update_*_figure(fig, info)`` per plot, over the pure infos of ``explorer.analysis`` (Optuna's
info/plot split). Needs plotly (the ``[lab]`` extra), imported by this module only: ``explorer``
itself never imports it. Every figure is a plain ``go.Figure`` (the HTML report's, or a static
plot in a notebook); ``widgets`` shows the same figures live (``widgets.LiveFigure``: the
dashboards, and ``widgets.make_*_figure``), and the update functions work on both.

Builders only draw: every number comes reduced from the info (improvement points, capped point
clouds), so a figure over 100k trials stays a few thousand points. An update rewrites the traces
in one ``batch_update`` (the front end sees one consistent state); when the set of traces
changes (a new strategy or cost model appeared) the traces are replaced instead. Each trace's
``meta`` names what it draws ("runs|random|trials", "pvm|xgb-rank"): a click on a live figure
checks it, and the browser tests find traces by it. Clickable traces carry what a click opens
in ``customdata``: a trial id, or ``[run_id, seq]`` on convergence lines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer._figures import (
    HEADER,
    WRAP,
    heading,
    log_axis,
    nan_to_none,
    on_point_click,
    palette,
    rgba,
    sync,
)
from explorer._plots_knobs import make_knob_effects_figure, update_knob_effects_figure
from explorer._plots_model import make_model_race_figure, make_model_tasks_figure
from explorer._plots_nas import make_nas_pareto_figure, update_nas_pareto_figure
from explorer.analysis import (
    MIN_POINTS,
    ConvergenceGroup,
    ConvergenceInfo,
    PredictedVsMeasuredInfo,
    RaceInfo,
    RunSeries,
    StrategyComparisonInfo,
    TransferInfo,
)
from explorer.search import prediction_sources
from explorer.text import plural

AXES = ("trials", "secs")


# -- convergence ------------------------------------------------------------------------------
def make_convergence_figure(info: ConvergenceInfo) -> go.Figure:
    """Best-so-far vs trials (left) and vs wall-clock seconds (right): per strategy, the median
    across runs with the min-max spread shaded, and every run as a thin step line; the
    unscheduled baseline (and the start, when the runs have one) as dashed horizontal lines.

    Every ``make_*_figure`` returns a plain ``go.Figure`` (no ipywidgets needed: the HTML
    report, ``explorer.report``); ``widgets.make_*_figure`` returns it as a live figure."""
    base = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.05,
        subplot_titles=("vs trials", "vs wall-clock time"),
    )
    fig = go.Figure(base)
    fig.update_layout(
        height=430,
        margin=dict(l=60, r=40, b=50),
        legend=dict(orientation="h", y=-0.2),
        hovermode="closest",
        **HEADER,
    )
    fig.update_xaxes(title_text="trials", row=1, col=1)
    fig.update_xaxes(title_text="wall-clock seconds", row=1, col=2)
    update_convergence_figure(fig, info)
    return fig


def update_convergence_figure(fig: go.Figure, info: ConvergenceInfo) -> None:
    traces = [t for i, g in enumerate(info.groups) for t in _convergence_traces(g, i, info)]
    traces += _reference_traces(info)
    better = "higher is better" if info.metric == "gflops" else "lower is better"
    counts = f"{plural(info.num_runs, 'run')}, {plural(info.num_trials, 'trial')}"
    if info.num_remeasured:
        counts += (
            f" + {plural(info.num_remeasured, 're-measurement')} (the unscheduled baseline and "
            "schedules timed again; not on the trials axis)"
        )
    sync(
        fig,
        traces,
        {
            **heading(f"Best so far: {info.metric_label} ({better})", [counts], extra=24),
            "yaxis.title.text": info.metric_label,
            "yaxis.type": "log" if info.metric == "latency_ms" else "linear",
        },
        empty="No search runs for this workload yet" if not info.groups else None,
    )


def _convergence_traces(g: ConvergenceGroup, index: int, info: ConvergenceInfo) -> list[Any]:
    color = palette(index)
    unit = info.metric_label
    out: list[Any] = []
    for axis, spread in zip(AXES, (g.by_trials, g.by_secs), strict=True):
        ref = {
            "xaxis": "x" if axis == "trials" else "x2",
            "yaxis": "y" if axis == "trials" else "y2",
        }
        keep = [i for i, n in enumerate(spread.num_runs) if n > 0]
        x = [spread.x[i] for i in keep]
        common = dict(legendgroup=g.label, showlegend=False, hoverinfo="skip", **ref)
        out.append(
            go.Scatter(
                x=x,
                y=nan_to_none(spread.lo[i] for i in keep),
                mode="lines",
                line=dict(width=0, shape="hv", color=color),
                meta=f"lo|{g.label}|{axis}",
                **common,
            )
        )
        out.append(
            go.Scatter(
                x=x,
                y=nan_to_none(spread.hi[i] for i in keep),
                mode="lines",
                line=dict(width=0, shape="hv", color=color),
                fill="tonexty",
                fillcolor=rgba(color, 0.15),
                meta=f"hi|{g.label}|{axis}",
                **common,
            )
        )
        rx, ry, keys = _run_lines(g.runs, axis)
        out.append(
            go.Scatter(
                x=rx,
                y=ry,
                customdata=keys,
                mode="lines+markers",
                line=dict(width=1, shape="hv", color=color),
                marker=dict(size=4, color=color),
                opacity=0.45,
                name=f"{g.label} runs",
                legendgroup=g.label,
                showlegend=False,
                hovertemplate=(
                    "run %{customdata[0]}, trial %{customdata[1]}<br>"
                    f"%{{y:.4g}} {unit}<extra>{g.label}</extra>"
                ),
                meta=f"runs|{g.label}|{axis}",
                **ref,
            )
        )
        out.append(
            go.Scatter(
                x=x,
                y=nan_to_none(spread.median[i] for i in keep),
                mode="lines",
                line=dict(width=3, shape="hv", color=color),
                name=f"{g.label}: median of {plural(len(g.runs), 'run')}",
                legendgroup=g.label,
                showlegend=axis == "trials",
                # Not hoverable: it lies on the runs' points (exactly, with one run), and a
                # click on it opened nothing; hover and click reach the runs' trials instead.
                hoverinfo="skip",
                meta=f"median|{g.label}|{axis}",
                **ref,
            )
        )
    return out


def _reference_traces(info: ConvergenceInfo) -> list[Any]:
    """The baseline (unscheduled program) and the start as dashed lines across both axes."""
    runs = [r for g in info.groups for r in g.runs]
    ends = {
        "trials": max((r.num_trials for r in runs), default=0),
        "secs": max((r.last_elapsed_secs for r in runs), default=0.0),
    }
    out: list[Any] = []
    for name, label, value, dash in (
        ("baseline", "unscheduled (baseline)", info.baseline, "dash"),
        ("start", "your start", info.start, "dot"),
    ):
        if value is None:
            continue
        for axis in AXES:
            start = 1 if axis == "trials" else 0.0
            out.append(
                go.Scatter(
                    x=[start, max(ends[axis], start)],
                    y=[value, value],
                    mode="lines",
                    line=dict(width=1.5, dash=dash, color="gray"),
                    name=label,
                    legendgroup=name,
                    showlegend=axis == "trials",
                    hovertemplate=f"{label}: %{{y:.4g}} {info.metric_label}<extra></extra>",
                    meta=f"ref|{name}|{axis}",
                    xaxis="x" if axis == "trials" else "x2",
                    yaxis="y" if axis == "trials" else "y2",
                )
            )
    return out


def _run_lines(runs: Sequence[RunSeries], axis: str) -> tuple[list[Any], list[Any], list[Any]]:
    """Every run as one None-separated line (one trace per strategy, not per run); each point's
    ``customdata`` is the ``[run_id, seq]`` of the trial that set that best."""
    xs: list[Any] = []
    ys: list[Any] = []
    keys: list[Any] = []
    for r in runs:
        if not r.seqs:
            continue  # nothing succeeded yet: no best to draw
        steps = r.trials if axis == "trials" else r.elapsed_secs
        end = r.num_trials if axis == "trials" else r.last_elapsed_secs
        xs += [*steps, end, None]
        ys += [*nan_to_none(r.values), nan_to_none([r.values[-1]])[0], None]
        keys += [[r.run_id, s] for s in r.seqs] + [[r.run_id, r.seqs[-1]], None]
    return xs, ys, keys


# -- a race on a recording --------------------------------------------------------------------
def make_race_figure(info: RaceInfo) -> go.Figure:
    """A race's best-so-far latency vs trials: per strategy the median over seeds with the
    seeds' spread shaded and each seed as a thin line; the recording's best and 90% of it
    (the speed ``RaceRow.trials_to_reach`` counts trials to) as horizontal lines."""
    fig = go.Figure(
        layout=dict(
            height=430,
            margin=dict(l=60, r=40, b=50),
            legend=dict(orientation="h", y=-0.2),
            hovermode="closest",
            **HEADER,
        )
    )
    traces = [
        t
        for i, g in enumerate(info.convergence.groups)
        for t in _convergence_traces(g, i, info.convergence)
        if t.meta.endswith("|trials")
    ]
    for name, label, value, dash in (
        ("best", "the recording's best", info.best_ms, "dash"),
        ("reach", "90% of its speed", info.reach_ms, "dot"),
    ):
        if value is not None:
            traces.append(
                go.Scatter(
                    x=[1, max(info.trials, 1)],
                    y=[value, value],
                    mode="lines",
                    line=dict(width=1.5, dash=dash, color="gray"),
                    name=label,
                    hovertemplate=f"{label}: %{{y:.4g}} ms<extra></extra>",
                    meta=f"ref|{name}|trials",
                )
            )
    fig.add_traces(traces)
    fig.update_xaxes(title_text="trials")
    fig.update_yaxes(title_text="best so far: latency (ms)", type="log")
    fig.update_layout(
        heading(f"Race on a recording (replayed): {info.workload_key}", [info.subtitle], extra=24)
    )
    return fig


# -- predicted vs measured --------------------------------------------------------------------
def _no_predictions_text() -> str:
    """Which searches store predictions, read from the strategies' declared capabilities."""
    records, never = prediction_sources()
    head = f"No predictions yet: searches with a cost model ({', '.join(records)})"
    if not never:
        return f"{head}<br>record them with each trial."
    if len(never) == 1:
        return f"{head}<br>record them with each trial; {never[0]} does not."
    return (
        f"{head}<br>record them with each trial; {', '.join(never[:-1])} and {never[-1]} do not."
    )


NO_PREDICTIONS = _no_predictions_text()


def make_predicted_vs_measured_figure(info: PredictedVsMeasuredInfo) -> go.Figure:
    """Measured latency against each cost model's predicted rank (WebGL scatter), with the rank
    correlations in the legend."""
    fig = go.Figure()
    fig.update_layout(
        height=400,
        margin=dict(l=60, r=40, b=50),
        **HEADER,
        # Padded both sides: a rank of exactly 0 or 1 (one point: 1.0) must not sit on the edge.
        xaxis=dict(title=dict(text="predicted rank (1 = predicted fastest)"), range=[-0.05, 1.05]),
        yaxis=dict(title=dict(text="measured latency (ms)"), type="log"),
        legend=dict(orientation="h", y=-0.2),
    )
    update_predicted_vs_measured_figure(fig, info)
    return fig


def update_predicted_vs_measured_figure(fig: go.Figure, info: PredictedVsMeasuredInfo) -> None:
    traces = []
    for i, m in enumerate(info.models):
        if m.num_points < MIN_POINTS:  # no correlation of so few points
            name = f"{m.model}: n={m.num_points}, too few to correlate (needs {MIN_POINTS})"
        else:
            name = f"{m.model}: Spearman {_corr(m.spearman)}, Kendall {_corr(m.kendall)}"
            name += f" (n={m.num_points})"
        name += f", {m.num_failed} failed" if m.num_failed else ""
        traces.append(
            go.Scattergl(
                x=m.predicted_rank,
                y=m.latency_ms,
                customdata=m.trial_ids,
                mode="markers",
                marker=dict(size=6, color=palette(i), opacity=0.7),
                name=name,
                showlegend=True,
                hovertemplate=(
                    "trial %{customdata}<br>predicted rank %{x:.2f}<br>%{y:.4g} ms"
                    f"<extra>{m.model}</extra>"
                ),
                meta=f"pvm|{m.model}",
            )
        )
    models = ", ".join(m.model for m in info.models)
    counts = f"{info.num_predicted} of {plural(info.num_trials, 'trial')}"
    counts += f" {'has' if info.num_trials == 1 else 'have'} predictions"
    counts += f" from {models}" if models else ""
    notes = [counts]
    notes += [f"{info.num_failed} failed"] if info.num_failed else []
    if info.num_remeasured:
        notes.append(f"+ {plural(info.num_remeasured, 're-measurement')}")
    shown = sum(len(m.trial_ids) for m in info.models)
    if shown < sum(m.num_points for m in info.models):
        notes.append(f"showing {shown} points")
    empty = None
    if not info.models:
        empty = NO_PREDICTIONS
    elif not shown:
        empty = "No successful trial has a prediction yet (the predicted ones failed)."
    latencies = [v for m in info.models for v in m.latency_ms if v > 0]
    header = heading("Predicted vs measured", ["; ".join(notes)])
    sync(fig, traces, {**header, **log_axis("yaxis", latencies)}, empty=empty)


def _corr(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


# -- strategy comparison ----------------------------------------------------------------------
def make_strategy_comparison_figure(info: StrategyComparisonInfo) -> go.Figure:
    """Each run's best at an equal budget, one box per strategy (every run drawn as a point)."""
    fig = go.Figure()
    fig.update_layout(
        height=400,
        margin=dict(l=60, r=40, b=50),
        xaxis=dict(title=dict(text="strategy")),
        showlegend=False,
        **HEADER,
    )
    update_strategy_comparison_figure(fig, info)
    return fig


def update_strategy_comparison_figure(fig: go.Figure, info: StrategyComparisonInfo) -> None:
    unit = info.metric_label
    traces = []
    for i, g in enumerate(info.groups):
        pairs = [(r, v) for r, v in zip(g.run_ids, g.values, strict=True) if not math.isnan(v)]
        name = g.label + (
            f" ({g.num_without_success} without success)" * bool(g.num_without_success)
        )
        traces.append(
            go.Box(
                y=[v for _, v in pairs],
                customdata=[r for r, _ in pairs],
                name=name,
                boxpoints="all",
                jitter=0.3,
                pointpos=0,
                marker=dict(color=palette(i)),
                hovertemplate=f"run %{{customdata}}: %{{y:.4g}} {unit}<extra></extra>",
                meta=f"cmp|{g.label}",
            )
        )
    title = f"Strategies: best {info.metric_label} per run"
    notes = [f"within the first {plural(info.budget, 'trial')} of each run"]
    if info.num_short_runs:
        notes.append(f"{plural(info.num_short_runs, 'shorter run')} left out")
    if info.num_remeasured:
        notes.append("re-measurements not counted")
    sync(
        fig,
        traces,
        {
            **heading(title, ["; ".join(notes)]),
            "yaxis.title.text": info.metric_label,
            "yaxis.type": "log" if info.metric == "latency_ms" else "linear",
        },
        empty="No finished search runs to compare yet" if not info.groups else None,
    )


# -- transfer between targets -----------------------------------------------------------------
def make_transfer_figure(info: TransferInfo) -> go.Figure:
    """Each target's best schedule on every target: time over that target's own best."""
    fig = go.Figure()
    n = max(1, len(info.targets))
    fig.update_layout(
        height=160 + 60 * n,
        margin=dict(l=160, r=40, b=60),
        xaxis=dict(title=dict(text="measured on"), side="bottom"),
        yaxis=dict(title=dict(text="tuned for"), autorange="reversed"),
        **HEADER,
    )
    matrix = info.matrix()
    text = [["n/a" if math.isnan(v) else f"{v:.2f}x" for v in row] for row in matrix]
    heat = go.Heatmap(
        z=[nan_to_none(row) for row in matrix],
        x=list(info.targets),
        y=list(info.targets),
        text=text,
        texttemplate="%{text}",
        colorscale="Reds",
        zmin=1.0,
        colorbar=dict(title=dict(text="x slower")),
        hovertemplate="tuned for %{y}, measured on %{x}: %{text}<extra></extra>",
        meta="transfer",
    )
    worst = max((v for row in matrix for v in row if not math.isnan(v)), default=math.nan)
    details = [
        "time of the row target's best schedule on the column target, over the column target's "
        "own best (1.00x on the diagonal)",
    ]
    if not math.isnan(worst) and worst > 1:
        details.append(f"tuning for the wrong target costs up to {worst:.2f}x here")
    sync(
        fig,
        [heat],
        heading(f"Transfer between targets: {info.workload_key}", details),
        empty="Tune the workload for two targets to compare them" if not info.cells else None,
    )
    return fig


__all__ = [
    "HEADER",
    "WRAP",
    "make_convergence_figure",
    "make_knob_effects_figure",
    "make_model_race_figure",
    "make_race_figure",
    "make_model_tasks_figure",
    "make_nas_pareto_figure",
    "make_predicted_vs_measured_figure",
    "make_strategy_comparison_figure",
    "make_transfer_figure",
    "on_point_click",
    "update_convergence_figure",
    "update_knob_effects_figure",
    "update_nas_pareto_figure",
    "update_predicted_vs_measured_figure",
    "update_strategy_comparison_figure",
]
