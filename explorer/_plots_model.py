"""The Model tab's plots, over the pure ``explorer.analysis`` model infos. Needs plotly.

* ``make_model_tasks_figure``: where the network's time goes, untuned and now: two stacked bars,
  one segment per task (the costliest now first; the rest as "other tasks"), so the tasks that
  still dominate after tuning stand out.
* ``make_model_race_figure``: the tuned network's latency against the trials spent, one line per
  tune, as a multiple of ONNX Runtime's in the same race (the untuned build's too).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go

from explorer._figures import HEADER, heading, log_axis, palette
from explorer.analysis import ModelRaceInfo, ModelTimesInfo, RacePoint
from explorer.text import format_secs

SHOWN_TASKS = 8  # segments of a bar; the rest is one "other tasks" segment
BARS = ("untuned", "now")


def make_model_tasks_figure(info: ModelTimesInfo | None = None) -> go.Figure:
    """Two stacked bars: each task's time per inference untuned and now."""
    fig = go.Figure(layout=dict(height=400, barmode="stack", margin=dict(l=80, r=30, b=150),
                                legend=dict(orientation="h", yanchor="top"),
                                uirevision=_identity(info), **HEADER))  # fmt: skip
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
            [f"untuned {_time(info.untuned_ms)}, now {_time(info.tuned_ms)} per inference; "
             f"{tuned} of {len(info.tasks)} tasks tuned. The race below measures the network "
             "itself (its runtime adds to the sum)."],
        )
    )  # fmt: skip
    _legend_below_axis_title(fig)
    return fig


def _legend_below_axis_title(fig: go.Figure, gap_px: int = 62) -> None:
    """Hang the legend (up to 9 task names, wrapping to rows) ``gap_px`` below the plot area,
    under the tick labels and the axis title, in the bottom margin. A legend placed at a
    fraction of the plot's height covered the title when the subtitle's lines took height."""
    layout = fig.layout
    plot_px = layout.height - (layout.margin.t or 0) - (layout.margin.b or 0)
    fig.update_layout(legend_y=-gap_px / max(plot_px, 1))


def _bar(name: str, before: float | None, now: float | None, color: str) -> go.Bar:
    return go.Bar(
        y=list(BARS), x=[before, now], name=name, orientation="h", marker_color=color,
        hovertemplate=f"{name}<br>%{{y}}: %{{x:.3g}} ms<extra></extra>",
    )  # fmt: skip


def make_model_race_figure(info: ModelRaceInfo | None = None) -> go.Figure:
    """The tuned network's latency against trials spent, per tune, as a multiple of ONNX
    Runtime's in the same race (with the untuned build's and ``tune_relax``'s).

    A multiple, not a time: the contenders of one race are timed in interleaved rounds, but
    on a machine whose speed changes (a VM's host, a laptop's clock) two races a minute apart
    read every time, ONNX Runtime's too, up to 1.75x apart, and a line of times then read as
    "more trials made it slower". A multiple cancels what slows every contender alike, not what
    slows one more than another (a 2-thread build of many short kernels waits on its threads'
    meetings: ``explorer.model.speed_note`` says when a race's probes saw that). The times
    themselves are in the hover text and the Model tab's race table."""
    fig = go.Figure(layout=dict(height=360, margin=dict(l=70, r=30, b=60),
                                legend=dict(orientation="h", y=-0.25),
                                uirevision=_identity(info), **HEADER))  # fmt: skip
    fig.update_xaxes(title_text="trials spent")
    fig.update_yaxes(title_text="÷ ONNX Runtime, same race", type="log")
    latest = info.latest if info is not None else None
    if info is None or latest is None:
        fig.update_layout(heading("Race against ONNX Runtime", ["Race the model to see it."]))
        return fig
    for i, (tune, points) in enumerate(info.series):
        fig.add_trace(
            _ratios(points, lambda p: p.tuned_ms, f"tuned: {tune}", tune, mode="lines+markers",
                    line=dict(color=palette(i)))
        )  # fmt: skip
    relax = [p for _, pts in info.series for p in pts]
    if any(p.tune_relax_ms is not None for p in relax):
        fig.add_trace(
            _ratios(relax, lambda p: p.tune_relax_ms, "TVM's tune_relax, equal trials",
                    "tune_relax", mode="markers", marker=dict(symbol="x", size=10, color="#444"))
        )  # fmt: skip
    # ONNX Runtime is 1 in every race; the untuned build's multiple is the latest race's
    # (plotly puts a line's annotation at the wrong height on a log axis, so they are named in
    # the legend instead).
    span = [0, max((p.trials for _, pts in info.series for p in pts), default=1)]
    untuned = _ratio(latest.untuned_ms, latest.onnxruntime_ms)
    for name, value, dash in (
        ("ONNX Runtime (1 in each race)", 1.0, "dash"),
        ("untuned (latest race)", untuned, "dot"),
    ):
        if value is not None:
            fig.add_trace(
                go.Scatter(
                    x=span, y=[value, value], mode="lines", name=name,
                    line=dict(dash=dash, color="#444"),
                    hovertemplate=f"{name}: %{{y:.3g}}x<extra></extra>",
                )
            )  # fmt: skip
    # a verdict read beside other processes is not stated as a fact on its own
    details = [_verdict(latest.tuned_ms, latest.onnxruntime_ms), latest.busy or "",
               latest.slow or ""]  # fmt: skip
    fig.update_layout(heading(f"{info.model} against ONNX Runtime", details))
    # No point or tick label on the plot's edge: plotly fitted the log axis to the lines
    # exactly (half labels, a half-hidden point) and labelled 0.5 and 5 both "5".
    multiples = [v for trace in fig.data for v in trace.y if v is not None and v > 0]
    fig.update_layout(log_axis("yaxis", multiples))
    fig.update_xaxes(range=[-0.03 * span[1], 1.04 * span[1]])
    return fig


def _ratios(
    points: Sequence[RacePoint],
    ms_of: Callable[[RacePoint], float | None],
    name: str,
    label: str,
    **style: Any,
) -> go.Scatter:
    """A contender's latency (``ms_of``) ÷ ONNX Runtime's, in each race that timed both."""
    shown = [(p, ms) for p in points if (ms := ms_of(p)) is not None and p.onnxruntime_ms]
    return go.Scatter(
        x=[p.trials for p, _ in shown], y=[_ratio(ms, p.onnxruntime_ms) for p, ms in shown],
        customdata=[[_time(ms), _time(p.onnxruntime_ms or 0.0), p.race_id] for p, ms in shown],
        name=name, **style,
        hovertemplate="%{x} trials: %{y:.3g}x ONNX Runtime<br>%{customdata[0]} against "
        "%{customdata[1]} (race %{customdata[2]})<extra>" + label + "</extra>",
    )  # fmt: skip


def _ratio(ms: float | None, reference_ms: float | None) -> float | None:
    if ms is None or not reference_ms:
        return None
    return ms / reference_ms


def _verdict(tuned: float | None, ort: float | None) -> str:
    if tuned is None or ort is None:
        return "The latest race has no tuned or no ONNX Runtime reading."
    ratio = tuned / ort
    how = f"{1 / ratio:.2f}x faster" if ratio < 1 else f"{ratio:.2f}x slower"
    return (
        f"Latest race: tuned {_time(tuned)}, ONNX Runtime {_time(ort)}: the tuned network is "
        f"{how} than ONNX Runtime."
    )


def _time(ms: float) -> str:
    """A time in the unit the tables use (``format_secs``: "263 µs", "2.91 s")."""
    return format_secs(ms / 1e3)


def _identity(info: ModelTimesInfo | ModelRaceInfo | None) -> str:
    """The figure's ``uirevision``: a zoom is kept while the same model's figure updates, and
    dropped for another model's (a model without races kept the last one's axes)."""
    return "no model" if info is None else f"model {info.model}"
