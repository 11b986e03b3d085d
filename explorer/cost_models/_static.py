"""Tuna's static analytical cost model: a per-target linear model over static features.

Tuna (Wang et al., arXiv 2104.14641) ranks schedules without running them:
features of the IR and of the generated assembly, combined linearly with coefficients set once
per hardware target by profiling. Our version (the paper's feature list and formulas are not
available here, so this is the closest faithful design; see ``_static_features`` for the
features):

* **Linear cost.** ``cost = w . f`` estimates *cycles per FLOP on one core*: each feature is a
  dynamic count per FLOP (instructions of a class, bytes filled into L1/L2, parallel launches)
  already divided by the effective parallel speed-up, and each weight is what one unit costs
  (an instruction's reciprocal throughput, a byte's share of a cache's bandwidth, a launch's
  cycles). The three penalty features (vector waste, load imbalance, idle cores) start at weight
  ~0 and are there for the calibration to use if the data says so.
* **Score** (higher = faster): ``predict`` returns ``clock / cost`` in GFLOPS, i.e.
  ``flops / predicted_secs``; a candidate TVM cannot build scores 0.
* **Default weights** come from first principles (roughly Zen-class reciprocal throughputs),
  so the model works with no calibration at all.
* **Calibration** (``calibrate(records)``) fits the weights once per target by *rank regression*
  on measured records, ideally random schedules of *other* workloads: pairwise logistic loss on
  ``log cost(slower) - log cost(faster)`` for pairs of the same workload (absolute speed is
  never compared across workloads), weights kept positive through ``w = w0 * exp(theta)`` and
  pulled towards the defaults by an L2 penalty on ``theta``, solved with L-BFGS (scipy).
* **No learning during search**: ``update`` is a no-op on purpose (Tuna's point is that the
  model needs no measurements of the workload being tuned); call ``calibrate`` explicitly.

Compiling a candidate costs ~0.05-0.5 s, so features are cached per (workload, target, trace),
and a batch of many new candidates is compiled in worker processes, one per core (the measurement
workers of ``explorer.measure``): a search that scores a thousand candidates is bound by these
compiles, and a schedule that kills TVM then kills a worker, not the caller.
"""

from __future__ import annotations

import json
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from explorer.core import Candidate, TrialRecord, WorkerPool, shutdown_pool, trace_key
from explorer.cost_models import _static_features as sf
from explorer.cost_models._base import CostModel, ScoreScale
from explorer.target import available_cores

# Fewer new candidates than this are compiled in this process: starting the workers (a TVM
# import each, ~1 s of CPU) would cost more than the parallel compiles save.
MIN_WORKER_BATCH = 8
_EXTRACT_TIMEOUT_SECS = 120.0  # one compile; a candidate past it scores 0 like an unbuildable one

CLOCK_GHZ = 3.0  # turns cycles/FLOP into GFLOPS; only the scale of the score depends on it

DEFAULT_WEIGHTS: dict[str, float] = {
    # Reciprocal throughputs in cycles per instruction (two FMA pipes, two load ports, one
    # store port on Zen 4/5 and recent Intel cores), so one zmm FMA per cycle pair is peak.
    "vfma_zmm": 0.5,
    "vfma_ymm": 0.5,
    "vfma_xmm": 0.5,
    "varith": 0.5,
    "scalar_fp": 0.5,
    "vload": 0.5,
    "sload": 0.5,
    "vstore": 1.0,
    "sstore": 1.0,
    "shuffle": 1.0,
    "branch": 0.5,
    "spill": 1.0,  # a stack round trip that competes with the real loads and stores
    "call": 20.0,  # math-library calls (expf, ...) are tens of cycles
    "other": 0.25,  # integer/address arithmetic: four ALUs
    # Cache fills: ~32 B/cycle from L2 into L1, ~8 B/cycle from L3/DRAM into L2 (per core).
    "l1_fill_bytes": 1.0 / 32,
    "l2_fill_bytes": 1.0 / 8,
    "launches": 3000.0,  # waking the thread pool for one parallel region (~1 us)
    # Penalties (unitless) start negligible; calibration may raise them.
    "vector_waste": 1e-3,
    "imbalance": 1e-3,
    "idle_cores": 1e-3,
}


class StaticCostModel(CostModel):
    """Score schedules from their assembly and loop nest, without measuring (Tuna).

    Args:
        weights: per-feature weights (``COST_FEATURES`` names); missing ones take the defaults.
        l2_penalty: strength of the pull of calibrated log-weights towards the defaults.
        tie_tolerance: pairs whose latencies differ by less than this fraction are ignored by
            ``calibrate`` (measurement noise, not order).
        cache_size: how many candidates' features are kept.
        num_workers: processes that compile batches of at least ``MIN_WORKER_BATCH`` new
            candidates (default: one per core available); 0 compiles everything in this
            process. They start on first use and stay until ``close`` (or garbage collection).

    Example:
        >>> model = StaticCostModel()
        >>> model.predict([candidate])  # doctest: +SKIP
        array([12.3])
    """

    name = "static"

    @property
    def score_scale(self) -> ScoreScale:
        return ScoreScale.GFLOPS

    def __init__(
        self,
        *,
        weights: dict[str, float] | None = None,
        l2_penalty: float = 0.05,
        tie_tolerance: float = 0.05,
        cache_size: int = 4096,
        num_workers: int | None = None,
    ):
        if num_workers is not None and num_workers < 0:
            raise ValueError(f"StaticCostModel: num_workers must be >= 0 (got {num_workers})")
        self.weights = weights
        self.num_workers = num_workers
        self._pool: WorkerPool | None = None
        self._finalizer: weakref.finalize[..., StaticCostModel] | None = None
        self.l2_penalty = l2_penalty
        self.tie_tolerance = tie_tolerance
        self.cache_size = cache_size
        w = {**DEFAULT_WEIGHTS, **(weights or {})}
        unknown = sorted(set(w) - set(sf.COST_FEATURES))
        if unknown:
            raise ValueError(f"StaticCostModel: unknown feature weight(s) {', '.join(unknown)}")
        self.weights_ = np.array([w[n] for n in sf.COST_FEATURES], dtype=np.float64)
        self.calibrated_on_: int = 0  # pairs used by the last calibrate()
        self._cache: OrderedDict[str, sf.StaticFeatures] = OrderedDict()

    # -- features -----------------------------------------------------------------------------
    def features(self, candidate: Candidate) -> sf.StaticFeatures:
        """The static analysis of one candidate (cached)."""
        key = f"{candidate.workload.key()}|{candidate.target.key()}|{trace_key(candidate.trace)}"
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        feats = sf.extract(candidate)
        self._cache[key] = feats
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return feats

    def feature_matrix(self, candidates: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray]:
        """``(X, ok)``: one row of ``COST_FEATURES`` per candidate and whether it compiled."""
        self._extract_in_workers(candidates)
        feats = [self.features(c) for c in candidates]
        X = np.array([f.values for f in feats], dtype=np.float64).reshape(
            len(feats), len(sf.COST_FEATURES)
        )
        return X, np.array([f.ok for f in feats], dtype=bool)

    def _extract_in_workers(self, candidates: Sequence[Candidate]) -> None:
        """Fill the cache for the new candidates in parallel, when there are enough of them."""
        workers = available_cores() if self.num_workers is None else self.num_workers
        new: dict[str, Candidate] = {}
        for c in candidates:
            key = f"{c.workload.key()}|{c.target.key()}|{trace_key(c.trace)}"
            if key not in self._cache:
                new.setdefault(key, c)
        if workers < 1 or len(new) < MIN_WORKER_BATCH:
            return  # `features` compiles them here
        if self._pool is None:
            self._pool = WorkerPool(num_build_workers=workers, memory_limit_bytes=0)
            self._finalizer = weakref.finalize(self, shutdown_pool, self._pool)
        requests = [
            {
                "op": "call",
                "target": "explorer.cost_models._static_features:extract_json",
                "args": (c.to_json(),),
                "kwargs": {},
            }
            for c in new.values()
        ]
        replies = self._pool.build_many(requests, _EXTRACT_TIMEOUT_SECS)
        for key, reply in zip(new, replies, strict=True):
            if isinstance(reply, dict) and reply.get("ok"):
                self._cache[key] = reply["value"]
            elif not isinstance(reply, dict):  # the compile killed or hung its worker
                self._cache[key] = sf.failed_features()
            # else: the worker could not even decode it (e.g. a family registered only here):
            # left out, so `features` compiles it in this process.
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def close(self) -> None:
        """Stop the feature workers (they start again on the next large batch)."""
        if self._finalizer is not None:
            self._finalizer()
        self._pool = None
        self._finalizer = None

    # -- CostModel ----------------------------------------------------------------------------
    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """Predicted GFLOPS (``flops / predicted_secs``); 0 for a candidate that won't build."""
        X, ok = self.feature_matrix(candidates)
        return self._score(X, ok, self.weights_)

    @staticmethod
    def _score(X: np.ndarray, ok: np.ndarray, w: np.ndarray) -> np.ndarray:
        cost = X @ w if len(X) else np.zeros(0)
        out = np.zeros(len(X), dtype=np.float64)
        good = ok & (cost > 0)
        out[good] = CLOCK_GHZ / cost[good]
        return out

    def update(self, records: Sequence[TrialRecord]) -> None:
        """No-op: the static model does not learn during a search (see ``calibrate``)."""

    # -- calibration --------------------------------------------------------------------------
    def calibrate(self, records: Sequence[TrialRecord]) -> StaticCostModel:
        """Fit the weights by pairwise rank regression on measured records; returns ``self``.

        Only successful measurements count, and only pairs of the same workload and target
        whose median latencies differ by more than ``tie_tolerance``.
        """
        # Step 1. Features and latencies per (workload, target) group.
        groups: dict[str, list[tuple[np.ndarray, float]]] = {}
        for r in records:
            if not r.result.is_ok or not r.median_secs:
                continue
            f = self.features(r.candidate)
            if not f.ok:
                continue
            key = f"{r.candidate.workload.key()}|{r.candidate.target.key()}"
            groups.setdefault(key, []).append((f.values, float(r.median_secs)))
        # Step 2. Ordered pairs (faster, slower).
        fast, slow = [], []
        for items in groups.values():
            for i, (xi, ti) in enumerate(items):
                for xj, tj in items[i + 1 :]:
                    if abs(ti - tj) <= self.tie_tolerance * min(ti, tj):
                        continue
                    a, b = (xi, xj) if ti < tj else (xj, xi)
                    fast.append(a)
                    slow.append(b)
        self.calibrated_on_ = len(fast)
        if not fast:
            return self
        Xf, Xs = np.array(fast), np.array(slow)
        w0 = np.array([DEFAULT_WEIGHTS[n] for n in sf.COST_FEATURES])
        lam = self.l2_penalty

        # Step 3. Minimise mean log(1 + exp(-(log c_slow - log c_fast))) + lam |theta|^2 with
        # w = w0 * exp(theta); the gradient of log(X w) w.r.t. theta is X * w / (X w).
        def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
            w = w0 * np.exp(theta)
            cf, cs = np.maximum(Xf @ w, 1e-12), np.maximum(Xs @ w, 1e-12)
            margin = np.log(cs) - np.log(cf)
            sig = 1.0 / (1.0 + np.exp(np.clip(margin, -50, 50)))  # d/dmargin of the loss (neg.)
            value = float(np.mean(np.logaddexp(0.0, -margin)) + lam * theta @ theta)
            dmargin = (Xs * w) / cs[:, None] - (Xf * w) / cf[:, None]
            grad = -(sig[:, None] * dmargin).mean(axis=0) + 2 * lam * theta
            return value, grad

        theta0 = np.log(self.weights_ / w0)
        # scipy.optimize takes half a second to import: only fitting pays it
        from scipy import optimize

        res = optimize.minimize(loss, theta0, jac=True, method="L-BFGS-B")
        self.weights_ = w0 * np.exp(res.x)
        return self

    # -- persistence --------------------------------------------------------------------------
    def weight_dict(self) -> dict[str, float]:
        return dict(zip(sf.COST_FEATURES, map(float, self.weights_), strict=True))

    def save(self, path: str) -> None:
        Path(path).write_text(
            json.dumps(
                {"model": "static", "weights": self.weight_dict(), "pairs": self.calibrated_on_},
                indent=1,
            )
        )

    def load(self, path: str) -> None:
        data = json.loads(Path(path).read_text())
        if data.get("model") != "static":
            raise ValueError(f"{path} is not a saved StaticCostModel")
        w = {**DEFAULT_WEIGHTS, **data["weights"]}
        self.weights_ = np.array([w[n] for n in sf.COST_FEATURES], dtype=np.float64)
        self.calibrated_on_ = int(data.get("pairs", 0))
