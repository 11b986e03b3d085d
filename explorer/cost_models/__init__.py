"""Cost models: predict how fast a candidate runs without running it.

``COST_MODELS`` maps names to factories; ``make_cost_model("xgb-rank", seed=1)`` builds one.

* ``xgb-rank`` / ``xgb-reg``: AutoTVM's XGBoost model (``XGBCostModel``) with the pairwise rank
  loss or squared error, over MetaSchedule's PerStoreFeature (``features="knob"`` for knob
  values).
* ``metaschedule-xgb``: TVM's own ``XGBModel`` (pack-sum regression) behind the same contract.

``explorer.cost_models`` also holds the accuracy metrics (``spearman``, ``kendall``,
``top_k_recall``, ``top_k_score``, ``evaluate``).
"""

from __future__ import annotations

from explorer.cost_models._base import CostModel
from explorer.cost_models._features import FEATURE_KINDS, FeatureExtractor, KnobTable
from explorer.cost_models._metrics import (
    CostModelAccuracy,
    average_recall_curve,
    evaluate,
    kendall,
    record_latency,
    spearman,
    top_k_recall,
    top_k_score,
)
from explorer.cost_models._ms_xgb import MetaScheduleXGBCostModel
from explorer.cost_models._predictor import MODELS, Prediction, Predictor
from explorer.cost_models._registry import COST_MODELS, make_cost_model
from explorer.cost_models._static import StaticCostModel
from explorer.cost_models._value import ValueModel, samples_from_records
from explorer.cost_models._xgb import LOSSES, XGBCostModel, throughput

__all__ = [
    "COST_MODELS",
    "FEATURE_KINDS",
    "LOSSES",
    "MODELS",
    "CostModel",
    "CostModelAccuracy",
    "FeatureExtractor",
    "KnobTable",
    "MetaScheduleXGBCostModel",
    "Prediction",
    "Predictor",
    "StaticCostModel",
    "ValueModel",
    "XGBCostModel",
    "average_recall_curve",
    "evaluate",
    "kendall",
    "make_cost_model",
    "record_latency",
    "samples_from_records",
    "spearman",
    "throughput",
    "top_k_recall",
    "top_k_score",
]
