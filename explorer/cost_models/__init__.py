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

import functools
from collections.abc import Callable
from typing import Any

from explorer._registry import Registry
from explorer.cost_models._base import CostModel
from explorer.cost_models._features import FEATURE_KINDS, FeatureExtractor, KnobTable
from explorer.cost_models._metrics import (
    CostModelAccuracy,
    average_recall_curve,
    evaluate,
    kendall,
    spearman,
    top_k_recall,
    top_k_score,
)
from explorer.cost_models._ms_xgb import MetaScheduleXGBCostModel
from explorer.cost_models._static import StaticCostModel
from explorer.cost_models._value import ValueModel
from explorer.cost_models._xgb import XGBCostModel

COST_MODELS: Registry[Callable[..., CostModel], CostModel] = Registry(
    "cost model",
    CostModel,
    {
        "xgb-rank": functools.partial(XGBCostModel, loss="rank"),
        "xgb-reg": functools.partial(XGBCostModel, loss="reg"),
        "metaschedule-xgb": MetaScheduleXGBCostModel,
        "static": StaticCostModel,
        "value": ValueModel,
    },
)
"""Every cost model by name: a class, or a ``functools.partial`` of one that fixes arguments
(a read-only mapping; ``explorer._registry.Registry``)."""


def make_cost_model(name_or_instance: str | CostModel, **kwargs: Any) -> CostModel:
    """A cost model from its registry name (plus constructor arguments), or the instance given.

    Raises:
        UnknownPluginError: the name is not in ``COST_MODELS``.
        TypeError: an argument the model does not take (or one its name already fixes, like
            ``loss`` for ``"xgb-rank"``), or arguments given with an instance.
    """
    return COST_MODELS.make(name_or_instance, **kwargs)


__all__ = [
    "COST_MODELS",
    "FEATURE_KINDS",
    "CostModel",
    "CostModelAccuracy",
    "FeatureExtractor",
    "KnobTable",
    "MetaScheduleXGBCostModel",
    "XGBCostModel",
    "average_recall_curve",
    "evaluate",
    "kendall",
    "make_cost_model",
    "spearman",
    "top_k_recall",
    "top_k_score",
]
