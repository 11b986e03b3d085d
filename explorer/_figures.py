"""What every figure of ``explorer.plots`` and the NAS plot shares: the header layout, wrapped
subtitles, updates in place, click wiring and colours. Needs plotly."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.colors import DEFAULT_PLOTLY_COLORS, unlabel_rgb

HEADER: dict[str, Any] = dict(
    # The title and its subtitle sit in the top margin, anchored to the figure's top edge;
    # the toolbar stands vertically on the right, off the subtitle it used to cover.
    title=dict(yref="container", y=1.0, yanchor="top", pad=dict(t=10), x=0.0, xanchor="left"),
    modebar=dict(orientation="v"),
)
"""The layout every dashboard figure starts from (with ``heading`` for its text)."""

WRAP = 100  # characters per subtitle line: plotly never wraps a title by itself


def heading(title: str, details: Sequence[str], *, extra: int = 0) -> dict[str, Any]:
    """A short title, the details wrapped below it as its subtitle, and a top margin that
    holds both (``extra``: what else sits above the plot, e.g. subplot titles)."""
    lines = [line for d in details if d for line in textwrap.wrap(d, WRAP)]
    return {
        "title.text": title,
        "title.subtitle.text": "<br>".join(lines),
        "margin.t": 56 + 17 * len(lines) + extra,
    }


def sync(
    fig: go.Figure,
    traces: Sequence[Any],
    layout: dict[str, Any],
    *,
    empty: str | None,
) -> None:
    """Make ``fig`` draw ``traces``: in place when the same traces exist, else replaced."""
    same = len(fig.data) == len(traces) and all(
        old.type == new.type and old.meta == new.meta
        for old, new in zip(fig.data, traces, strict=True)
    )
    annotations = [a for a in fig.layout.annotations if a.name != "empty"]
    if empty:
        annotations.append(
            go.layout.Annotation(
                text=empty,
                name="empty",
                showarrow=False,
                xref="paper",
                yref="paper",
                x=0.5,
                y=0.5,
                font=dict(size=14, color="gray"),
            )
        )
    if not same:
        # Structure changed: replacing is simpler than reconciling, and rare (a new group).
        fig.data = ()
        fig.add_traces(list(traces))
    with fig.batch_update():
        if same:
            for old, new in zip(fig.data, traces, strict=True):
                props = new.to_plotly_json()
                props.pop("type", None)
                props.pop("uid", None)
                # overwrite: a merge would keep stale entries of shrinking arrays of objects
                # (parcoords dimensions).
                old.update(props, overwrite=True)
        fig.layout.annotations = annotations
        fig.update_layout(layout)


def on_point_click(fig: go.Figure, prefix: str, callback: Callable[[Any, Any, Any], None]) -> None:
    """Register ``callback(trace, points, state)`` on every trace whose ``meta`` starts with
    ``prefix`` (again after each update that replaced the traces: call it then)."""
    for trace in fig.data:
        if isinstance(trace.meta, str) and trace.meta.startswith(prefix):
            trace.on_click(callback, append=False)


def palette(index: int) -> str:
    color: str = DEFAULT_PLOTLY_COLORS[index % len(DEFAULT_PLOTLY_COLORS)]
    return color


def rgba(color: str, alpha: float) -> str:
    r, g, b = unlabel_rgb(color)
    return f"rgba({int(r)}, {int(g)}, {int(b)}, {alpha})"


def nan_to_none(values: Any) -> list[float | None]:
    # JSON has no NaN; None is a gap in a plotly line.
    return [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]


def log_axis(axis: str, values: Sequence[float]) -> dict[str, Any]:
    """A log axis over ``values``, padded so no point sits on its edge, with explicit, evenly
    spread tick labels (plotly's own choice labelled every digit of a decade, on top of each
    other, and within one decade showed a single tiny label)."""
    if not values:
        return {f"{axis}.autorange": True, f"{axis}.tickmode": "auto"}
    lo, hi = math.log10(min(values)), math.log10(max(values))
    pad = max(0.08 * (hi - lo), 0.15)
    lo, hi = lo - pad, hi + pad
    ticks = log_ticks(lo, hi)
    return {
        f"{axis}.range": [lo, hi],
        f"{axis}.tickmode": "array",
        f"{axis}.tickvals": ticks,
        f"{axis}.ticktext": [f"{v:.4g}" for v in ticks],
    }


def log_ticks(lo: float, hi: float, most: int = 7) -> list[float]:
    """At most ``most`` round values between 10**lo and 10**hi, roughly evenly spaced on a log
    scale: linear steps (1, 2 or 5 x 10^k) within most of a decade (the axis is nearly linear
    there), 1-2-5 (then 1-3) per decade up to three decades, powers of ten beyond."""
    span = hi - lo
    if span > 3:
        every = max(1, math.ceil(span / most))
        return [10.0**e for e in range(math.ceil(lo), math.floor(hi) + 1) if e % every == 0]
    if span > 0.8:
        out = [
            m * 10.0**e
            for e in range(math.floor(lo), math.ceil(hi) + 1)
            for m in ((1, 2, 5) if span <= 2.2 else (1, 3))
        ]
        return [v for v in out if lo <= math.log10(v) <= hi]
    a, b = 10.0**lo, 10.0**hi
    for k in range(math.floor(math.log10(b - a)) - 2, math.ceil(math.log10(b - a)) + 1):
        for m in (1, 2, 5):
            step = m * 10.0**k
            first = math.ceil(a / step) * step
            count = math.floor((b - first) / step) + 1
            if count <= most:
                return [round(first + i * step, 12) for i in range(count)]
    return [a, b]  # unreachable for finite values: a decade always has a step that fits
