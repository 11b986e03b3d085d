"""The NAS panel's Pareto plot: tuned latency against Fisher Potential, one point per network.

A figure factory in the style of ``explorer.plots`` (with its shared helpers,
``explorer._figures``), over the
pure ``explorer.analysis.NasFrontInfo``. Needs plotly, imported by this module only.

Two panes share the Fisher Potential axis. The wide one places every legal network with a tuned
latency: the original as a star, the Pareto front as diamonds, the rest as circles; a marker's
area grows with the network's parameters (the front's third objective). A dashed staircase
joins the front's networks that no other beats on latency and FP alone (``front_line``): a
diamond below it is on the front by having fewer parameters. The narrow pane holds the
networks without a latency, at ``illegal`` (below ``tau``: never tuned) and ``not timed``
(legal, but the search stopped first or a shape had no successful schedule), so they are seen,
not dropped. A dotted line at ``tau`` crosses both panes. Every point trace's ``meta`` starts
with ``nas|`` and its ``customdata`` is the point's index in ``info.points``:
``on_point_click(fig, "nas|", ...)`` wires the clicks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer._figures import HEADER, heading, sync
from explorer.analysis import NasFrontInfo, NasPointInfo
from explorer.text import plural

SIDE = ("illegal", "not timed")
"""The narrow pane's categories: the networks without a latency."""
SIDE_TICKS = ("illegal", "not<br>timed")  # the pane is ~130 px wide: one word per line

COLORS = {
    "original": "#222222",
    "front": "#d62728",
    "legal": "#1f77b4",
    "illegal": "#9467bd",
    "untimed": "#7f7f7f",
}

MIN_SIZE, MAX_SIZE = 9.0, 24.0  # marker diameters (px) of the smallest and largest network


def make_nas_pareto_figure(info: NasFrontInfo | None = None) -> go.Figure:
    """The Pareto plot of a NAS search (``None``: an empty plot that says what to do)."""
    base = make_subplots(
        rows=1, cols=2, shared_yaxes=True, column_widths=[0.8, 0.2], horizontal_spacing=0.02
    )
    fig = go.Figure(base)
    fig.update_layout(
        height=470,
        margin=dict(l=70, r=30, b=60),
        legend=dict(orientation="h", y=-0.2, x=0.0),
        hovermode="closest",
        **HEADER,
    )
    fig.update_xaxes(title_text="network latency (ms): sum of its tuned convolutions", col=1)
    fig.update_xaxes(
        type="category",
        categoryorder="array",
        categoryarray=list(SIDE),
        tickvals=list(SIDE),
        ticktext=list(SIDE_TICKS),
        range=[-0.6, 1.6],
        col=2,
    )
    fig.update_yaxes(title_text="Fisher Potential / original's", col=1)
    update_nas_pareto_figure(fig, info)
    return fig


def update_nas_pareto_figure(fig: go.Figure, info: NasFrontInfo | None) -> None:
    """Redraw ``fig`` for ``info`` (same traces every time: click handlers stay attached)."""
    points = info.points if info is not None else ()
    sizes = _sizes(points)
    on_front = [p for p in points if p.is_on_front and not p.is_original]
    others = [p for p in points if p.is_legal and p.is_timed and not p.is_on_front]
    others = [p for p in others if not p.is_original]
    original = [p for p in points if p.is_original and p.is_timed]
    illegal = [p for p in points if not p.is_legal]
    untimed = [p for p in points if p.is_legal and not p.is_timed]
    front_line = [points[i] for i in info.front_line] if info is not None else []
    is_original_on_front = bool(original) and original[0].is_on_front
    traces = [
        go.Scatter(
            x=[p.latency_ms for p in front_line],
            y=[p.fisher_ratio for p in front_line],
            mode="lines",
            # Right, then up: the edge of what the front's networks beat on these two axes.
            line=dict(color=COLORS["front"], dash="dash", width=1.5, shape="hv"),
            name="front on latency and FP",
            hoverinfo="skip",
            meta="nas-front-line",
        ),
        _points(others, sizes, "legal candidates", "circle", COLORS["legal"], "legal"),
        _points(
            on_front,
            sizes,
            "Pareto front (latency, FP, params)",
            "diamond",
            COLORS["front"],
            "front",
        ),
        _points(
            original,
            sizes,
            "original (on the front)" if is_original_on_front else "original",
            "star",
            COLORS["original"],
            "original",
        ),
        _points(illegal, sizes, "illegal (FP < tau)", "x", COLORS["illegal"], "illegal", 2),
        _points(
            untimed, sizes, "legal, not timed", "circle-open", COLORS["untimed"], "untimed", 2
        ),
    ]
    tau = info.tau if info is not None else 1.0
    layout: dict[str, Any] = {
        # A layout line across both panes (paper x): legal is at or above it.
        "shapes": [
            dict(
                type="line",
                xref="paper",
                x0=0,
                x1=1,
                yref="y",
                y0=tau,
                y1=tau,
                line=dict(color="#555", dash="dot", width=1),
                name=f"tau = {tau:g}: legal at or above",
                showlegend=True,
            )
        ]
        if info is not None
        else [],
    }
    layout.update(_latency_axis([p.latency_ms for p in points if p.is_legal and p.is_timed]))
    if info is None:
        layout.update(heading("NAS: latency vs Fisher Potential", []))
    else:
        layout.update(heading(f"NAS: {info.network}", _details(info)))
    sync(
        fig,
        traces,
        layout,
        empty="Run a NAS search to see its candidates here" if not points else None,
    )
    if info is None:  # update_layout(shapes=[]) merges and keeps the last search's tau line
        fig.layout.shapes = ()


def _points(
    points: Sequence[NasPointInfo],
    sizes: dict[int, float],
    name: str,
    symbol: str,
    color: str,
    kind: str,
    col: int = 1,
) -> go.Scatter:
    # The narrow pane places the networks without latency at their category.
    x: list[Any] = [p.latency_ms if col == 1 else SIDE[0 if not p.is_legal else 1] for p in points]
    line = dict(color="white", width=1) if symbol not in ("x", "circle-open") else None
    return go.Scatter(
        x=x,
        y=[p.fisher_ratio for p in points],
        customdata=[p.index for p in points],
        hovertext=[p.hover for p in points],
        hovertemplate="%{hovertext}<extra></extra>",
        mode="markers",
        marker=dict(
            symbol=symbol,
            color=color,
            size=[sizes[p.index] * (1.3 if symbol == "star" else 1.0) for p in points],
            line=line,
        ),
        name=name,
        xaxis="x" if col == 1 else "x2",
        yaxis="y" if col == 1 else "y2",
        meta=f"nas|{kind}",
    )


def _latency_axis(latencies: Sequence[float | None]) -> dict[str, Any]:
    """The wide pane's latency axis: around the points, never below 0 ms (plotly's own range
    around a single point ran from -0.5 ms)."""
    values = [v for v in latencies if v is not None and math.isfinite(v)]
    if not values:
        return {"xaxis.autorange": True}
    lo, hi = min(values), max(values)
    pad = max(0.08 * (hi - lo), 0.1 * hi)  # room for the markers, even for one point
    return {"xaxis.range": [max(0.0, lo - pad), hi + pad]}


def _sizes(points: Sequence[NasPointInfo]) -> dict[int, float]:
    """Marker diameters: the area grows with the parameters (the front's third objective)."""
    most = max((p.params for p in points), default=1) or 1
    return {p.index: MIN_SIZE + (MAX_SIZE - MIN_SIZE) * math.sqrt(p.params / most) for p in points}


def _details(info: NasFrontInfo) -> list[str]:
    legal = info.num_candidates - info.num_illegal
    counts = (
        f"{plural(info.num_candidates, 'candidate')}: {legal} legal, {info.num_illegal} "
        f"illegal (FP below tau = {info.tau:g} x the original's), {len(info.front)} on the "
        "Pareto front of latency, FP and parameters"
    )
    if info.speedup is not None and info.fastest is not None:
        fastest = info.points[info.fastest].name
        counts += f"; fastest legal: {fastest}, {info.speedup:.2f}x the original's speed"
    tuning = (
        f"{plural(info.num_shapes, 'distinct convolution')} tuned with {info.strategy}, "
        f"{plural(info.budget, 'trial')} each ({info.num_cached} found in the store)"
    )
    if info.is_stopped:
        tuning += "; stopped early: some networks are not timed"
    return [counts, tuning, "marker area: parameters; click a point to open a layer in the editor"]
