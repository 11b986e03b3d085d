"""Every cost model by name (its own module: ``Predictor`` makes models by name, and the package
imports ``Predictor``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from explorer._registry import Registry
from explorer.cost_models._base import CostModel
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
