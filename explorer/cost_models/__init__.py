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
import inspect
from collections.abc import Callable
from typing import Any

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
from explorer.errors import UnknownPluginError

COST_MODELS: dict[str, Callable[..., CostModel]] = {
    "xgb-rank": functools.partial(XGBCostModel, loss="rank"),
    "xgb-reg": functools.partial(XGBCostModel, loss="reg"),
    "metaschedule-xgb": MetaScheduleXGBCostModel,
    "static": StaticCostModel,
    "value": ValueModel,
}
"""Every cost model by name: a class, or a ``functools.partial`` of one that fixes arguments."""


def make_cost_model(name_or_instance: str | CostModel, **kwargs: Any) -> CostModel:
    """A cost model from its registry name (plus constructor arguments), or the instance given.

    Raises:
        UnknownPluginError: the name is not in ``COST_MODELS``.
        TypeError: an argument the model does not take (or one its name already fixes, like
            ``loss`` for ``"xgb-rank"``), or arguments given with an instance.
    """
    if isinstance(name_or_instance, CostModel):
        if kwargs:
            raise TypeError(
                f"make_cost_model: arguments {sorted(kwargs)} given with a ready "
                f"{type(name_or_instance).__name__} instance"
            )
        return name_or_instance
    if not isinstance(name_or_instance, str):
        kind = type(name_or_instance).__name__
        raise TypeError(f"make_cost_model takes a name or a CostModel (got {kind})")
    try:
        factory = COST_MODELS[name_or_instance]
    except KeyError:
        raise UnknownPluginError("cost model", name_or_instance, COST_MODELS) from None
    fixed = set(factory.keywords) if isinstance(factory, functools.partial) else set()
    params = inspect.signature(factory).parameters
    accepted = {
        n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    } - fixed
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise TypeError(
            f"make_cost_model({name_or_instance!r}): unknown argument(s) {', '.join(unknown)}"
            f"{' (fixed by the name)' if set(unknown) & fixed else ''}; "
            f"valid: {', '.join(sorted(accepted))}"
        )
    return factory(**kwargs)


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
