"""Feature vectors for the learned cost models.

Two kinds, both one fixed-width row of float64 per candidate:

* ``"perstore"``: MetaSchedule's ``PerStoreFeature`` (164 values per store statement: loop
  structure, arithmetic, buffer access patterns, arithmetic intensity, allocations). A
  program has one row per store, so the rows are pooled by sum and by max (the sum is what the
  pack-sum model predicts; the max keeps the dominant statement visible), then squashed with
  a signed ``log1p`` (docs/tvm-notes.md, section 5): 328 values. It describes the
  *program*, so it transfers between workloads (AutoTVM's "itervar"/"curve" role).
* ``"knob"``: the decisions of a knob-space point, flattened (AutoTVM's "knob" features): the
  sketch index, then ``log2`` of every tile factor and the raw index of every categorical or
  compute-location decision. It only means something within one workload's space, and it is
  cheap enough for simulated annealing to score 128 points per step (``KnobTable``).

Extracting ``perstore`` replays the trace and runs TVM's extractor (about 3 ms a candidate),
so rows are cached by trace (``explorer.measure.trace_key``): strategies score the same
candidates again and again. Knob rows are cheaper to compute than a cache key and are not cached.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from explorer import _tvm
from explorer.core import Candidate, trace_key
from explorer.space import DesignSpace, KnobSpace
from explorer.types import JSON

log = logging.getLogger(__name__)

FEATURE_KINDS = ("perstore", "knob")
PERSTORE_STORE_DIM = 164  # 57 compute + 5 buffers x 18 + 10 intensity + 4 alloc + 3 outer
PERSTORE_DIM = 2 * PERSTORE_STORE_DIM  # sum- and max-pooled


def pool_per_store(per_store: np.ndarray) -> np.ndarray:
    """Sum- and max-pool a ``(num_stores, 164)`` block to one ``signed log1p`` row of 328."""
    if per_store.size == 0:  # a program with no store (nothing to compute) has no features
        return np.zeros(PERSTORE_DIM)
    pooled = np.concatenate([per_store.sum(axis=0), per_store.max(axis=0)]).astype(np.float64)
    return np.sign(pooled) * np.log1p(np.abs(pooled))


def encode_value(value: JSON) -> list[float]:
    """The knob-feature columns of one decision (a tile list, or an index)."""
    if isinstance(value, (list, tuple)):
        # Tile factors span 1..extent multiplicatively; log2 makes a split at 8 vs 16 as far
        # apart as 1 vs 2, which is how their effect on cache behaviour scales.
        return [math.log2(max(float(f), 1.0)) for f in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    return [0.0]  # a decision kind we cannot read numerically (none in TVM 0.27's CPU spaces)


def knob_row(sketch: int, values: Sequence[JSON]) -> np.ndarray:
    """One knob-feature row: the sketch index, then every decision's columns in order."""
    out = [float(sketch)]
    for v in values:
        out.extend(encode_value(v))
    return np.asarray(out, dtype=np.float64)


def pad_rows(rows: Sequence[np.ndarray], width: int | None = None) -> np.ndarray:
    """Stack rows of possibly different widths, zero-padded (or cut) to ``width``."""
    if width is None:
        width = max((len(r) for r in rows), default=1)
    out = np.zeros((len(rows), max(width, 1)), dtype=np.float64)
    for i, r in enumerate(rows):
        n = min(len(r), width)
        out[i, :n] = r[:n]
    return out


def fit_width(x: np.ndarray, width: int) -> np.ndarray:
    """Pad a ``(n, d)`` matrix with zero columns, or cut it, to exactly ``width`` columns."""
    if x.shape[1] == width:
        return x
    if x.shape[1] > width:
        return x[:, :width]
    return np.pad(x, ((0, 0), (0, width - x.shape[1])))


def _knob_inputs(candidate: Candidate) -> tuple[int, Sequence[JSON]]:
    d = candidate.decisions
    if isinstance(d, dict) and "values" in d:  # from KnobSpace.materialize
        sketch = d.get("sketch")  # None: an off-space schedule (evolutionary's mutations)
        return (int(sketch) if sketch is not None else -1), d["values"]
    if isinstance(d, (list, tuple)):  # from DesignSpace.sample: decisions, sketch unknown
        return -1, d
    # Anything else (a manual schedule): the decisions recorded in the trace itself.
    trace = candidate.trace
    if isinstance(trace, (list, tuple)) and len(trace) == 2 and isinstance(trace[1], list):
        return -1, [dec for _, dec in sorted(trace[1], key=lambda p: p[0])]
    return -1, []


class FeatureExtractor:
    """Candidates to feature rows, one kind, with an LRU cache for the expensive kind.

    Args:
        kind: ``"perstore"`` or ``"knob"``.
        cache_size: rows kept (per extractor) for ``perstore``.

    A trace that no longer replays (a stale record) gets an all-zero row instead of an error:
    the model sees it as "nothing known", and a batch is never lost to one bad record.
    """

    def __init__(self, kind: str, *, cache_size: int = 1 << 16):
        if kind not in FEATURE_KINDS:
            raise ValueError(f"features must be one of {FEATURE_KINDS} (got {kind!r})")
        self.kind = kind
        self.cache_size = cache_size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __call__(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """A ``(len(candidates), width)`` float64 matrix (knob rows zero-padded to the widest)."""
        if self.kind == "knob":
            return pad_rows([knob_row(*_knob_inputs(c)) for c in candidates])
        return self._perstore(candidates)

    def _perstore(self, candidates: Sequence[Candidate]) -> np.ndarray:
        out = np.zeros((len(candidates), PERSTORE_DIM))
        # The same trace text can schedule two different shapes: key by workload and target too.
        keys = [f"{c.workload.key()}|{c.target.key()}|{trace_key(c.trace)}" for c in candidates]
        todo: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            row = self._cache.get(key)
            if row is None:
                todo.setdefault(key, []).append(i)
            else:
                self._cache.move_to_end(key)
                out[i] = row
        # One TVM extraction call per (workload, target): they share a TuneContext.
        groups: dict[tuple[str, str], list[str]] = {}
        for key, idx in todo.items():
            c = candidates[idx[0]]
            groups.setdefault((c.workload.key(), c.target.key()), []).append(key)
        for keys_of_group in groups.values():
            first = candidates[todo[keys_of_group[0]][0]]
            rows = _extract_perstore(first, [candidates[todo[k][0]] for k in keys_of_group])
            for key, row in zip(keys_of_group, rows, strict=True):
                out[todo[key]] = row
                self._cache[key] = row
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out


def _extract_perstore(first: Candidate, candidates: Sequence[Candidate]) -> list[np.ndarray]:
    ms = _tvm.ms
    context = DesignSpace.of(first.workload, first.target).tune_context
    mod = first.workload.mod()
    arg_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    measure_cands, ok = [], []
    for c in candidates:
        sch = _tvm.Schedule(mod)
        try:
            _tvm.apply_trace_json(c.trace, sch)
        except (_tvm.ScheduleError, ValueError, RuntimeError) as e:
            log.debug("perstore features: trace of %s does not replay: %s", c.workload, e)
            ok.append(False)
            continue
        measure_cands.append(ms.MeasureCandidate(sch, arg_info))
        ok.append(True)
    extracted = iter(
        ms.feature_extractor.PerStoreFeature().extract_from(context, measure_cands)
        if measure_cands
        else []
    )
    return [
        pool_per_store(next(extracted).numpy()) if good else np.zeros(PERSTORE_DIM) for good in ok
    ]


class KnobTable:
    """Knob-feature rows of ``KnobSpace`` points, straight from their indices.

    Simulated annealing scores 128 points per step for hundreds of steps; materialising each
    point (a trace replay, ~4 ms) would take minutes, while a table lookup per knob takes
    microseconds. ``rows`` gives exactly ``knob_row(sketch, space.decisions(point))``.

    Points are given as arrays: ``sketches`` of shape ``(P,)`` and ``indices`` of shape
    ``(P, max_knobs)``, each row's indices for its sketch's knobs first (the rest ignored).
    """

    def __init__(self, space: KnobSpace):
        self.space = space
        self._segments: list[list[np.ndarray]] = []  # sketch -> knob -> (domain size, columns)
        widths = []
        for sketch in range(space.num_sketches):
            segs = [
                np.array([encode_value(v) for v in d.values], dtype=np.float64)
                for d in space.domains[sketch]
            ]
            self._segments.append(segs)
            widths.append(1 + sum(s.shape[1] for s in segs))
        self.width = max(widths)

    def rows(self, sketches: np.ndarray, indices: np.ndarray) -> np.ndarray:
        out = np.zeros((len(sketches), self.width))
        for sketch in np.unique(sketches):
            sel = np.nonzero(sketches == sketch)[0]
            out[sel, 0] = float(sketch)
            col = 1
            for k, seg in enumerate(self._segments[int(sketch)]):
                out[sel, col : col + seg.shape[1]] = seg[indices[sel, k]]
                col += seg.shape[1]
        return out
