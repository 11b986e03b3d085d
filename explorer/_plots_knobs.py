"""The knob-effects plot, over ``explorer.analysis.KnobEffectsInfo``: parallel coordinates of
the knobs (the most important first) and the latency, beside a bar of each knob's importance.
Needs plotly; ``explorer.plots`` re-exports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.colors import DEFAULT_PLOTLY_COLORS

from explorer._figures import HEADER, heading, sync
from explorer.analysis import KnobEffectsInfo
from explorer.text import plural

MAX_PARCOORDS_KNOBS = 8
"""Knobs drawn as parallel axes (the most important); more make the plot unreadable."""

MAX_TICKS = 8
"""Most tick labels per parallel axis: an axis is ~300 px tall, tile labels are ~12 px high."""


def make_knob_effects_figure(info: KnobEffectsInfo) -> go.Figure:
    """Parallel coordinates of the knobs (most important first) and latency, coloured by
    latency, next to a bar chart of each knob's importance."""
    fig = go.Figure()
    fig.update_layout(
        height=440,
        margin=dict(l=60, r=40, b=40),
        **HEADER,
        xaxis=dict(domain=[0.8, 1.0], range=[0, 1], title=dict(text="variance explained")),
        yaxis=dict(anchor="x", autorange="reversed"),
        showlegend=False,
    )
    update_knob_effects_figure(fig, info)
    return fig


def update_knob_effects_figure(fig: go.Figure, info: KnobEffectsInfo) -> None:
    knobs = info.knobs[:MAX_PARCOORDS_KNOBS]
    dims = [
        dict(
            label=f"{k.label} ({_share(k.importance)})",
            values=k.codes,
            range=[0, max(len(k.value_labels) - 1, 1)],
            **_ticks(k.codes, k.value_labels),
        )
        for k in knobs
    ]
    dims.append(dict(label="latency (ms)", values=info.latency_ms))
    traces: list[Any] = [
        go.Parcoords(
            dimensions=dims,
            line=dict(
                color=info.latency_ms,
                colorscale="Viridis",
                reversescale=True,  # fast trials bright
                showscale=True,
                colorbar=dict(title=dict(text="ms"), x=0.6, thickness=12),
            ),
            # Its axis names are drawn above its top: room for them below the subtitle.
            domain=dict(x=[0.0, 0.56], y=[0.0, 0.88]),
            meta="knobs|parcoords",
        ),
        go.Bar(
            x=[0.0 if math.isnan(k.importance) else k.importance for k in info.knobs],
            y=[k.label for k in info.knobs],
            text=[_share(k.importance) for k in info.knobs],
            orientation="h",
            marker=dict(color=DEFAULT_PLOTLY_COLORS[0]),
            hovertemplate="%{y}: %{text} of the log-latency variance<extra></extra>",
            meta="knobs|importance",
        ),
    ]
    notes = [f"{plural(info.num_used, 'successful trial')}"]
    if len(info.trial_ids) < info.num_used:
        notes[0] += f" (drawing {len(info.trial_ids)})"
    left_out = [
        f"{n} {why}"
        for n, why in (
            (info.num_failed, "failed"),
            (info.num_elsewhere, "of other sketches"),
            (info.num_unmapped, "without knob decisions"),
        )
        if n
    ]
    if left_out:
        notes.append(f"left out: {', '.join(left_out)}")
    sync(
        fig,
        traces,
        heading("Knob effects", ["; ".join(notes)]),
        empty="No successful trial with knob decisions yet" if not info.num_used else None,
    )


def _share(importance: float) -> str:
    return "n/a" if math.isnan(importance) else f"{importance:.0%}"


def _ticks(codes: Sequence[int], labels: Sequence[str]) -> dict[str, Any]:
    """At most ``MAX_TICKS`` labels per axis, at least 1/(MAX_TICKS - 1) of the axis apart.

    Codes index the whole vocabulary (the axis spans all of it), so neighbouring values tried
    are often adjacent codes: labelling every value tried drew labels on top of each other.
    """
    present = sorted(set(codes))
    top = max(len(labels) - 1, 1)
    gap = top / (MAX_TICKS - 1)
    kept: list[int] = []
    for code in present:
        if not kept or code - kept[-1] >= gap - 1e-9:
            kept.append(code)
    return {"tickvals": kept, "ticktext": [labels[c] for c in kept]}
