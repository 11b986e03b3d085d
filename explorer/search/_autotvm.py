"""AutoTVM (Chen et al., "Learning to Optimize Tensor Programs", NeurIPS 2018) on our knob space.

The loop is TVM v0.8's ``ModelBasedTuner`` + ``XGBTuner`` (Chen et al., NeurIPS 2018):

1. Until the first fit every proposal is a uniformly random unvisited point (after one
   random point of each sketch, see below). ``plan_size``
   defaults to ``"auto"``: a quarter of the run's trial budget, between 4 and AutoTVM's 64, so
   that a 16- or 64-trial run fits its model several times instead of never.
2. Once ``plan_size * (fits + 1)`` trials are known and one succeeded, the XGBoost model is
   retrained from scratch on all of them, and simulated annealing over the model (persistent
   parallel chains) plans the next ``plan_size`` unvisited points, best first.
3. Proposals walk down the plan; the last ``int(epsilon * plan_size)`` of each plan are
   replaced by random unvisited points (epsilon-greedy).
4. Optionally (``diversity_filter_ratio``) the annealing returns ``ratio * plan_size`` points
   and a greedy submodular pick keeps the ``plan_size`` most diverse in knob values.
5. Optionally (``transfer_from="auto"``) a base model is trained on other workloads' trials
   from the record store; it plans the first batch and is blended into the local model with a
   discount that halves every 64 trials (see ``XGBCostModel``).

Choices for TVM 0.27 (each documented where it is made):

* **Knob features by default.** AutoTVM's default was "itervar" (loop features); its docs
  recommend "knob" for single-task tuning, and only knob features are cheap enough here: the
  annealing scores up to 128 x 500 points per plan, i.e. 64,000 candidates, in a second
  from a table lookup, where PerStore features (replay + extraction, ~7 ms a point) would take
  minutes. ``features="perstore"`` is available (slow: shrink ``parallel_size``/``n_iter``).
* **Transfer through a distilled base.** PerStore features transfer across shapes, knob
  features do not. The base model is an ``XGBCostModel`` over PerStore features trained on
  other workloads; with knob features it is *distilled* into a knob-feature model by scoring
  ``transfer_pool_size`` random points of this space, so the annealing stays cheap.
* **Every sketch measured first.** AutoTVM searched one template; our space holds several
  sketches (MetaSchedule's and the packed ones), and a uniform draw weighs them by their size.
  Without a ``start``, the first trials are one random point of each sketch not yet measured.
* **Invalid points are skipped.** A point TVM refuses (``materialize`` returns ``None``) is
  marked visited and counted in ``num_invalid_`` but never measured (AutoTVM measured it and
  recorded 0 GFLOPS).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from explorer.core import Candidate, TrialRecord, trace_key
from explorer.cost_models import FEATURE_KINDS, LOSSES, KnobTable, XGBCostModel, throughput
from explorer.search._base import AUTO, Capabilities, SearchStrategy, check_scaled
from explorer.search._sa import Key, SimulatedAnnealing, diversity_pick
from explorer.search._start import StartPlan, first_candidates, is_hand_start, plan_start
from explorer.search._transfer import check_transfer_from, transfer_records
from explorer.space import KnobSpace, Point
from explorer.types import JSON

log = logging.getLogger(__name__)

_SKETCH_DRAWS = 32  # random draws of a sketch before its first trial is given up


class AutoTVMSearch(SearchStrategy):
    """Model-based search: XGBoost cost model + simulated annealing + epsilon-greedy.

    Args:
        plan_size: trials between refits, and points planned per fit (AutoTVM: 64);
            ``"auto"``: a quarter of the run's trial budget, between 4 and 64 (64 without a
            budget). The run's settings record the number used.
        loss: ``"rank"`` (AutoTVM's default) or ``"reg"``.
        features: ``"knob"`` (default, see the module notes) or ``"perstore"``.
        epsilon: share of each plan given to random unvisited points (0.05).
        parallel_size, n_iter, early_stop: simulated annealing (128 chains, 500 steps, stop
            after 50 steps without a new top point).
        diversity_filter_ratio: ``None`` (AutoTVM's default) or ``lambda >= 1``: anneal for
            ``lambda * plan_size`` points and keep the ``plan_size`` most diverse.
        transfer_from: ``None`` or ``"auto"``: learn first from the trials of *other*
            workloads on the same target in the record store (passed to ``reset``).
        min_seed_records: fewer transfer trials than this and transfer is skipped (AutoTVM:
            500).
        transfer_pool_size: random points scored by the base model to distil it into knob
            features.
        start: a schedule to start from (``session.candidate()``, a record's candidate or a
            ``Point``): measured first as the run's reference, then its nearest knob-space
            point, where every annealing chain begins its walk.

    ``reset`` takes the record store as an optional keyword (the ``Tuner`` passes its own);
    only ``transfer_from="auto"`` needs it.

    Example:
        >>> search = AutoTVMSearch()  # plan_size 16 for a 64-trial run
        >>> tuner.run(workload, target, search, max_trials=64)  # doctest: +SKIP
    """

    name = "autotvm"
    # Its XGBoost model with the rank loss (AutoTVM's default) or squared error (``loss``).
    capabilities = Capabilities(
        start=True, cost_models=tuple(f"xgb-{x}" for x in LOSSES), transfer=True
    )

    def __init__(
        self,
        *,
        plan_size: int | str = AUTO,
        loss: str = "rank",
        features: str = "knob",
        epsilon: float = 0.05,
        parallel_size: int = 128,
        n_iter: int = 500,
        early_stop: int = 50,
        diversity_filter_ratio: float | None = None,
        transfer_from: str | None = None,
        min_seed_records: int = 500,
        transfer_pool_size: int = 256,
        start: Candidate | Point | None = None,
    ):
        check_scaled("AutoTVMSearch", "plan_size", plan_size)
        if parallel_size < 1 or n_iter < 0 or early_stop < 1:
            raise ValueError(
                "AutoTVMSearch: parallel_size and early_stop must be >= 1 and n_iter >= 0 "
                f"(got {parallel_size}, {early_stop}, {n_iter})"
            )
        if loss not in LOSSES:
            raise ValueError(f"AutoTVMSearch: loss must be one of {LOSSES} (got {loss!r})")
        if features not in FEATURE_KINDS:
            raise ValueError(
                f"AutoTVMSearch: features must be one of {FEATURE_KINDS} (got {features!r})"
            )
        if not 0 <= epsilon <= 1:
            raise ValueError(f"AutoTVMSearch: epsilon must be in [0, 1] (got {epsilon})")
        if diversity_filter_ratio is not None and diversity_filter_ratio < 1:
            raise ValueError(
                "AutoTVMSearch: diversity_filter_ratio must be None or >= 1 "
                f"(got {diversity_filter_ratio})"
            )
        check_transfer_from("AutoTVMSearch", transfer_from)
        self.plan_size = plan_size
        self.loss = loss
        self.features = features
        self.epsilon = epsilon
        self.parallel_size = parallel_size
        self.n_iter = n_iter
        self.early_stop = early_stop
        self.diversity_filter_ratio = diversity_filter_ratio
        self.transfer_from = transfer_from
        self.min_seed_records = min_seed_records
        self.transfer_pool_size = transfer_pool_size
        self.start = start

    @property
    def model_name(self) -> str:
        """The key of this strategy's predictions in stored trials (a ``COST_MODELS`` name)."""
        return f"xgb-{self.loss}"

    @classmethod
    def cost_model_arguments(cls, cost_model: str) -> dict[str, JSON]:
        """``xgb-rank`` and ``xgb-reg`` are the two ``loss`` values of its XGBoost model."""
        return {"loss": cost_model.removeprefix("xgb-")}

    # -- SearchStrategy ---------------------------------------------------------------------
    def _start(self, history: list[TrialRecord]) -> list[TrialRecord]:
        """Fresh model and annealer; ``record_store`` is where ``transfer_from="auto"`` looks."""
        space = self.space
        self.plan_size_ = self._scaled("plan_size", default=64)
        self.knobs_ = KnobSpace(space)
        self.table_ = KnobTable(self.knobs_)
        self.sa_ = SimulatedAnnealing(
            [self.knobs_.dims(s) for s in range(self.knobs_.num_sketches)],
            parallel_size=self.parallel_size,
            n_iter=self.n_iter,
            early_stop=self.early_stop,
        )
        self.model_ = self._new_model(base=None)
        self.base_model_: XGBCostModel | None = None
        self.visited_: set[Key] = set()
        self.plan_: list[Key] = []
        self.plan_pos_ = 0
        self.num_fits_ = 0
        self.num_invalid_ = 0
        self._num_samples = 0
        self._best_throughput = 0.0
        self._pending: list[TrialRecord] = []
        self._predicted: dict[str, float] = {}
        self._candidates: dict[Key, Candidate | None] = {}
        self.start_plan_: StartPlan | None = plan_start(self.start, self.knobs_, history)
        self._first = first_candidates(self.start_plan_, history)
        if self.start_plan_ is not None:
            point = self.start_plan_.point
            self.sa_.start_at((point.sketch, *point.indices))
        elif self.knobs_.pool is None:
            self._first = self._sketches_unmeasured(history)
        if self.transfer_from == "auto":
            self._load_transfer()
        return history

    def ask(self, n: int) -> list[Candidate]:
        self._predicted = {}  # `predictions` answers for the latest batch only
        out: list[Candidate] = self._first[:n]
        self._first = self._first[n:]
        scored: list[tuple[Candidate, Key]] = []  # the proposals that are points of the space
        for cand in out:
            point = self.knobs_.point_of_candidate(cand)
            if point is not None:
                self.visited_.add((point.sketch, *point.indices))
                scored.append((cand, (point.sketch, *point.indices)))
        while len(out) < n:
            key = self._next_point()
            if key is None:
                break
            self.visited_.add(key)
            made = self._materialize(key)
            if made is None:
                self.num_invalid_ += 1
                continue
            out.append(made)
            scored.append((made, key))
        if scored and (self.model_.is_fitted or self.model_.base_model is not None):
            scores = self._score_keys([k for _, k in scored])
            for (cand, _), score in zip(scored, scores, strict=True):
                self._predicted[trace_key(cand.trace)] = float(score)
        return out

    def tell(self, records: Sequence[TrialRecord]) -> None:
        for r in records:
            if is_hand_start(r.candidate):
                continue  # not a point of the space: knob features cannot describe it
            point = self.knobs_.point_of_candidate(r.candidate)
            if point is not None:
                self.visited_.add((point.sketch, *point.indices))
            self._pending.append(r)
            self._num_samples += 1
            self._best_throughput = max(self._best_throughput, throughput(r))
        # AutoTVM refits once plan_size more trials are in and at least one succeeded.
        if (
            self._num_samples >= self.plan_size_ * (self.num_fits_ + 1)
            and self._best_throughput > 1e-6
        ):
            self.model_.update(self._pending)  # retrains from scratch on everything seen
            self._pending = []
            self._plan()
            self.num_fits_ += 1

    def predictions(self, candidates: Sequence[Candidate]) -> list[dict[str, float]]:
        out = []
        for c in candidates:
            score = self._predicted.pop(trace_key(c.trace), None)
            out.append({} if score is None else {self.model_name: score})
        return out

    # -- internals --------------------------------------------------------------------------
    def _new_model(self, base: XGBCostModel | None) -> XGBCostModel:
        return XGBCostModel(
            loss=self.loss,
            features=self.features,
            seed=int(self.rng.integers(2**31 - 1)),
            eval_k=self.plan_size_,
            base_model=base,
        )

    def _sketches_unmeasured(self, history: Sequence[TrialRecord]) -> list[Candidate]:
        """One random buildable point of each sketch no trial of ``history`` measured, in a
        random order: the first trials. Random points weigh sketches by their size, and on
        ResNet-18 C7 (64 trials, seeds 0 and 1) no trial ever landed in the two packed
        sketches, where every other strategy found its best (80 and 117 GFLOPS against
        184-214): the model cannot rank a sketch it never saw."""
        ks = self.knobs_
        done = {p.sketch for r in history if (p := ks.point_of_candidate(r.candidate)) is not None}
        out: list[Candidate] = []
        for sketch in self.rng.permutation(ks.num_sketches):
            if int(sketch) in done:
                continue
            for _ in range(_SKETCH_DRAWS):  # a draw TVM refuses is visited, never measured
                point = ks.random_point(self.rng, sketch=int(sketch))
                key = (point.sketch, *point.indices)
                if key in self.visited_:
                    continue
                self.visited_.add(key)
                made = self._materialize(key)
                if made is not None:
                    out.append(made)
                    break
                self.num_invalid_ += 1
        return out

    def _next_point(self) -> Key | None:
        """AutoTVM's ``next_batch`` for one point: the plan, or a random unvisited point for
        the epsilon tail of the plan and before the first plan."""
        if len(self.visited_) >= self.sa_.size:
            return None
        while self.plan_pos_ < len(self.plan_) and self.plan_[self.plan_pos_] in self.visited_:
            self.plan_pos_ += 1
        if self.plan_pos_ >= len(self.plan_) - int(self.epsilon * self.plan_size_):
            return self._random_unvisited()
        return self.plan_[self.plan_pos_]

    def _random_unvisited(self) -> Key | None:
        for _ in range(64):
            sk, idx = self.sa_.random_keys(1, self.rng)
            key = self.sa_.key(sk[0], idx[0])
            if key not in self.visited_:
                return key
        # Nearly exhausted: draw among the unvisited points directly (small spaces only).
        if self.sa_.size > 1 << 20:
            return None
        rest = [k for k in self._all_keys() if k not in self.visited_]
        return rest[int(self.rng.integers(len(rest)))] if rest else None

    def _all_keys(self) -> list[Key]:
        keys = []
        for s, dims in enumerate(self.sa_.dims):
            for flat in range(int(np.prod(dims, dtype=np.int64))):
                keys.append((s, *(int(i) for i in np.unravel_index(flat, dims))))
        return keys

    def _materialize(self, key: Key) -> Candidate | None:
        if key not in self._candidates:
            self._candidates[key] = self.knobs_.materialize(Point(key[0], key[1:]))
        return self._candidates[key]

    def _score_keys(self, keys: Sequence[Key]) -> np.ndarray:
        return self._score(*self.sa_.arrays(keys))

    def _score(self, sk: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The model's score of points (the annealing's objective); ``-inf`` for points TVM
        refuses, when the features reveal it (PerStore features need the schedule)."""
        if self.features == "knob":
            return self.model_.predict_rows(self.table_.rows(sk, idx))
        keys = [self.sa_.key(s, i) for s, i in zip(sk, idx, strict=True)]
        built = [(i, c) for i, k in enumerate(keys) if (c := self._materialize(k)) is not None]
        out = np.full(len(keys), -np.inf)
        if built:
            out[[i for i, _ in built]] = self.model_.predict([c for _, c in built])
        if len(self._candidates) > 1 << 16:  # the annealing meets many points once
            self._candidates.clear()
        return out

    def _plan(self) -> None:
        ratio = self.diversity_filter_ratio
        num = int(round(self.plan_size_ * ratio)) if ratio else self.plan_size_
        found = self.sa_.find_maximums(self._score, num, self.visited_, self.rng)
        keys = [k for k, _ in found]
        if ratio:
            keys = [keys[i] for i in diversity_pick(keys, self.plan_size_)]
        self.plan_ = keys
        self.plan_pos_ = 0

    def _load_transfer(self) -> None:
        """AutoTVM's ``load_history``: fit a base model on other workloads' trials, plan the
        first batch with it, and hand it to the local model as its base."""
        records = transfer_records("AutoTVMSearch", self.record_store, self.space)
        self.resolved_["transfer_trials"] = 0
        if len(records) < self.min_seed_records:
            log.info(
                "AutoTVMSearch: %d trials of other workloads (< min_seed_records=%d): "
                "no transfer learning",
                len(records),
                self.min_seed_records,
            )
            return
        # Step 1. The base model, on features that mean the same for every workload.
        base = XGBCostModel(
            loss=self.loss,
            features="perstore",
            seed=int(self.rng.integers(2**31 - 1)),
            num_boost_round=400,  # AutoTVM's base model: 400 rounds, patience 100,
            early_stopping_rounds=100,  # a-recall@(2 * plan_size)
            eval_k=2 * self.plan_size_,
        )
        base.update(records)
        if not base.is_fitted:
            log.info("AutoTVMSearch: no successful trial to transfer from")
            return
        # Step 2. The base in this space's own features.
        proxy = base if self.features == "perstore" else self._distil(base)
        if proxy is None:
            return
        self.base_model_ = base
        self.resolved_["transfer_trials"] = len(records)
        self.model_ = self._new_model(base=proxy)
        # Step 3. The base model plans the first batch (its scores until the first fit).
        self._plan()

    def _distil(self, base: XGBCostModel) -> XGBCostModel | None:
        """A knob-feature model fitted to the base model's scores of random points here."""
        sk, idx = self.sa_.random_keys(self.transfer_pool_size, self.rng)
        keys = list(dict.fromkeys(self.sa_.key(s, i) for s, i in zip(sk, idx, strict=True)))
        cands = [(k, c) for k in keys if (c := self._materialize(k)) is not None]
        if len(cands) < 2:
            return None
        targets = base.predict([c for _, c in cands])
        proxy = XGBCostModel(
            loss="reg",  # a regression onto the base's margins, which the blend adds up
            features="knob",
            seed=int(self.rng.integers(2**31 - 1)),
            eval_k=self.plan_size_,
        )
        proxy.fit_rows(self.table_.rows(*self.sa_.arrays([k for k, _ in cands])), targets)
        return proxy if proxy.is_fitted else None
