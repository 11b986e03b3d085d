"""How well each cost model's predictions ranked the trials that were then measured."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from explorer.analysis._table import TrialTable, as_table, pick_rows
from explorer.core import TrialRecord, TrialRow
from explorer.cost_models import kendall, spearman

MIN_POINTS = 5
"""Rank correlations of fewer points are not reported: three presses of Measure gave a
"Spearman 1.00" that said nothing about the model."""


@dataclass(frozen=True, slots=True)
class ModelPredictions:
    """One cost model's predictions against the measurements.

    The correlations use every successful trial the model predicted (failed trials have no
    latency to rank, so they are counted in ``num_failed`` and left out). Positive is good:
    scores are "higher = faster", correlated with measured throughput. The point columns hold
    at most ``max_points`` of those trials (the fastest always among them).

    Attributes:
        model: the cost model's name (a key of ``TrialRecord.predicted``).
        spearman, kendall: rank correlations (NaN below ``MIN_POINTS`` points).
        num_points: successful trials with a prediction (all of them, not only those shipped).
        num_failed: failed trials the model had predicted.
        trial_ids, predicted, predicted_rank, latency_ms: the shipped points; ``predicted_rank``
            is the score's percentile among all ``num_points`` (1 = predicted fastest), which
            puts models with different score scales on one axis.
    """

    model: str
    spearman: float
    kendall: float
    num_points: int
    num_failed: int
    trial_ids: tuple[int, ...]
    predicted: tuple[float, ...]
    predicted_rank: tuple[float, ...]
    latency_ms: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class PredictedVsMeasuredInfo:
    """Per cost model, predictions against measured latencies.

    ``num_trials`` trials were read (re-measurements not counted: ``num_remeasured``),
    ``num_failed`` of them failed, and ``num_unpredicted`` had no prediction from any model
    (random search, measurements made before a model could predict). A re-measurement's own
    prediction, if any, is used like a trial's.
    """

    models: tuple[ModelPredictions, ...]
    num_trials: int
    num_failed: int
    num_unpredicted: int
    max_points: int
    num_remeasured: int = 0

    @property
    def num_points(self) -> int:
        """Points a plot of this info ships."""
        return sum(len(m.trial_ids) for m in self.models)

    @property
    def num_predicted(self) -> int:
        """Trials with a prediction from at least one model."""
        return self.num_trials - self.num_unpredicted


def predicted_vs_measured_info(
    records: Iterable[TrialRecord | TrialRow] | TrialTable, *, max_points: int = 2000
) -> PredictedVsMeasuredInfo:
    """Pair each model's predictions with the measured latencies, with rank correlations.

    Args:
        records: trials (of one workload: latencies of different workloads do not compare),
            as records, rows or a ``TrialTable``.
        max_points: the most points kept per model for plotting; correlations use them all.

    Example:
        >>> info = predicted_vs_measured_info(store.trials(workload=w))  # doctest: +SKIP
        >>> [(m.model, round(m.spearman, 2)) for m in info.models]  # doctest: +SKIP
        [('xgb-rank', 0.71)]
    """
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1 (got {max_points})")
    table = as_table(records)
    ok = table.is_ok
    any_prediction = np.zeros(len(table), dtype=bool)
    models = []
    for name, scores in table.predicted.items():
        has = ~np.isnan(scores)
        any_prediction |= has
        rows = np.flatnonzero(has & ok)
        s, lat = scores[rows], table.latency_secs[rows]
        rank = _rankdata(s) / len(s) if len(s) else np.zeros(0)
        shown = pick_rows(lat, max_points)
        models.append(
            ModelPredictions(
                model=name,
                spearman=spearman(s, lat) if len(s) >= MIN_POINTS else math.nan,
                kendall=kendall(s, lat) if len(s) >= MIN_POINTS else math.nan,
                num_points=len(rows),
                num_failed=int(np.count_nonzero(has & ~ok & ~table.is_inconclusive)),
                trial_ids=tuple(int(i) for i in table.ids[rows[shown]]),
                predicted=tuple(float(v) for v in s[shown]),
                predicted_rank=tuple(float(v) for v in rank[shown]),
                latency_ms=tuple(float(v) * 1e3 for v in lat[shown]),
            )
        )
    return PredictedVsMeasuredInfo(
        models=tuple(models),
        num_trials=table.num_trials,
        num_failed=table.num_failed,
        num_unpredicted=int(np.count_nonzero(~any_prediction & ~table.is_remeasure)),
        max_points=max_points,
        num_remeasured=table.num_remeasured,
    )


def _rankdata(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties averaged (scipy.stats, imported on first use: it takes about a second)."""
    from scipy import stats

    return np.asarray(stats.rankdata(values), dtype=float)
