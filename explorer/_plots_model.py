"""The Model tab's plots, over the pure ``explorer.analysis`` model infos. Needs plotly.

* ``make_model_tasks_figure``: where the network's time goes, untuned and now: two stacked bars,
  one segment per task (the costliest now first; the rest as "other tasks"), so the tasks that
  still dominate after tuning stand out.
* ``make_model_race_figure``: the tuned network's latency against the trials spent, one line per
  tune, beside ONNX Runtime's and the untuned build's in the same races.
"""

from __future__ import annotations

import plotly.graph_objects as go

from explorer._figures import HEADER, heading, palette
from explorer.analysis import ModelRaceInfo, ModelTimesInfo

SHOWN_TASKS = 8  # segments of a bar; the rest is one "other tasks" segment
BARS = ("untuned", "now")


def make_model_tasks_figure(info: ModelTimesInfo | None = None) -> go.Figure:
    """Two stacked bars: each task's time per inference untuned and now."""
    fig = go.Figure(layout=dict(height=300, barmode="stack", margin=dict(l=80, r=30, b=50),
                                legend=dict(orientation="h", y=-0.3), **HEADER))  # fmt: skip
    fig.update_xaxes(title_text="time per inference (ms), tasks' own timings summed")
    if info is None or not info.tasks:
        fig.update_layout(heading("Where the time goes", ["Import a model to see its tasks."]))
        return fig
    shown, rest = info.tasks[:SHOWN_TASKS], info.tasks[SHOWN_TASKS:]
    for i, task in enumerate(shown):
        fig.add_trace(_bar(task.name, task.untuned_ms, task.best_ms, palette(i)))
    if rest:
        fig.add_trace(
            _bar(
                f"{len(rest)} other tasks",
                sum(t.untuned_ms or 0.0 for t in rest), sum(t.best_ms or 0.0 for t in rest),
                "#bbbbbb",
            )
        )  # fmt: skip
    tuned = sum(1 for t in info.tasks if t.tuned_ms is not None)
    fig.update_layout(
        heading(
            f"Where {info.model}'s time goes",
            [f"untuned {info.untuned_ms:.3g} ms, now {info.tuned_ms:.3g} ms per inference; "
             f"{tuned} of {len(info.tasks)} tasks tuned. The race below measures the network "
             "itself (its runtime adds to the sum)."],
        )
    )  # fmt: skip
    return fig


def _bar(name: str, before: float | None, now: float | None, color: str) -> go.Bar:
    return go.Bar(
        y=list(BARS), x=[before, now], name=name, orientation="h", marker_color=color,
        hovertemplate=f"{name}<br>%{{y}}: %{{x:.3g}} ms<extra></extra>",
    )  # fmt: skip


def make_model_race_figure(info: ModelRaceInfo | None = None) -> go.Figure:
    """The tuned network's latency against trials spent, per tune, with ONNX Runtime's."""
    fig = go.Figure(layout=dict(height=360, margin=dict(l=70, r=30, b=60),
                                legend=dict(orientation="h", y=-0.25), **HEADER))  # fmt: skip
    fig.update_xaxes(title_text="trials spent")
    fig.update_yaxes(title_text="network latency (ms)", type="log")
    latest = info.latest if info is not None else None
    if info is None or latest is None:
        fig.update_layout(heading("Race against ONNX Runtime", ["Race the model to see it."]))
        return fig
    for i, (tune, points) in enumerate(info.series):
        timed = [p for p in points if p.tuned_ms is not None]
        fig.add_trace(
            go.Scatter(
                x=[p.trials for p in timed], y=[p.tuned_ms for p in timed],
                mode="lines+markers", name=f"tuned: {tune}", line=dict(color=palette(i)),
                hovertemplate="%{x} trials: %{y:.3g} ms<extra>" + tune + "</extra>",
            )
        )  # fmt: skip
    relax = [p for _, pts in info.series for p in pts if p.tune_relax_ms is not None]
    if relax:
        fig.add_trace(
            go.Scatter(
                x=[p.trials for p in relax], y=[p.tune_relax_ms for p in relax],
                mode="markers", name="TVM's tune_relax, equal trials",
                marker=dict(symbol="x", size=10, color="#444"),
                hovertemplate="%{x} trials: %{y:.3g} ms<extra>tune_relax</extra>",
            )
        )  # fmt: skip
    # The latest race's references as lines across the plot (plotly puts a line's annotation
    # at the wrong height on a log axis, so they are named in the legend instead).
    span = [0, max((p.trials for _, pts in info.series for p in pts), default=1)]
    for name, value, dash in (
        ("ONNX Runtime (latest race)", latest.onnxruntime_ms, "dash"),
        ("untuned (latest race)", latest.untuned_ms, "dot"),
    ):
        if value is not None:
            fig.add_trace(
                go.Scatter(
                    x=span, y=[value, value], mode="lines", name=name,
                    line=dict(dash=dash, color="#444"),
                    hovertemplate=f"{name}: %{{y:.3g}} ms<extra></extra>",
                )
            )  # fmt: skip
    details = [_verdict(latest.tuned_ms, latest.onnxruntime_ms)]
    fig.update_layout(heading(f"{info.model} against ONNX Runtime", details))
    return fig


def _verdict(tuned: float | None, ort: float | None) -> str:
    if tuned is None or ort is None:
        return "The latest race has no tuned or no ONNX Runtime reading."
    ratio = tuned / ort
    how = "faster than" if ratio < 1 else "slower than"
    return f"Latest race: tuned {tuned:.3g} ms, {ratio:.2f}x ONNX Runtime's {ort:.3g} ms ({how})."
