"""A learned value function over *partial* schedules (Steiner et al., MLSys 2021).

The paper casts scheduling as a deterministic MDP: the state is a partial
schedule, an action fixes the next choice, and ``V(s)`` is the best performance reachable from
``s``. A model of ``V`` lets a search decide greedily, one choice at a time, with no measurement.
Our port to the shared knob space (``explorer.space.KnobSpace``):

* **State** = a sketch plus a *prefix* of its knob decisions in instruction order; the rest are
  undecided. The empty prefix of a sketch is the root, a full prefix a complete schedule.
* **Features** = intrinsic workload features (log2 FLOPs, log2 bytes, arithmetic intensity, the
  sketch index one-hot, the number of knobs, each knob's loop extent) concatenated with acquired
  features per knob slot (decided flag = the mask channel, log2 tile factors, categorical value
  and index; zeros while undecided). Slots are the knobs in instruction order, padded to
  ``MAX_KNOBS``.
* **Target** = log of the best throughput measured among the completions sharing the prefix,
  normalised by the best throughput measured for that workload (so ``0`` = as good as the best
  known, ``log(1e-3)`` for failures): values transfer across shapes and families.
* **Regressor** = gradient-boosted trees (xgboost, ``reg:squarederror``). The paper uses an LSTM
  over per-stage tokens; we deviate because (1) our states are short fixed-layout knob vectors
  (4-10 knobs per sketch), not variable-length Halide pipelines, so a recurrent encoder buys
  little; (2) the data are a few hundred to a few thousand prefixes, where boosted trees fit
  better than a neural net without tuning; (3) the mask channel gives trees the "undecided"
  state explicitly; and (4) it avoids a 700 MB PyTorch dependency. xgboost with ``nthread=1``
  is deterministic for a fixed seed.
* **Training** = fitted value iteration (``ValueSearch`` drives the loop): fit on every prefix of
  every measured point in the store (any workload, any strategy), search with the fitted model,
  measure the few resulting schedules, add them, refit.

As a ``CostModel`` (``predict``), the value of a complete schedule is its predicted normalised
log-throughput (higher = faster).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.core import Candidate, RecordStore, TrialRecord
from explorer.cost_models._base import CostModel
from explorer.cost_models._xgb import import_xgboost
from explorer.space import KnobSpace
from explorer.target import Target
from explorer.types import JSON
from explorer.workloads import Workload

MAX_SKETCHES = 4
MAX_KNOBS = 10
MAX_FACTORS = 4
# Per knob slot: decided, is_tile, is_cat, log2 extent, cat value, cat index, then the factors.
SLOT_WIDTH = 6 + MAX_FACTORS
FAILED_VALUE = math.log(1e-3)  # the value of a failed build/run, relative to the best measured


@dataclass(frozen=True)
class ValueSample:
    """One measured complete point: the unit the value model learns from."""

    workload: Workload
    target: Target
    sketch: int
    values: tuple[JSON, ...]  # the decisions of every knob of the sketch, in order
    throughput: float  # FLOP/s; 0 when the point failed to build or run


def knob_space(workload: Workload, target: Target) -> KnobSpace:
    """The (shared, cached) knob space of a workload on a target (``KnobSpace.of``)."""
    return KnobSpace.of(workload, target)


def locate(space: KnobSpace, candidate: Candidate) -> tuple[int, tuple[JSON, ...]] | None:
    """``(sketch, decision values)`` of a candidate, or ``None`` when it is not a point of the
    space (a hand-written schedule, say).

    ``KnobSpace.materialize`` records the sketch; ``DesignSpace.sample`` (random search) only the
    values, so the sketch is found by the instructions before the postprocessors, which differ
    between sketches even when their knobs look alike.
    """
    d = candidate.decisions
    if isinstance(d, dict) and "values" in d:
        if d.get("sketch") is not None:
            return int(d["sketch"]), tuple(d["values"])
        d = d["values"]  # evolutionary's off-space points: {"sketch": None, "values": [...]}
    if not isinstance(d, (list, tuple)):
        return None
    values = tuple(d)
    matches = [s for s in range(space.num_sketches) if space.point_of(s, values) is not None]
    if len(matches) > 1:
        mine = _skeleton(candidate.trace)
        matches = [s for s in matches if _sketch_skeleton(space, s) == mine] or matches[:1]
    return (matches[0], values) if matches else None


def _skeleton(trace_json: JSON) -> str:
    insts = []
    for inst in trace_json[0]:
        if inst[0] == "EnterPostproc":
            break
        insts.append(inst[:2])
    return json.dumps(insts)


# By workload, target and sketch: a space's identity is no key, its object may be rebuilt.
_SKELETONS: dict[tuple[Workload, Target, int], str] = {}


def _sketch_skeleton(space: KnobSpace, sketch: int) -> str:
    key = (space.workload, space.target, sketch)
    if key not in _SKELETONS:
        _SKELETONS[key] = _skeleton(_tvm.trace_to_json(space.design.sketch_trace(sketch)))
    return _SKELETONS[key]


def samples_from_records(records: Iterable[TrialRecord]) -> list[ValueSample]:
    """Measured records as value samples (records that are not knob-space points are skipped)."""
    out = []
    for r in records:
        if r.status.is_inconclusive:  # unchecked: neither a success nor a failure
            continue
        c = r.candidate
        where = locate(knob_space(c.workload, c.target), c)
        if where is None:
            continue
        secs = r.median_secs if r.result.is_ok else None
        thr = c.workload.flops() / secs if secs else 0.0
        out.append(ValueSample(c.workload, c.target, where[0], where[1], thr))
    return out


def prefix_targets(samples: Sequence[ValueSample]) -> dict[tuple[str, int, str], float]:
    """The fitted-value-iteration targets: for every prefix of every sample, the best normalised
    log-throughput among the samples sharing it.

    Keys are ``(workload key @ target key, sketch, json of the prefix values)``.
    """
    best: dict[str, float] = {}
    for s in samples:
        k = _wkey(s)
        best[k] = max(best.get(k, 0.0), s.throughput)
    out: dict[tuple[str, int, str], float] = {}
    for s in samples:
        k = _wkey(s)
        v = math.log(s.throughput / best[k]) if s.throughput > 0 and best[k] > 0 else FAILED_VALUE
        v = max(v, FAILED_VALUE)
        for n in range(len(s.values) + 1):
            key = (k, s.sketch, json.dumps(list(s.values[:n])))
            out[key] = max(out.get(key, FAILED_VALUE), v)
    return out


def _wkey(s: ValueSample) -> str:
    return f"{s.workload.key()}@{s.target.key()}"


def encode(space: KnobSpace, sketch: int, prefix: Sequence[JSON]) -> np.ndarray:
    """The feature vector of a partial schedule (intrinsic + acquired with a mask channel)."""
    w = space.workload
    flops, nbytes = max(w.flops(), 1), max(w.bytes_moved(), 1)
    knobs = space.domains[sketch]
    head = np.zeros(5 + MAX_SKETCHES)
    head[:5] = [math.log2(flops), math.log2(nbytes), math.log2(flops / nbytes), len(knobs), 0]
    head[4] = len(prefix) / max(1, len(knobs))
    head[5 + min(sketch, MAX_SKETCHES - 1)] = 1.0
    slots = np.zeros((MAX_KNOBS, SLOT_WIDTH))
    for i, dom in enumerate(knobs[:MAX_KNOBS]):
        knob, row = dom.knob, slots[i]
        if knob.kind == "SamplePerfectTile":
            row[1] = 1.0
            row[3] = math.log2(max(1, math.prod(int(x) for x in knob.default)))
        elif knob.kind == "SampleCategorical":
            row[2] = 1.0
        if i >= len(prefix):
            continue  # undecided: only the intrinsic part and mask = 0
        row[0] = 1.0
        value = prefix[i]
        if knob.kind == "SamplePerfectTile":
            factors = [int(x) for x in value][-MAX_FACTORS:]
            row[6 + MAX_FACTORS - len(factors) :] = [math.log2(f) for f in factors]
        elif knob.kind == "SampleCategorical":
            candidates = list(knob.attrs[0]) if knob.attrs else []
            index = int(value)
            raw = candidates[index] if index < len(candidates) else index
            row[4] = math.log2(1 + max(0.0, float(raw)))
            row[5] = index / max(1, len(candidates) - 1)
    return np.concatenate([head, slots.ravel()])


class ValueModel(CostModel):
    """``V(partial schedule)`` by gradient-boosted trees, trained by fitted value iteration.

    Args:
        seed: xgboost's seed.
        num_rounds: boosting rounds per fit.
        max_depth: tree depth.
        learning_rate: xgboost's ``eta``.

    Example:
        Fitted on the shipped recording of real measurements of a 64^3 matmul:

        >>> import tempfile
        >>> from explorer.testing import recordings
        >>> folder = tempfile.TemporaryDirectory()
        >>> store = recordings.open_recording(folder.name)  # a private copy
        >>> model = ValueModel(num_rounds=20).fit_from_store(store, workloads=[recordings.SMALL])
        >>> target = recordings.recorded_trials(store, recordings.SMALL)[0].candidate.target
        >>> store.close(); folder.cleanup()
        >>> space = KnobSpace.of(recordings.SMALL, target)
        >>> first = space.domains[0][0].values[0]  # the first knob's first value
        >>> model.values(space, 0, [(), (first,)]).shape  # the root, then one decided knob
        (2,)
    """

    name = "value"

    def __init__(
        self,
        *,
        seed: int = 0,
        num_rounds: int = 150,
        max_depth: int = 6,
        learning_rate: float = 0.1,
    ):
        self.seed = seed
        self.num_rounds = num_rounds
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.samples_: list[ValueSample] = []
        self.booster_: Any = None  # xgboost.Booster once fitted

    @property
    def is_fitted(self) -> bool:
        return self.booster_ is not None

    # -- training -----------------------------------------------------------------------------
    def fit(self, samples: Sequence[ValueSample]) -> ValueModel:
        """Replace the data with ``samples`` and refit; returns ``self``."""
        self.samples_ = list(samples)
        self._refit()
        return self

    def add(self, samples: Sequence[ValueSample]) -> None:
        """Add samples and refit (one round of fitted value iteration)."""
        if samples:
            self.samples_.extend(samples)
            self._refit()

    def fit_from_store(
        self,
        store: RecordStore,
        *,
        workloads: Sequence[Workload] | None = None,
        target: Target | None = None,
    ) -> ValueModel:
        """Fit on every stored trial (of ``workloads`` if given, on ``target`` if given)."""
        records = store.trials(target=target) if target is not None else store.trials()
        if workloads is not None:
            keep = {w.key() for w in workloads}
            records = [r for r in records if r.candidate.workload.key() in keep]
        return self.fit(samples_from_records(records))

    def _refit(self) -> None:
        targets = prefix_targets(self.samples_)
        if not targets:
            self.booster_ = None
            return
        spaces = {_wkey(s): knob_space(s.workload, s.target) for s in self.samples_}
        rows, ys = [], []
        for (wk, sketch, prefix), y in sorted(targets.items()):
            rows.append(encode(spaces[wk], sketch, json.loads(prefix)))
            ys.append(y)
        xgb = import_xgboost()
        dtrain = xgb.DMatrix(np.array(rows), label=np.array(ys))
        params = {
            "objective": "reg:squarederror",
            "max_depth": self.max_depth,
            "eta": self.learning_rate,
            "seed": self.seed,
            "nthread": 1,
            "verbosity": 0,
        }
        self.booster_ = xgb.train(params, dtrain, num_boost_round=self.num_rounds)

    # -- inference ----------------------------------------------------------------------------
    def values(
        self, space: KnobSpace, sketch: int, prefixes: Sequence[Sequence[JSON]]
    ) -> np.ndarray:
        """``V`` of partial schedules of one sketch (0 for all before any fit)."""
        if self.booster_ is None or not prefixes:
            return np.zeros(len(prefixes))
        X = np.array([encode(space, sketch, p) for p in prefixes])
        return np.asarray(self.booster_.predict(import_xgboost().DMatrix(X)), dtype=np.float64)

    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """Predicted normalised log-throughput of complete schedules (higher = faster)."""
        out = np.full(len(candidates), FAILED_VALUE, dtype=np.float64)
        for i, c in enumerate(candidates):
            space = knob_space(c.workload, c.target)
            where = locate(space, c)
            if where is not None:
                out[i] = self.values(space, where[0], [where[1]])[0]
        return out

    def update(self, records: Sequence[TrialRecord]) -> None:
        self.add(samples_from_records(records))

    # -- persistence --------------------------------------------------------------------------
    def save(self, path: str) -> None:
        data = {
            "model": "value",
            "booster": None
            if self.booster_ is None
            else base64.b64encode(bytes(self.booster_.save_raw("json"))).decode(),
            "samples": [
                {
                    "workload": s.workload.to_json(),
                    "target": s.target.to_json(),
                    "sketch": s.sketch,
                    "values": list(s.values),
                    "throughput": s.throughput,
                }
                for s in self.samples_
            ],
        }
        Path(path).write_text(json.dumps(data))

    def load(self, path: str) -> None:
        data = json.loads(Path(path).read_text())
        if data.get("model") != "value":
            raise ValueError(f"{path} is not a saved ValueModel")
        self.samples_ = [
            ValueSample(
                Workload.from_json(s["workload"]),
                Target.from_json(s["target"]),
                int(s["sketch"]),
                tuple(s["values"]),
                float(s["throughput"]),
            )
            for s in data["samples"]
        ]
        self.booster_ = None
        if data["booster"] is not None:
            self.booster_ = import_xgboost().Booster(params={"nthread": 1})
            self.booster_.load_model(bytearray(base64.b64decode(data["booster"])))
