"""MetaSchedule's own XGBoost cost model (``ms.cost_model.XGBModel``) behind our contract.

TVM's model is the Ansor/MetaSchedule design (``ms.cost_model.XGBModel``): per-store
``PerStoreFeature`` rows, a *pack-sum* squared-error objective (a program's score is the sum of
its statements' scores; labels are ``min cost / cost`` per workload, weighted by themselves),
max depth 10, eta 0.2, early stopping on the train-set pack-sum RMSE. It cannot do rank loss,
which is why ``XGBCostModel`` exists too; keeping both makes the loss an ablation.

The adapter only converts: our trials become ``ms.MeasureCandidate`` (the trace replayed on the
workload) plus ``ms.runner.RunnerResult`` (``run_secs`` of a success; a failure gets none and
MetaSchedule costs it 1e10 s, i.e. throughput ~0). Trials are grouped per workload because TVM
takes one ``TuneContext`` per call.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tarfile
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.core import Candidate, TrialRecord, trace_key
from explorer.cost_models._base import CostModel, ScoreScale
from explorer.space import DesignSpace

log = logging.getLogger(__name__)


class MetaScheduleXGBCostModel(CostModel):
    """TVM's ``XGBModel`` (PerStoreFeature, pack-sum regression) fed with our trials.

    Args:
        seed: xgboost's seed (TVM's default is 43).
        max_depth, eta, gamma, min_child_weight: TVM's ``XGBConfig`` (its defaults).
        num_warmup_samples: trials before the model predicts from its trees (TVM: 100; here 0,
            so an update is used at once).
        early_stopping_rounds: TVM's stopping patience on the train-set pack-sum RMSE.
        adaptive_training: TVM's shortcut of retraining only when the data grew by 20%.
        nthread: xgboost threads (``None``: all cores; one by default, as for
            ``XGBCostModel``: thread start-up dominates on small data and busy cores).

    Before its first fit (or while warming up) TVM's model draws from NumPy's *global* random
    state; this adapter returns seeded per-candidate pseudo-random scores instead, so a seed
    reproduces a search.
    """

    name = "metaschedule-xgb"

    def __init__(
        self,
        *,
        seed: int = 43,
        max_depth: int = 10,
        eta: float = 0.2,
        gamma: float = 0.001,
        min_child_weight: float = 0.0,
        num_warmup_samples: int = 0,
        early_stopping_rounds: int = 50,
        adaptive_training: bool = True,
        nthread: int | None = 1,
    ):
        self.seed = seed
        self.max_depth = max_depth
        self.eta = eta
        self.gamma = gamma
        self.min_child_weight = min_child_weight
        self.num_warmup_samples = num_warmup_samples
        self.early_stopping_rounds = early_stopping_rounds
        self.adaptive_training = adaptive_training
        self.nthread = nthread
        self.model_ = self._new_model()
        self._candidates: OrderedDict[str, Any] = OrderedDict()  # trace -> MeasureCandidate

    def _new_model(self) -> Any:
        ms = _tvm.ms
        config = ms.cost_model.xgb_model.XGBConfig(
            max_depth=self.max_depth,
            gamma=self.gamma,
            min_child_weight=self.min_child_weight,
            eta=self.eta,
            seed=self.seed,
            nthread=self.nthread or os.cpu_count() or 1,
        )
        return ms.cost_model.XGBModel(
            extractor=ms.feature_extractor.PerStoreFeature(),
            config=config,
            num_warmup_samples=self.num_warmup_samples,
            early_stopping_rounds=self.early_stopping_rounds,
            adaptive_training=self.adaptive_training,
        )

    @property
    def score_scale(self) -> ScoreScale:
        return ScoreScale.RELATIVE  # MetaSchedule normalises throughputs by the best one

    @property
    def is_fitted(self) -> bool:
        return self.model_.booster is not None and self.model_.data_size >= max(
            self.num_warmup_samples, 1
        )

    def update(self, records: Sequence[TrialRecord]) -> None:
        ms = _tvm.ms
        # An unchecked (MetaSchedule's) timing is neither a success nor a failure.
        records = [r for r in records if not r.status.is_inconclusive]
        for context, idx, cands in self._grouped([r.candidate for r in records]):
            results = []
            for i in idx:
                r = records[i]
                if r.result.is_ok and r.result.run_secs:
                    results.append(ms.runner.RunnerResult(list(r.result.run_secs), None))
                else:
                    results.append(ms.runner.RunnerResult(None, r.result.error_msg or "failed"))
            self.model_.update(context, cands, results)

    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        out = np.zeros(len(candidates))  # a trace that no longer replays scores 0 (slowest)
        if not self.is_fitted:
            return _seeded_scores(self.seed, candidates)
        for context, idx, cands in self._grouped(candidates):
            out[idx] = np.asarray(self.model_.predict(context, cands), dtype=np.float64)
        return out

    def save(self, path: str) -> None:
        """TVM's own tar (booster plus the cached features, so training can continue)."""
        with _quiet_xgboost_file_format():
            self.model_.save(path)

    def load(self, path: str) -> None:
        # TVM's load fails on a tar saved before any fit (no booster inside): start fresh.
        with tarfile.open(path) as tar:
            has_booster = any(os.path.basename(n) == "model.bin" for n in tar.getnames())
        self.model_ = self._new_model()
        if has_booster:
            with _quiet_xgboost_file_format():
                self.model_.load(path)

    def _grouped(
        self, candidates: Sequence[Candidate]
    ) -> Iterator[tuple[Any, list[int], list[Any]]]:
        """``(TuneContext, positions, MeasureCandidates)`` per workload, replayable ones only."""
        groups: dict[tuple[str, str], list[int]] = {}
        for i, c in enumerate(candidates):
            groups.setdefault((c.workload.key(), c.target.key()), []).append(i)
        for positions in groups.values():
            first = candidates[positions[0]]
            context = DesignSpace.of(first.workload, first.target).tune_context
            idx, cands = [], []
            for i in positions:
                mc = self._measure_candidate(candidates[i])
                if mc is not None:
                    idx.append(i)
                    cands.append(mc)
            if cands:
                yield context, idx, cands

    def _measure_candidate(self, c: Candidate) -> Any:
        ms = _tvm.ms
        key = f"{c.workload.key()}|{c.target.key()}|{trace_key(c.trace)}"
        if key in self._candidates:
            self._candidates.move_to_end(key)
            return self._candidates[key]
        mod = c.workload.mod()
        sch = _tvm.Schedule(mod)
        try:
            _tvm.apply_trace_json(c.trace, sch)
        except (_tvm.ScheduleError, ValueError, RuntimeError) as e:
            log.debug("metaschedule-xgb: trace of %s does not replay: %s", c.workload, e)
            mc = None
        else:
            mc = ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_prim_func(mod["main"]))
        self._candidates[key] = mc
        while len(self._candidates) > 4096:
            self._candidates.popitem(last=False)
        return mc


@contextlib.contextmanager
def _quiet_xgboost_file_format() -> Iterator[None]:
    # TVM names the booster file "model.bin"; xgboost warns that it guesses UBJSON from that
    # name, on every save and load. The guess is right both ways.
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*(UBJSON|Unknown file format)", category=UserWarning
        )
        yield


def _seeded_scores(seed: int, candidates: Sequence[Candidate]) -> np.ndarray:
    # Same idea as XGBCostModel's untrained scores: stable per candidate, reproducible per seed.
    out = np.empty(len(candidates))
    for i, c in enumerate(candidates):
        text = f"{c.workload.key()}|{trace_key(c.trace)}".encode()
        digest = hashlib.blake2b(text, key=str(seed).encode(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "little") / 2.0**64
    return out
