"""Which knobs matter: each trial's knob values against its latency, and a per-knob importance.

Knobs are read from ``KnobSpace``: its sketches give labels, kinds and domains. Sketches with the
same knob layout (matmul's three sketches differ only in the sketch's own decisions) are one
family, so trials whose search did not record the sketch (``DesignSpace.sample`` writes bare
values) still land on the right axes.

Importance is the share of the variance of log-latency explained by the knob's value (omega
squared of a one-way ANOVA over the values tried at least twice, bias-corrected so a knob with
many values and few trials does not look important by chance). A rank correlation would need
the values ordered, and neither tile factorisations nor categorical indices have a meaningful
order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer.analysis._table import TrialTable, as_table, freeze, pick_rows
from explorer.core import TrialRecord, TrialRow
from explorer.space import KnobSpace

MIN_RESIDUAL_DF = 5
"""Trials beyond one per value tried that a knob's importance needs before it is estimated."""


@dataclass(frozen=True, slots=True)
class KnobEffect:
    """One knob across the used trials.

    Attributes:
        label, kind: the knob's name ("tile #0") and sampling instruction.
        position: the knob's index within its sketch's decisions.
        value_labels: every value the knob can take or was seen with, sorted (for tiles:
            lexicographically by factors, so neighbours are alike); ``codes`` index into it.
        codes: the knob's value per shipped trial.
        importance: variance of log-latency explained, in [0, 1]; NaN when undefined (the
            knob took one value only, or there are too few trials).
        num_values_seen: distinct values among the used trials.
    """

    label: str
    kind: str
    position: int
    value_labels: tuple[str, ...]
    codes: tuple[int, ...]
    importance: float
    num_values_seen: int


@dataclass(frozen=True, slots=True)
class KnobEffectsInfo:
    """Knob values and latencies of the trials of one knob layout, for a parallel-coordinates
    plot, and each knob's importance.

    Attributes:
        sketches: the sketches sharing the layout shown.
        knobs: knobs that vary, most important first (NaN importances last).
        trial_ids, latency_ms: the shipped trials (at most ``max_lines``, the fastest always
            among them), aligned with every knob's ``codes``.
        num_trials: trials read, re-measurements not counted (``num_remeasured``: a schedule
            timed twice would weigh twice in the importance). ``num_used`` succeeded in this
            layout (importance uses all of them); ``num_failed`` failed in it; ``num_unmapped``
            recorded no decisions that fit the space; ``num_elsewhere`` belong to another layout.
    """

    sketches: tuple[int, ...]
    knobs: tuple[KnobEffect, ...]
    trial_ids: tuple[int, ...]
    latency_ms: tuple[float, ...]
    num_trials: int
    num_used: int
    num_failed: int
    num_unmapped: int
    num_elsewhere: int
    max_lines: int
    num_remeasured: int = 0

    @property
    def num_points(self) -> int:
        """Numbers a plot of this info ships (one per knob and line, plus the latencies)."""
        return len(self.trial_ids) * (len(self.knobs) + 1)


def knob_effects_info(
    records: Iterable[TrialRecord | TrialRow] | TrialTable,
    space: KnobSpace,
    *,
    sketch: int | None = None,
    max_lines: int = 1000,
) -> KnobEffectsInfo:
    """Per knob, the trials' values and latencies, and how much of the latency it explains.

    Args:
        records: trials of ``space``'s workload and target (records, rows or a ``TrialTable``).
        space: the knob space the trials were drawn from.
        sketch: show the layout of this sketch; ``None`` picks the layout with most successes.
        max_lines: the most trials shipped for drawing; the importance uses all of them.

    Example:
        >>> space = KnobSpace.of(workload, target)  # doctest: +SKIP
        >>> info = knob_effects_info(store.trials(workload=workload), space)  # doctest: +SKIP
        >>> [(k.label, round(k.importance, 2)) for k in info.knobs]  # doctest: +SKIP
        [('tile #1', 0.62), ('categorical #0', 0.21), ('tile #0', 0.05), ('tile #2', 0.0)]
    """
    if max_lines < 1:
        raise ValueError(f"max_lines must be at least 1 (got {max_lines})")
    if sketch is not None and not 0 <= sketch < space.num_sketches:
        raise ValueError(f"sketch must be in [0, {space.num_sketches}) (got {sketch})")
    table = as_table(records)
    trial = ~table.is_remeasure
    ok = table.is_ok & trial

    # Step 1. Sketches with one layout form a family; every distinct decision joins one.
    families, members, domain_sets, row_family = _families(space, table)

    # Step 2. The family shown: the sketch asked for, else the one with most successes.
    if sketch is not None:
        fam = next(f for f, group in enumerate(members) if sketch in group)
    else:
        counts = np.bincount(row_family[ok & (row_family >= 0)], minlength=len(members))
        fam = int(np.argmax(counts)) if len(counts) else 0
    in_fam = (row_family == fam) & trial
    used = np.flatnonzero(in_fam & ok)
    latency = table.latency_secs[used]
    log_latency = np.log(latency)
    shown = pick_rows(latency, max_lines)

    # Step 3. Per knob: the value vocabulary, each used trial's code and the importance.
    layout = list(families)[fam]
    knobs = [
        knob
        for p, (label, kind, _) in enumerate(layout)
        if (knob := _effect(p, label, kind, domain_sets[fam][p], table, used, shown, log_latency))
        is not None
    ]
    knobs.sort(key=lambda k: -k.importance if math.isfinite(k.importance) else math.inf)
    return KnobEffectsInfo(
        sketches=tuple(members[fam]) if members else (),
        knobs=tuple(knobs),
        trial_ids=tuple(int(i) for i in table.ids[used[shown]]),
        latency_ms=tuple(float(v) * 1e3 for v in latency[shown]),
        num_trials=table.num_trials,
        num_used=len(used),
        num_failed=int(np.count_nonzero(in_fam & ~ok & ~table.is_inconclusive)),
        num_unmapped=int(np.count_nonzero((row_family < 0) & trial)),
        num_elsewhere=int(np.count_nonzero((row_family >= 0) & (row_family != fam) & trial)),
        max_lines=max_lines,
        num_remeasured=table.num_remeasured,
    )


def _effect(
    p: int,
    label: str,
    kind: str,
    domain: set[Any],
    table: TrialTable,
    used: np.ndarray,
    shown: np.ndarray,
    log_latency: np.ndarray,
) -> KnobEffect | None:
    """The knob at position ``p``: its value vocabulary, each used trial's code and the share
    of the latency it explains; ``None`` for a knob with a single possible value."""
    used_decisions = np.unique(table.decision_ids[used])
    seen = {table.decisions[j].values[p] for j in used_decisions}
    vocab = _sorted({*domain, *seen})
    if len(vocab) < 2 and len(seen) < 2:
        return None  # it says nothing
    code_of = {v: i for i, v in enumerate(vocab)}
    dec_code = np.full(len(table.decisions) + 1, -1, dtype=np.int64)
    for j in used_decisions:
        dec_code[j] = code_of[table.decisions[j].values[p]]
    codes = dec_code[table.decision_ids[used]]
    return KnobEffect(
        label=label,
        kind=kind,
        position=p,
        value_labels=tuple(_value_label(v) for v in vocab),
        codes=tuple(int(c) for c in codes[shown]),
        importance=omega_squared(codes, log_latency),
        num_values_seen=len(seen),
    )


Layout = tuple[tuple[str, str, str], ...]
"""A sketch's knobs, as (label, kind, attributes as JSON): sketches with one layout form a
family (a packed matmul sketch's "tile #0" splits rows in 3, MetaSchedule's in 4: two)."""


def _families(
    space: KnobSpace, table: TrialTable
) -> tuple[dict[Layout, list[int]], list[list[int]], list[list[set[Any]]], np.ndarray]:
    """The sketches' families (layout -> sketches), their members, per family and knob position
    the values its domains allow, and each row's family (-1: a decision of no family)."""
    layouts = [
        tuple((d.knob.label, d.knob.kind, json.dumps(d.knob.attrs)) for d in space.domains[s])
        for s in range(space.num_sketches)
    ]
    families: dict[Layout, list[int]] = {}
    for s, layout in enumerate(layouts):
        families.setdefault(layout, []).append(s)
    members = list(families.values())
    family_of = {s: f for f, group in enumerate(members) for s in group}
    domain_sets = [
        [{v for s in group for v in _keys(space.domains[s][p].values)} for p in range(len(lay))]
        for group, lay in zip(members, families, strict=True)
    ]
    dec_family = np.array(
        [_family(d.sketch, d.values, layouts, family_of, domain_sets) for d in table.decisions]
        + [-1],  # index -1 (no decisions) lands here
        dtype=np.int64,
    )
    return families, members, domain_sets, dec_family[table.decision_ids]


def omega_squared(groups: np.ndarray, y: np.ndarray) -> float:
    """Share of the variance of ``y`` explained by the grouping, bias-corrected; in [0, 1].

    One-way ANOVA's omega squared over the groups with at least two members: a value tried
    once carries no within-group information and only inflates the between-group sum (a tile
    knob with 80 values over 100 trials would otherwise look important by chance). NaN with
    fewer than two such groups or fewer than ``MIN_RESIDUAL_DF`` residual degrees of freedom
    (with a dozen trials the estimate is noise).
    """
    counts = np.bincount(groups) if len(y) else np.zeros(0, dtype=np.int64)
    keep = counts[groups] >= 2 if len(y) else np.zeros(0, dtype=bool)
    groups, y = groups[keep], y[keep]
    counts = np.where(counts >= 2, counts, 0)
    n = len(y)
    k = int(np.count_nonzero(counts))
    if k < 2 or n - k < MIN_RESIDUAL_DF:
        return math.nan
    mean = float(y.mean())
    sst = float(((y - mean) ** 2).sum())
    if sst <= 0:
        return math.nan
    sums = np.bincount(groups, weights=y, minlength=len(counts))
    present = counts > 0
    ssb = max(float((sums[present] ** 2 / counts[present]).sum()) - n * mean**2, 0.0)
    msw = max(sst - ssb, 0.0) / (n - k)
    return float(min(max((ssb - (k - 1) * msw) / (sst + msw), 0.0), 1.0))


def _keys(values: Iterable[object]) -> list[Hashable]:
    return [freeze(v) for v in values]


def _family(
    sketch: int | None,
    values: tuple[Hashable, ...],
    layouts: list[Layout],
    family_of: dict[int, int],
    domain_sets: list[list[set[Hashable]]],
) -> int:
    if sketch is not None and 0 <= sketch < len(layouts):
        return family_of[sketch] if len(values) == len(layouts[sketch]) else -1
    fits = [f for f, sets in enumerate(domain_sets) if len(sets) == len(values)]
    for f in fits:
        if all(v in sets for v, sets in zip(values, domain_sets[f], strict=True)):
            return f
    return fits[0] if fits else -1


def _sorted(values: set[Hashable]) -> list[Hashable]:
    try:
        return sorted(values, key=_order)
    except TypeError:  # values of mixed shapes: any stable order will do
        return sorted(values, key=repr)


def _order(value: Hashable) -> tuple[bool, Any]:
    return (not isinstance(value, int), value)


def _value_label(value: Hashable) -> str:
    if isinstance(value, tuple):
        return "×".join(_value_label(v) for v in value)
    return str(value)
