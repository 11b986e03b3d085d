"""What the NAS panel writes: its summary sentence and its table of networks (escaped HTML),
from ``explorer.analysis.nas_front_info``."""

from __future__ import annotations

import html

from explorer.analysis import NasFrontInfo, NasPointInfo, format_count, format_ms
from explorer.nas import format_ratio


def summary(info: NasFrontInfo, stopped: bool) -> str:
    legal = info.num_candidates - info.num_illegal  # candidates: the original is apart
    shapes = f"{info.num_shapes} distinct convolutions"
    if info.num_shapes < info.num_shapes_wanted:
        shapes = f"{info.num_shapes} of {info.num_shapes_wanted} distinct convolutions tuned"
        shapes += " before the stop" if stopped else ""
    text = (
        f"{'Stopped' if stopped else 'Done'}: {info.num_candidates} candidates, {legal} legal; "
        f"{shapes} ({info.num_cached} found in the store); "
        f"Fisher Potentials {info.fisher_secs:.1f} s, tuning {info.tuning_secs:.1f} s."
    )
    if info.fastest is not None and info.speedup is not None:
        fastest = info.points[info.fastest]
        if fastest.is_original:
            text += " No legal candidate beat the original."
        else:
            text += f" Fastest legal: {fastest.name}, {info.speedup:.2f}x the original's speed."
    untimed = [p for p in info.points if p.is_legal and not p.is_timed]
    if untimed:
        n = sum(not p.is_original for p in untimed)
        who = [f"{n} legal candidate{'s' * (n != 1)}"] if n else []
        if untimed[0].is_original:
            who.insert(0, "the original")
        text += f" Not timed: {' and '.join(who)}."
    return text


_COLUMNS = (
    "network",
    "transformations",
    "FP ratio",
    "legal",
    "MACs",
    "params",
    "tuned latency",
    "on front",
)


def table(info: NasFrontInfo) -> str:
    """The HTML table of the networks (escaped text), the front's rows in bold, the illegal
    ones greyed."""
    head = "".join(f"<th style='{_CELL}text-align:left'>{c}</th>" for c in _COLUMNS)
    rows = [_row(p) for p in info.points]
    return (
        "<table class='se-nas-rows' style='border-collapse:collapse;font-size:12px'>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


_CELL = "padding:2px 12px 2px 0;border-bottom:1px solid #eee;"
_NOWRAP = "white-space:nowrap;"  # "983.4 k" stays on one line on a narrow page
_NUMBERS = {_COLUMNS.index(c) for c in ("FP ratio", "MACs", "params", "tuned latency")}


def _row(p: NasPointInfo) -> str:
    cells = [
        p.name,
        p.changes,
        format_ratio(p.fisher_ratio),
        "yes" if p.is_legal else "no",
        format_count(p.macs),
        format_count(p.params),
        format_ms(p.latency_ms) if p.is_legal else "not tuned",
        "yes" if p.is_on_front else "",
    ]
    style = "font-weight:600;" if p.is_on_front else ("color:#999;" if not p.is_legal else "")
    tds = "".join(
        f"<td style='{_CELL}{_NOWRAP if k in _NUMBERS else ''}'>{html.escape(c)}</td>"
        for k, c in enumerate(cells)
    )
    return f"<tr class='se-nas-row' data-index='{p.index}' style='{style}'>{tds}</tr>"
