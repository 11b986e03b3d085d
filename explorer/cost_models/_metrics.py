"""How well a cost model ranks candidates: pure functions of (predicted scores, latencies).

Conventions, shared by every function here:

* ``scores`` are predictions, **higher = faster** (the ``CostModel`` contract).
* ``latencies`` are measured seconds; a failed trial is ``inf`` (or NaN, or any value <= 0),
  i.e. throughput 0. Failures take part in rank correlations as the slowest candidates, and
  never count among the true top-k.
* Ties among scores are broken by position (a stable sort), so results are deterministic.
* A metric that is undefined for the input (no successful trial, fewer than two candidates, a
  constant input to a correlation) is ``nan``, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from explorer.core import Candidate, TrialRecord
from explorer.cost_models._base import CostModel

Values = Sequence[float] | np.ndarray
"""Scores or latencies: a list of floats or a 1-D NumPy array."""


def throughputs(latencies: Values) -> NDArray[np.float64]:
    """``1 / latency``, with 0 for failures (``inf``, NaN or non-positive latencies)."""
    lat = np.asarray(latencies, dtype=np.float64)
    ok = np.isfinite(lat) & (lat > 0)
    out = np.zeros(lat.shape)
    out[ok] = 1.0 / lat[ok]
    return out


def _check(scores: Values, latencies: Values) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    s = np.asarray(scores, dtype=np.float64)
    t = throughputs(latencies)
    if s.shape != t.shape or s.ndim != 1:
        raise ValueError(
            f"scores and latencies must be 1-D and of equal length (got {s.shape}, {t.shape})"
        )
    return s, t


def _correlation(fn: Callable[..., Any], scores: Values, latencies: Values) -> float:
    s, t = _check(scores, latencies)
    if len(s) < 2 or np.ptp(s) == 0 or np.ptp(t) == 0:
        return math.nan
    return float(fn(s, t)[0])


def spearman(scores: Values, latencies: Values) -> float:
    """Spearman's rank correlation between predicted scores and measured throughputs."""
    # scipy.stats takes about a second to import: every `explorer` command would pay it
    from scipy import stats

    return _correlation(stats.spearmanr, scores, latencies)


def kendall(scores: Values, latencies: Values) -> float:
    """Kendall's tau-b between predicted scores and measured throughputs."""
    from scipy import stats  # imported on first use (see `spearman`)

    return _correlation(stats.kendalltau, scores, latencies)


def _predicted_top(s: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-s, kind="stable")[:k]


def top_k_recall(scores: Values, latencies: Values, k: int) -> float:
    """The fraction of the true top-k found among the predicted top-k.

    The true top-k are the ``min(k, #successes)`` fastest successful candidates; the predicted
    top-k are the ``k`` highest scores. ``nan`` when nothing succeeded.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1 (got {k})")
    s, t = _check(scores, latencies)
    num_ok = int(np.count_nonzero(t > 0))
    if num_ok == 0:
        return math.nan
    true_top = set(np.argsort(-t, kind="stable")[: min(k, num_ok)].tolist())
    hits = len(true_top & set(_predicted_top(s, k).tolist()))
    return hits / len(true_top)


def top_k_score(scores: Values, latencies: Values, k: int) -> float:
    """TenSet's top-k score: the best true throughput among the predicted top-k, divided by the
    best true throughput overall (1.0: measuring the model's k favourites finds the optimum).
    ``nan`` when nothing succeeded; 0 when the predicted top-k all failed."""
    if k < 1:
        raise ValueError(f"k must be at least 1 (got {k})")
    s, t = _check(scores, latencies)
    best = float(t.max(initial=0.0))
    if best <= 0:
        return math.nan
    return float(t[_predicted_top(s, k)].max()) / best


def average_recall_curve(scores: Values, labels: Values, k: int) -> float:
    """AutoTVM's ``a-recall@k``: the mean over ``i < k`` of the top-(i+1) recall, where the truth
    is ``labels`` (higher = better). XGBCostModel's early-stopping metric.

    AutoTVM's ``recall_curve`` counts ``trial_ranks[:i] <= i`` (the first ``i`` picks, not
    ``i + 1``); here position ``i`` counts the first ``i + 1`` picks, so a perfect ranking
    scores exactly 1.
    """
    labels = np.asarray(labels, dtype=np.float64)
    n = len(labels)
    m = min(k, n)
    if m == 0:
        return math.nan
    true_rank = np.empty(n, dtype=np.int64)
    true_rank[np.argsort(-labels, kind="stable")] = np.arange(n)
    picked = true_rank[_predicted_top(np.asarray(scores), m)]  # true ranks of the picks
    pos = np.arange(m)
    found = (picked[None, :] <= pos[:, None]) & (pos[None, :] <= pos[:, None])
    return float(np.mean(found.sum(axis=1) / (pos + 1)))


@dataclass(frozen=True)
class CostModelAccuracy:
    """How a model trained on one set of trials ranks another (see the module conventions)."""

    num_train: int
    num_test: int
    k: int
    spearman: float
    kendall: float
    top_k_recall: float
    top_k_score: float


def record_latency(record: TrialRecord) -> float:
    """A trial's median latency, or ``inf`` when it failed."""
    secs = record.median_secs
    return float(secs) if record.result.is_ok and secs and secs > 0 else math.inf


def evaluate(
    model: CostModel,
    train_records: Sequence[TrialRecord],
    test_records: Sequence[TrialRecord],
    *,
    k: int = 10,
) -> CostModelAccuracy:
    """Train ``model`` on ``train_records`` (via ``update``: the model is modified), predict
    ``test_records`` and score the ranking. Meant for trials of one workload: latencies of
    different workloads are not comparable. Inconclusive test records (unchecked timings)
    are left out: they are neither fast nor failed.
    """
    model.update(list(train_records))
    test_records = [r for r in test_records if not r.status.is_inconclusive]
    cands: list[Candidate] = [r.candidate for r in test_records]
    scores = np.asarray(model.predict(cands), dtype=np.float64) if cands else np.zeros(0)
    lat = [record_latency(r) for r in test_records]
    return CostModelAccuracy(
        num_train=len(train_records),
        num_test=len(test_records),
        k=k,
        spearman=spearman(scores, lat),
        kendall=kendall(scores, lat),
        top_k_recall=top_k_recall(scores, lat, k) if cands else math.nan,
        top_k_score=top_k_score(scores, lat, k) if cands else math.nan,
    )
