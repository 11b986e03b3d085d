"""AutoTVM's gradient-boosted-tree cost model (Chen et al., NeurIPS 2018; TVM v0.8
``xgboost_cost_model.py``), trained on our records.

What is kept from AutoTVM (Chen et al., NeurIPS 2018; TVM v0.8's ``XGBoostCostModel``):
    * the XGBoost parameters (depth 3, eta 0.3, gamma 1e-4, min_child_weight 1, subsample 1,
      lambda 1, alpha 0) and the two losses: ``rank`` = ``rank:pairwise``, ``reg`` = squared
      error (``reg:linear`` was renamed ``reg:squarederror``);
    * labels = throughput / max throughput, failures 0; retrained from scratch on all data;
    * up to 8000 rounds, stopped after 20 rounds without gain in the **train-set**
      ``a-recall@k`` (k = the plan size, 64). As in AutoTVM the trees grown after the best
      round are kept (xgboost's ``save_best=False``);
    * transfer learning: with a ``base_model`` the local model learns the residual over
      ``discount * base`` (xgboost ``base_margin``), ``discount = 1 / 2 ** (n / 64)`` for ``n``
      training samples; the base is dropped once the discount falls below 0.05 (n > 276).

What differs: trials of several workloads may be mixed. Labels are then normalised per
(workload, target), and the rank loss only compares candidates of the same workload (one
xgboost query group each): throughputs of different operators are not comparable.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from explorer.core import Candidate, TrialRecord
from explorer.cost_models._base import CostModel, ScoreScale
from explorer.cost_models._features import FEATURE_KINDS, FeatureExtractor, fit_width, pad_rows
from explorer.cost_models._metrics import average_recall_curve
from explorer.extras import require

log = logging.getLogger(__name__)

LOSSES = ("rank", "reg")
BASE_HALFLIFE = 64.0  # AutoTVM: discount = 1 / 2 ** (n / 64)
BASE_DROP_BELOW = 0.05
_FORMAT = "explorer.XGBCostModel/1"
_OBJECTIVES = {"rank": "rank:pairwise", "reg": "reg:squarederror"}


def import_xgboost() -> Any:
    """``xgboost``, imported on first use: the core library must import without it."""
    return require("xgboost", "the XGBoost cost models", "xgboost")


def throughput(record: TrialRecord) -> float:
    """FLOP/s of a trial (1/s when the workload has no FLOP count); 0 when it failed."""
    secs = record.median_secs
    if not record.result.is_ok or not secs or secs <= 0:
        return 0.0
    return (record.candidate.workload.flops() or 1) / secs


def group_key(candidate: Candidate) -> str:
    """Trials are only compared within one (workload, target)."""
    return f"{candidate.workload.key()}|{candidate.target.key()}"


class XGBCostModel(CostModel):
    """AutoTVM's XGBoost model over ``perstore`` or ``knob`` features.

    Args:
        loss: ``"rank"`` (pairwise ranking, AutoTVM's default) or ``"reg"`` (squared error).
        features: ``"perstore"`` (works for any candidate, transfers across workloads) or
            ``"knob"`` (knob-space candidates of one workload; cheap).
        seed: seeds xgboost and the untrained scores.
        max_depth, eta, gamma, min_child_weight, subsample, reg_lambda, reg_alpha: xgboost's
            tree parameters (AutoTVM's values).
        num_boost_round: the most boosting rounds.
        early_stopping_rounds: rounds without gain in train-set ``a-recall@eval_k`` before
            stopping; ``None`` trains all ``num_boost_round`` rounds.
        eval_k: the ``k`` of that metric (AutoTVM passes its plan size).
        nthread: xgboost threads (``None``: all cores). One by default: the data is small
            (hundreds of rows), annealing predicts 128 rows at a time, where thread start-up
            costs more than it saves (14 ms against 0.2 ms a call on 2 busy cores), and the
            cores are better left to the measurer.
        base_model: a fitted ``XGBCostModel`` with the same ``features``, for transfer learning.

    Before it has learned anything the model returns the base model's scores when it has one,
    else seeded pseudo-random scores in ``[0, 1)``: a hash of the seed and the feature row, so a
    candidate keeps its score from call to call (a search over an untrained model does not chase
    noise), and two models with one seed agree.

    Example:
        >>> model = XGBCostModel(loss="rank", features="perstore", seed=0)
        >>> model.update(store.trials(run_id=1))  # doctest: +SKIP
        >>> model.predict([t.candidate for t in store.trials(run_id=2)])  # doctest: +SKIP
    """

    name = "xgb"

    def __init__(
        self,
        *,
        loss: str = "rank",
        features: str = "perstore",
        seed: int = 0,
        max_depth: int = 3,
        eta: float = 0.3,
        gamma: float = 1e-4,
        min_child_weight: float = 1.0,
        subsample: float = 1.0,
        reg_lambda: float = 1.0,
        reg_alpha: float = 0.0,
        num_boost_round: int = 8000,
        early_stopping_rounds: int | None = 20,
        eval_k: int = 64,
        nthread: int | None = 1,
        base_model: XGBCostModel | None = None,
    ):
        if loss not in LOSSES:
            raise ValueError(f"XGBCostModel: loss must be one of {LOSSES} (got {loss!r})")
        if features not in FEATURE_KINDS:
            raise ValueError(
                f"XGBCostModel: features must be one of {FEATURE_KINDS} (got {features!r})"
            )
        if num_boost_round < 1 or eval_k < 1:
            raise ValueError(
                "XGBCostModel: num_boost_round and eval_k must be at least 1 "
                f"(got {num_boost_round}, {eval_k})"
            )
        if base_model is not None and (
            not isinstance(base_model, XGBCostModel) or base_model.features != features
        ):
            raise ValueError(
                "XGBCostModel: base_model must be an XGBCostModel with the same features "
                f"({features!r}); got {base_model!r}"
            )
        self.loss = loss
        self.features: str = features
        self.seed = seed
        self.max_depth = max_depth
        self.eta = eta
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.num_boost_round = num_boost_round
        self.early_stopping_rounds = early_stopping_rounds
        self.eval_k = eval_k
        self.nthread = nthread
        self.base_model = base_model
        # Fitted state.
        self.booster_: Any = None
        self.n_features_ = 0
        self.num_samples_ = 0
        self.base_model_: XGBCostModel | None = None  # the base in effect (None once dropped)
        self.base_discount_ = 0.0
        self._extractor = FeatureExtractor(features)
        self._rows: list[np.ndarray] = []
        self._throughputs: list[float] = []
        self._groups: list[str] = []

    def __repr__(self) -> str:
        return f"XGBCostModel(loss={self.loss!r}, features={self.features!r}, seed={self.seed})"

    @property
    def is_fitted(self) -> bool:
        return self.booster_ is not None

    @property
    def score_scale(self) -> ScoreScale:
        # regression targets are throughputs normalised by the best measured one
        return ScoreScale.RELATIVE if self.loss == "reg" else ScoreScale.RANK

    # -- CostModel --------------------------------------------------------------------------
    def update(self, records: Sequence[TrialRecord]) -> None:
        """Add the trials (failures as throughput 0) and retrain from scratch on all of them.

        Training is skipped (the previous fit stays) while fewer than two trials are known or
        none succeeded, as AutoTVM does (``max(ys) > 1e-6``).
        """
        # An unchecked (MetaSchedule's) timing is neither a success nor a failure.
        records = [r for r in records if not r.status.is_inconclusive]
        if not records:
            return
        rows = self._extractor([r.candidate for r in records])
        for r, row in zip(records, rows, strict=True):
            # Trailing zeros are padding (or a column that is zero in every row, on which no
            # tree can split): dropping them keeps stored data small and changes no prediction.
            self._rows.append(np.trim_zeros(row, "b"))
            self._throughputs.append(throughput(r))
            self._groups.append(group_key(r.candidate))
        # Step 1. Labels: throughput / the best throughput of the same workload.
        y = np.asarray(self._throughputs)
        names = sorted(set(self._groups))
        gid = np.array([names.index(g) for g in self._groups])
        labels = np.zeros(len(y))
        for g in range(len(names)):
            sel = gid == g
            best = y[sel].max()
            if best > 0:
                labels[sel] = y[sel] / best
        if len(y) < 2 or labels.max() <= 1e-6:
            log.debug("XGBCostModel: %d trials, none successful: not training yet", len(y))
            return
        # Step 2. Train.
        self._train(pad_rows(self._rows), labels, gid)

    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        if not candidates:
            return np.zeros(0)
        return self.predict_rows(self._extractor(candidates))

    def fit_rows(
        self, x: np.ndarray, labels: np.ndarray, groups: np.ndarray | None = None
    ) -> None:
        """Train on feature rows and labels taken as given (no normalisation), forgetting any
        stored trials. Used to distil one model into another (``AutoTVMSearch`` transfer).
        """
        x = np.asarray(x, dtype=np.float64)
        labels = np.asarray(labels, dtype=np.float64)
        self._rows, self._throughputs, self._groups = [], [], []
        gid = np.zeros(len(labels), dtype=np.int64) if groups is None else np.asarray(groups)
        self._train(x, labels, gid)

    def predict_rows(self, x: np.ndarray) -> np.ndarray:
        """Scores for a matrix of feature rows of this model's kind (padded or cut to fit)."""
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        if self.booster_ is None:
            if self.base_model is not None:
                return self.base_model.predict_rows(x)
            return self._untrained_scores(x)
        x = fit_width(x, self.n_features_)
        margin = None
        if self.base_model_ is not None and self.base_discount_ > 0:
            margin = self.base_discount_ * self.base_model_.predict_rows(x)
        out = self.booster_.inplace_predict(x, predict_type="margin", base_margin=margin)
        return np.asarray(out, dtype=np.float64)

    # -- training ---------------------------------------------------------------------------
    def _train(self, x: np.ndarray, labels: np.ndarray, gid: np.ndarray) -> None:
        xgb = import_xgboost()
        n = len(labels)
        if n < 2 or np.ptp(labels) == 0:
            log.debug("XGBCostModel: %d samples with one label value: nothing to learn", n)
            return
        # xgboost wants each query group contiguous.
        order = np.argsort(gid, kind="stable")
        x, labels, gid = x[order], labels[order], gid[order]
        # Step 1. The base model's share (transfer learning), fading with the data seen.
        base, discount = self._base_share(n)
        dtrain = xgb.DMatrix(
            x,
            label=labels,
            qid=gid if self.loss == "rank" else None,
            base_margin=None if base is None else discount * base.predict_rows(x),
        )
        # Step 2. Early stopping on the train-set a-recall@k, averaged over query groups.
        bounds = np.flatnonzero(np.diff(gid)) + 1
        slices = [slice(a, b) for a, b in zip([0, *bounds], [*bounds, n], strict=True)]
        metric = f"a-recall@{self.eval_k}"

        def a_recall(preds: np.ndarray, _dtrain: Any) -> tuple[str, float]:
            return metric, float(
                np.mean([average_recall_curve(preds[s], labels[s], self.eval_k) for s in slices])
            )

        callbacks = []
        if self.early_stopping_rounds:
            callbacks.append(
                xgb.callback.EarlyStopping(
                    rounds=self.early_stopping_rounds,
                    metric_name=metric,
                    data_name="tr",
                    maximize=True,
                    save_best=False,  # AutoTVM keeps the trees grown after the best round
                )
            )
        booster = xgb.train(
            self._params(),
            dtrain,
            num_boost_round=self.num_boost_round,
            evals=[(dtrain, "tr")] if callbacks else (),
            custom_metric=a_recall if callbacks else None,
            callbacks=callbacks,
            verbose_eval=False,
        )
        self.booster_ = booster
        self.n_features_ = x.shape[1]
        self.num_samples_ = n
        self.base_model_ = base
        self.base_discount_ = discount
        log.debug(
            "XGBCostModel(%s, %s): %d samples, %d rounds, base discount %.3f",
            self.loss,
            self.features,
            n,
            booster.num_boosted_rounds(),
            discount,
        )

    def _base_share(self, n: int) -> tuple[Any, float]:
        """The base model and its discount after ``n`` samples (``None, 0`` once it faded
        below ``BASE_DROP_BELOW``, or without one)."""
        if self.base_model is None:
            return None, 0.0
        discount = 1.0 / 2.0 ** (n / BASE_HALFLIFE)
        if discount < BASE_DROP_BELOW:
            return None, 0.0
        return self.base_model, discount

    def _params(self) -> dict[str, Any]:
        """xgboost's training parameters from the model's settings."""
        params: dict[str, Any] = {
            "max_depth": self.max_depth,
            "eta": self.eta,
            "gamma": self.gamma,
            "min_child_weight": self.min_child_weight,
            "subsample": self.subsample,
            "lambda": self.reg_lambda,
            "alpha": self.reg_alpha,
            "objective": _OBJECTIVES[self.loss],
            "seed": self.seed,
            "verbosity": 0,
            "disable_default_eval_metric": 1,
        }
        if self.nthread is not None:
            params["nthread"] = self.nthread
        return params

    def _untrained_scores(self, x: np.ndarray) -> np.ndarray:
        out = np.empty(len(x))
        salt = str(self.seed).encode()
        for i, row in enumerate(x):
            digest = hashlib.blake2b(np.trim_zeros(row, "b").tobytes(), key=salt, digest_size=8)
            out[i] = int.from_bytes(digest.digest(), "little") / 2.0**64
        return out

    # -- persistence ------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the model as one JSON file (xgboost's own JSON booster inside)."""
        with open(path, "w") as f:
            json.dump(self._state(with_data=True), f)

    def load(self, path: str) -> None:
        """Restore a model saved with the same ``loss`` and ``features``.

        Raises:
            ValueError: not a saved XGBCostModel, or one of another loss or feature kind.
        """
        with open(path) as f:
            state = json.load(f)
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise ValueError(f"{path} is not a saved XGBCostModel")
        saved = state["settings"]
        if (saved["loss"], saved["features"]) != (self.loss, self.features):
            raise ValueError(
                f"{path} holds an XGBCostModel(loss={saved['loss']!r}, "
                f"features={saved['features']!r}); this one has loss={self.loss!r}, "
                f"features={self.features!r}"
            )
        self._restore(state)

    def _state(self, *, with_data: bool) -> dict[str, Any]:
        booster = None
        if self.booster_ is not None:
            booster = bytes(self.booster_.save_raw("json")).decode()
        state: dict[str, Any] = {
            "format": _FORMAT,
            "settings": self.settings(),
            "booster": booster,
            "n_features": self.n_features_,
            "num_samples": self.num_samples_,
            "base_discount": self.base_discount_,
            "base_model": None
            if self.base_model_ is None
            else self.base_model_._state(with_data=False),
        }
        if with_data:
            state["data"] = {
                "rows": [r.tolist() for r in self._rows],
                "throughputs": self._throughputs,
                "groups": self._groups,
            }
        return state

    def _restore(self, state: dict[str, Any]) -> None:
        self.booster_ = None
        if state["booster"] is not None:
            xgb = import_xgboost()
            self.booster_ = xgb.Booster()
            self.booster_.load_model(bytearray(state["booster"].encode()))
        self.n_features_ = int(state["n_features"])
        self.num_samples_ = int(state["num_samples"])
        self.base_discount_ = float(state["base_discount"])
        self.base_model_ = None
        if state["base_model"] is not None:
            self.base_model_ = XGBCostModel(**state["base_model"]["settings"])
            self.base_model_._restore(state["base_model"])
        data = state.get("data") or {"rows": [], "throughputs": [], "groups": []}
        self._rows = [np.asarray(r, dtype=np.float64) for r in data["rows"]]
        self._throughputs = [float(v) for v in data["throughputs"]]
        self._groups = [str(g) for g in data["groups"]]
