"""What the NAS panel and its Pareto plot show of a ``NasResult``: one row per network.

Each network of the search (the original first, then the candidates) becomes a ``NasPointInfo``
in display units (milliseconds, the Fisher Potential as a ratio to the original's), with a short
summary of what was transformed and the layer a click on it opens in the schedule editor
(``LayerFocus``): the slowest transformed layer, because that is where scheduling pays.

The search's front has three objectives (latency, Fisher Potential, parameters), so some of its
networks are beaten on the plot's two axes and stay on it only by having fewer parameters.
``front_line`` is the part a latency-vs-FP plot can draw as a staircase: the front's networks no
other beats on latency and FP alone, fastest first.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from explorer.nas import format_ratio, tuned_latency

if TYPE_CHECKING:
    from explorer.nas import Conv, ConvTuning, Layer, NasPoint, NasResult


@dataclass(frozen=True, slots=True)
class LayerFocus:
    """The layer of a network that a click opens, and which of its convolutions the editor gets.

    Attributes:
        layer: The layer's name (``"layer1.0.conv1"``).
        steps: Its transformations (``"group(4)"``; ``"dense"`` when it has none).
        conv: The convolution of the layer to open: its slowest tuned piece, else its largest.
        run_id: The tuning run of ``conv`` (``None``: not tuned, opened unscheduled). For a
            network without a latency it tuned the same shape for another network, or earlier.
        latency_ms: The whole layer's tuned latency (every piece; ``None``: not all tuned).
        reason: Why this layer, in words (``"its slowest transformed layer"``).
    """

    layer: str
    steps: str
    conv: Conv
    run_id: int | None
    latency_ms: float | None
    reason: str


@dataclass(frozen=True, slots=True)
class NasPointInfo:
    """One network of the search, as the table and the plot show it.

    Attributes:
        index: Its position in ``NasResult.points`` (0: the original).
        name: ``"original"`` or ``"candidate 3"``.
        changes: What was transformed, summarised (``"group(4) x2 (2 of 8 blocks)"``).
        latency_ms: The sum of its tuned convolutions (``None``: illegal, or not all tuned).
        fisher_ratio: Its Fisher Potential over the original's.
        macs: Multiply-accumulates of one inference.
        params: Parameters.
        is_legal: ``fisher_ratio >= tau`` (the original always is).
        is_on_front: On the Pareto front of latency, Fisher Potential and parameters.
        focus: What a click on it opens.
        hover: The plot's hover text (HTML: ``<br>`` line breaks, names escaped).
    """

    index: int
    name: str
    changes: str
    latency_ms: float | None
    fisher_ratio: float
    macs: int
    params: int
    is_legal: bool
    is_on_front: bool
    focus: LayerFocus
    hover: str

    @property
    def is_original(self) -> bool:
        return self.index == 0

    @property
    def is_timed(self) -> bool:
        return self.latency_ms is not None


@dataclass(frozen=True, slots=True)
class NasFrontInfo:
    """A NAS search's networks and front, ready to tabulate and plot.

    Attributes:
        network: The original network's name.
        tau: The legality threshold on the Fisher Potential ratio.
        strategy: The strategy that tuned every shape.
        budget: Trials per distinct shape.
        points: Every network, the original first.
        front: ``points`` indexes of the front, fastest first.
        front_line: Those of them no other beats on latency and FP alone, fastest first.
        speedup: Original latency over the fastest legal network's (``None``: not both timed).
        fastest: ``points`` index of the fastest legal network (``None``: none timed).
        num_shapes: Distinct convolutions tuned or found in the store.
        num_shapes_wanted: Distinct convolutions of the original and the legal candidates:
            what the search meant to tune (more than ``num_shapes`` when it was stopped).
        num_cached: Of those tuned, how many an earlier run had tuned.
        num_refusals: Block plans drawn that did not fit their block (drawn again).
        fisher_secs: Wall time of the Fisher Potentials (JAX compilation included).
        tuning_secs: Wall time of the tuning.
        is_stopped: The search was stopped before every shape was tuned.
    """

    network: str
    tau: float
    strategy: str
    budget: int
    points: tuple[NasPointInfo, ...]
    front: tuple[int, ...]
    front_line: tuple[int, ...]
    speedup: float | None
    fastest: int | None
    num_shapes: int
    num_shapes_wanted: int
    num_cached: int
    num_refusals: int
    fisher_secs: float
    tuning_secs: float
    is_stopped: bool

    @property
    def num_candidates(self) -> int:
        return len(self.points) - 1

    @property
    def num_illegal(self) -> int:
        return sum(not p.is_legal for p in self.points)

    @property
    def num_untimed(self) -> int:
        """Legal networks without a latency (a stopped search, or a shape with no success)."""
        return sum(p.is_legal and not p.is_timed for p in self.points)


def nas_front_info(result: NasResult) -> NasFrontInfo:
    """The table's and the plot's view of ``result``.

    Example (skipped: a result comes from ``nas_search``, which needs JAX and TVM and takes
    seconds):
        >>> info = nas_front_info(result)  # doctest: +SKIP
        >>> [(p.name, p.latency_ms, p.is_on_front) for p in info.points]  # doctest: +SKIP
        [('original', 1.2, False), ('candidate 1', 0.4, True), ('candidate 2', None, False)]
    """
    tunings = {t.conv: t for t in result.tunings}
    points = tuple(_point_info(i, p, tunings) for i, p in enumerate(result.points))
    front = sorted((p for p in points if p.is_on_front), key=lambda p: p.latency_ms or math.inf)
    fastest = result.fastest_legal
    return NasFrontInfo(
        network=result.original.network.name,
        tau=result.sample.tau,
        strategy=result.strategy,
        budget=result.budget,
        points=points,
        front=tuple(p.index for p in front),
        front_line=tuple(p.index for p in _plane_front(front)),
        speedup=result.speedup,
        fastest=None if fastest is None else result.points.index(fastest),
        num_shapes=len(result.tunings),
        # What nas_search tunes: every convolution of the original and the legal candidates.
        num_shapes_wanted=len(
            {c for p in result.points if p.is_legal for c in p.network.conv_counts()}
        ),
        num_cached=sum(t.is_cached for t in result.tunings),
        num_refusals=len(result.sample.refusals),
        fisher_secs=result.fisher_secs,
        tuning_secs=result.tuning_secs,
        is_stopped=result.stopped,
    )


def plan_summary(point: NasPoint) -> str:
    """What a point's plan changed, one label per changed block, repeats counted.

    Example (skipped: a point comes from ``nas_search``):
        >>> plan_summary(point)  # doctest: +SKIP
        'group(4) x2, bottleneck(2) + group(2) (3 of 8 blocks)'
    """
    if point.candidate is None:
        return "original"
    plans = point.candidate.plans
    labels = []
    for plan in plans:
        # A block's convolutions mostly share their steps: list each step once, in order.
        steps = dict.fromkeys(step.label() for seq in plan for step in seq)
        if steps:
            labels.append(" + ".join(steps))
    if not labels:
        return "unchanged (every block kept)"
    counts: dict[str, int] = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    parts = [f"{label} x{n}" if n > 1 else label for label, n in counts.items()]
    return f"{', '.join(parts)} ({len(labels)} of {len(plans)} blocks)"


def layer_focus(point: NasPoint, tunings: Mapping[Conv, ConvTuning]) -> LayerFocus:
    """The layer of ``point``'s network to open: its slowest transformed layer (for a network
    without transformed layers, the original, its slowest layer).

    A network without a latency (illegal, so never tuned; or legal but not timed) has no
    slowest layer of its own: the slowest of those whose shapes happen to be tuned (for another
    network, or by an earlier run) opens, said so in ``reason``; with none tuned, its first
    transformed layer (the original: its largest).
    """
    layers = point.network.layers()
    changed = [layer for layer in layers if layer.history]
    pool = changed or layers
    kind = "transformed layer" if changed else "layer"
    timed = {
        i: s for i, layer in enumerate(pool) if (s := tuned_latency(layer, tunings)) is not None
    }
    if timed:  # the first of equally slow layers
        layer = pool[max(timed, key=timed.__getitem__)]
        whole = point.latency_secs is not None
        reason = f"its slowest {kind}" + ("" if whole else " with a tuned shape")
    elif changed:
        layer = changed[0]
        reason = "its first transformed layer"
    else:
        layer = max(layers, key=lambda la: la.macs)
        reason = "its largest layer"
    conv = _focus_conv(layer, tunings)
    tuning = tunings.get(conv)
    secs = tuned_latency(layer, tunings)
    return LayerFocus(
        layer=layer.name,
        steps=" > ".join(layer.history) or "dense",
        conv=conv,
        run_id=None if tuning is None else tuning.run_id,
        latency_ms=None if secs is None else secs * 1e3,
        reason=reason,
    )


def format_count(n: int) -> str:
    """A count with a unit prefix, for MACs and parameters.

    Example:
        >>> format_count(35_046_656), format_count(7_200), format_count(512)
        ('35.0 M', '7.2 k', '512')
    """
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return str(n)


def format_ms(ms: float | None) -> str:
    """Milliseconds with 4 significant digits, or ``"not timed"``."""
    return "not timed" if ms is None else f"{ms:.4g} ms"


# -- helpers ----------------------------------------------------------------------------------
def _point_info(index: int, point: NasPoint, tunings: Mapping[Conv, ConvTuning]) -> NasPointInfo:
    info = NasPointInfo(
        index=index,
        name=point.name,
        changes=plan_summary(point),
        latency_ms=None if point.latency_secs is None else point.latency_secs * 1e3,
        fisher_ratio=point.fisher_ratio,
        macs=point.macs,
        params=point.params,
        is_legal=point.is_legal,
        is_on_front=point.is_on_front,
        focus=layer_focus(point, tunings),
        hover="",
    )
    return replace(info, hover=_hover(info))


def _hover(p: NasPointInfo) -> str:
    verdict = "legal" if p.is_legal else "illegal"
    front = " (on the Pareto front)" if p.is_on_front else ""
    if p.is_timed:
        latency = format_ms(p.latency_ms)
    else:  # an illegal network is never tuned; a legal one may not be timed (a stop)
        latency = "not timed" if p.is_legal else "not tuned"
    lines = [
        f"<b>{html.escape(p.name)}</b>{front}",
        f"{latency}, FP x{format_ratio(p.fisher_ratio)} ({verdict})",
        f"{format_count(p.macs)} MACs, {format_count(p.params)} params",
        html.escape(p.changes),
        *_click_lines(p),
    ]
    return "<br>".join(lines)


def _click_lines(p: NasPointInfo) -> list[str]:
    """What a click on ``p`` opens, and whether that layer was tuned for this network."""
    focus = p.focus
    where = (
        f"click: {html.escape(focus.layer)} ({html.escape(focus.steps)}), "
        f"{html.escape(focus.reason)}"
    )
    if p.is_timed:
        return [where]
    if focus.run_id is None:
        return [where, "not tuned for this network: a click opens it unscheduled"]
    if p.is_legal:
        return [where, f"this network was not timed; this shape was tuned in run {focus.run_id}"]
    return [where, f"not tuned for this network; the same shape was tuned in run {focus.run_id}"]


def _plane_front(front: list[NasPointInfo]) -> list[NasPointInfo]:
    """The points of ``front`` (fastest first) that none beats on latency and FP together."""

    def beats(q: NasPointInfo, p: NasPointInfo) -> bool:
        mine = (p.latency_ms or math.inf, -p.fisher_ratio)
        theirs = (q.latency_ms or math.inf, -q.fisher_ratio)
        return theirs != mine and all(t <= m for t, m in zip(theirs, mine, strict=True))

    return [p for p in front if not any(beats(q, p) for q in front)]


def _focus_conv(layer: Layer, tunings: Mapping[Conv, ConvTuning]) -> Conv:
    def cost(item: tuple[Conv, int]) -> tuple[float, int]:
        conv, count = item
        tuning = tunings.get(conv)
        secs = tuning.latency_secs if tuning is not None else None
        return (count * secs if secs is not None else -1.0, count * conv.macs)

    return max(layer.conv_counts().items(), key=cost)[0]
