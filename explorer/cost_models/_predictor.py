"""``Predictor``: every cost model's view of one schedule, trained on the store's records.

What the notebook's cost panel shows after each edit, and what any other front end (the CLI, a
web page) can ask: for each model a score, a latency when the model's scale gives one, and how
many of the workload's measured correct schedules it predicts this one beats. The learned
models are trained on the store's records of the candidate's workload and target, and trained
again only when records were added since (the store's subscription says so): an edit alone never
retrains.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from explorer.core import Candidate, RecordStore, TrialRecord
from explorer.cost_models._base import CostModel, ScoreScale
from explorer.target import Target
from explorer.workloads import Workload

log = logging.getLogger(__name__)

MODELS = ("static", "xgb-rank", "xgb-reg", "metaschedule-xgb")
"""The models a ``Predictor`` asks by default, in display order."""

MIN_RECORDS = 2
"""A learned model compares schedules: it needs two measured ones, one of them correct."""


@dataclass(frozen=True)
class Prediction:
    """One model's view of a candidate.

    Attributes:
        model: the cost model's name.
        score: its raw score (higher = faster), ``None`` when it could not predict.
        latency_secs: the predicted latency when the model's scale gives one (``ScoreScale``).
        beats: ``(k, n)``: predicted faster than ``k`` of the ``n`` measured correct schedules.
        note: why there is no prediction (untrained, failed), or what it was trained on.
    """

    model: str
    score: float | None
    latency_secs: float | None = None
    beats: tuple[int, int] | None = None
    note: str = ""


@dataclass(frozen=True)
class _Learned:
    model: CostModel | None
    num_records: int
    best_secs: float | None  # the fastest correct measurement it was trained on
    stored_scores: np.ndarray  # its scores of those correct measurements
    note: str


class Predictor:
    """Predicts candidates with several cost models; learned ones train on ``store``.

    Thread-safe: one prediction at a time (a caller's second call waits).

    Args:
        store: where the measured records are (its subscription marks a workload stale).
        models: names in ``COST_MODELS`` (``make_model`` builds them).
        make_model: the registry's factory (``make_cost_model``).

    Attributes:
        num_fits: how many times a learned model was trained.

    Example:
        >>> from explorer.session import ScheduleSession
        >>> from explorer.storage import get_store
        >>> from explorer.workloads import get_workload
        >>> session = ScheduleSession(get_workload("matmul", M=64, N=64, K=64))
        >>> predictor = Predictor(get_store(":memory:"), models=("static", "xgb-rank"))
        >>> p = predictor.predict(session.candidate())
        >>> p["static"].latency_secs > 0, p["xgb-rank"].score, p["xgb-rank"].note[:21]
        (True, None, 'untrained: needs 2 me')
        >>> predictor.close()
    """

    def __init__(
        self,
        store: RecordStore,
        *,
        models: Sequence[str] = MODELS,
        make_model: Callable[[str], CostModel] | None = None,
    ) -> None:
        if make_model is None:
            from explorer.cost_models._registry import make_cost_model

            make_model = make_cost_model
        self.store = store
        self.models = tuple(models)
        self.num_fits = 0
        self._make = make_model
        self._fixed: dict[str, CostModel] = {}  # models that need no training, built once
        self._learned: dict[tuple[str, str], _Learned] = {}
        self._records: dict[str, list[TrialRecord]] = {}
        self._stale: set[str] = set()  # workload|target keys with records newer than the cache
        self._lock = threading.Lock()  # _stale (written by the store's writer thread)
        self._predicting = threading.Lock()  # the caches; one prediction at a time
        self._unsubscribe = store.subscribe(self._on_records)

    def predict(self, candidate: Candidate) -> dict[str, Prediction]:
        """Every model's prediction for ``candidate``; trains learned models when needed.

        A failing model is reported in its ``note``, never raised.
        """
        out: dict[str, Prediction] = {}
        with self._predicting:
            for name in self.models:
                try:
                    out[name] = self._predict_one(name, candidate)
                except Exception as exc:
                    log.exception("cost model %s failed", name)
                    out[name] = Prediction(name, None, note=f"failed: {exc}")
        return out

    def close(self) -> None:
        self._unsubscribe()

    # -- one model ------------------------------------------------------------------------------
    def _predict_one(self, name: str, candidate: Candidate) -> Prediction:
        fixed = self._fixed.get(name)
        if fixed is None:
            model = self._make(name)
            if model.is_fitted:  # analytical: no training, the same instance every time
                self._fixed[name] = fixed = model
        if fixed is not None:
            return self._analytical(name, fixed, candidate)
        learned = self._trained(name, candidate.workload, candidate.target)
        if learned.model is None:
            return Prediction(name, None, note=learned.note)
        score = float(learned.model.predict([candidate])[0])
        latency = None
        if learned.model.score_scale is ScoreScale.RELATIVE and learned.best_secs and score > 0:
            latency = learned.best_secs / score
        beats = (int((learned.stored_scores < score).sum()), len(learned.stored_scores))
        return Prediction(name, score, latency_secs=latency, beats=beats, note=learned.note)

    @staticmethod
    def _analytical(name: str, model: CostModel, candidate: Candidate) -> Prediction:
        score = float(model.predict([candidate])[0])
        if model.score_scale is not ScoreScale.GFLOPS:
            return Prediction(name, score)
        if score <= 0:
            return Prediction(name, score, note="TVM cannot build this schedule")
        return Prediction(name, score, latency_secs=candidate.workload.flops() / (score * 1e9))

    def _trained(self, name: str, workload: Workload, target: Target) -> _Learned:
        """The model trained on this workload's records; retrained when they changed."""
        key = f"{workload.key()}|{target.key()}"
        with self._lock:
            stale = key in self._stale or key not in self._records
            self._stale.discard(key)
        if stale:
            self._records[key] = self.store.trials(workload=workload, target=target)
        records = self._records[key]
        cached = self._learned.get((name, key))
        if cached is not None and cached.num_records == len(records):
            return cached
        self._learned[(name, key)] = learned = self._train(name, records)
        return learned

    def _train(self, name: str, records: list[TrialRecord]) -> _Learned:
        ok = [r for r in records if r.result.is_ok and r.median_secs]
        empty = np.zeros(0)
        if len(records) < MIN_RECORDS or not ok:
            return _Learned(
                None,
                len(records),
                None,
                empty,
                f"untrained: needs {MIN_RECORDS} measured schedules of this workload on this "
                f"target, one of them correct (the store has {len(records)}, {len(ok)} correct)",
            )
        model = self._make(name)
        model.update(records)
        self.num_fits += 1
        if not model.is_fitted:
            return _Learned(None, len(records), None, empty, "untrained: too few correct ones")
        scores = np.asarray(model.predict([r.candidate for r in ok]), dtype=np.float64)
        best = min(float(r.median_secs or 0) for r in ok)
        # Every measurement, a failed or wrong one too (a model learns what fails) and each
        # re-timing: more than the correct timings the cost panel ranks a schedule among.
        wrong = len(records) - len(ok)
        note = f"trained on {len(records)} measurement(s) of this workload: {len(ok)} correct" + (
            f", {wrong} failed or wrong" if wrong else ""
        )
        return _Learned(model, len(records), best, scores, note)

    def _on_records(self, records: list[TrialRecord]) -> None:
        with self._lock:
            for r in records:
                self._stale.add(f"{r.candidate.workload.key()}|{r.candidate.target.key()}")
