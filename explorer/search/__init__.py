"""Search strategies: one ask/tell interface, an explicit registry, ``make_strategy``.

What each strategy can be given besides its hyper-parameters (a start point, a cost model) is
declared by its class and read with ``capabilities(name)``; ``make_strategy`` refuses anything
else with one sentence naming the strategy and what it takes (``CapabilityError``).
"""

from __future__ import annotations

from typing import Any

from explorer._registry import Registry
from explorer.cost_models import COST_MODELS
from explorer.errors import CapabilityError
from explorer.search._autotvm import AutoTVMSearch
from explorer.search._base import Capabilities, SearchStrategy, is_object_setting
from explorer.search._baseline import baseline_candidate, baseline_trial, is_baseline
from explorer.search._droplet import DropletSearch, EvolutionaryDropletSearch
from explorer.search._evolutionary import EvolutionarySearch
from explorer.search._random import RandomSearch
from explorer.search._start import is_start, start_trial
from explorer.search._static import StaticSearch
from explorer.search._transfer import transfer_note
from explorer.search._value import ValueSearch

STRATEGIES: Registry[type[SearchStrategy], SearchStrategy] = Registry(
    "strategy",
    SearchStrategy,
    {
        "random": RandomSearch,
        "autotvm": AutoTVMSearch,
        "evolutionary": EvolutionarySearch,
        "droplet": DropletSearch,
        "evolutionary+droplet": EvolutionaryDropletSearch,
        "static": StaticSearch,
        "value": ValueSearch,
    },
)
"""Every strategy class by name (a read-only mapping; ``explorer._registry.Registry``)."""


def capabilities(strategy: str | SearchStrategy | type[SearchStrategy]) -> Capabilities:
    """What a strategy (a registered name, an instance or a class) can be given besides its
    hyper-parameters: whether it takes a start point, which cost models it runs with.

    Raises:
        UnknownPluginError: an unknown name (the message lists the valid ones).

    Example:
        >>> capabilities("droplet").start, capabilities("droplet").cost_models
        (True, ())
        >>> [name for name in STRATEGIES if capabilities(name).start]
        ['autotvm', 'evolutionary', 'droplet', 'evolutionary+droplet', 'value']
    """
    if isinstance(strategy, str):
        return STRATEGIES.factory(strategy).capabilities
    return strategy.capabilities


def prediction_sources() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The strategies that store a cost model's predictions with each trial (those declaring
    ``capabilities.cost_models``), and those that store none.

    Example:
        >>> prediction_sources()[1]
        ('random', 'droplet')
    """
    names = list(STRATEGIES)
    records = tuple(n for n in names if capabilities(n).takes_cost_model)
    return records, tuple(n for n in names if n not in records)


def check_capabilities(
    strategy: str, *, start: bool = False, cost_model: str | None = None, transfer: bool = False
) -> None:
    """Refuse a start point, a cost model or transfer learning that ``strategy`` cannot take,
    before anything is built (the command line calls this before it reads the start's file).

    Raises:
        UnknownPluginError: an unknown strategy or cost model name.
        CapabilityError: one sentence naming the strategy and what it takes.

    Example:
        >>> check_capabilities("autotvm", start=True, cost_model="xgb-reg")  # both fine
        >>> check_capabilities("random", start=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
          ...
        explorer.errors.CapabilityError: strategy 'random' cannot start ...; these can: ...
    """
    caps = capabilities(strategy)
    if start and not caps.start:
        able = [n for n in STRATEGIES if capabilities(n).start]
        raise CapabilityError(
            f"strategy {strategy!r} cannot start from a given schedule; "
            f"these can: {', '.join(able) or 'none'}"
        )
    if transfer and not caps.transfer:
        able = [n for n in STRATEGIES if capabilities(n).transfer]
        raise CapabilityError(
            f"strategy {strategy!r} cannot learn from other workloads' trials; "
            f"these can: {', '.join(able)}"
        )
    if cost_model is None:
        return
    COST_MODELS.factory(cost_model)  # an unknown name lists the valid ones
    if not caps.cost_models:
        able = [
            f"{n} ({', '.join(capabilities(n).cost_models)})"
            for n in STRATEGIES
            if capabilities(n).cost_models
        ]
        raise CapabilityError(
            f"strategy {strategy!r} uses no cost model (asked for {cost_model!r}); "
            f"these do: {'; '.join(able)}"
        )
    if cost_model not in caps.cost_models:
        takes = " or ".join(caps.cost_models)
        raise CapabilityError(
            f"strategy {strategy!r} runs with the cost model {takes}, not {cost_model!r}"
        )


def make_strategy(
    spec: str | SearchStrategy, /, *, cost_model: str | None = None, **kwargs: Any
) -> SearchStrategy:
    """An instance from a registered name and its hyper-parameters (or the instance itself,
    unchanged).

    Args:
        spec: a name in ``STRATEGIES``, or a ready instance (then no other argument).
        cost_model: the cost model to run with, one of ``capabilities(spec).cost_models``
            (default: the strategy's first); turned into the constructor arguments that select
            it (``cost_model="xgb-reg"`` is ``loss="reg"`` for ``autotvm``).
        **kwargs: the strategy's hyper-parameters; ``start=`` only for a strategy whose
            ``capabilities(spec).start`` is true, ``transfer_from=`` only for one whose
            ``capabilities(spec).transfer`` is.

    Raises:
        UnknownPluginError: the name (or the cost model's) is not registered.
        CapabilityError: a start, a cost model or transfer learning the strategy cannot take
            (a ``TypeError``).
        TypeError: a keyword that is not a parameter of the strategy (never silently dropped),
            or one that contradicts ``cost_model``.

    Example:
        >>> make_strategy("autotvm", cost_model="xgb-reg").loss
        'reg'
    """
    if isinstance(spec, str):
        check_capabilities(
            spec,
            start="start" in kwargs,
            cost_model=cost_model,
            transfer=kwargs.get("transfer_from") is not None,
        )
        if cost_model is not None:
            chosen = STRATEGIES.factory(spec).cost_model_arguments(cost_model)
            clash = sorted(k for k in chosen if k in kwargs and kwargs[k] != chosen[k])
            if clash:
                given = ", ".join(f"{k}={kwargs[k]!r}" for k in clash)
                means = ", ".join(f"{k}={chosen[k]!r}" for k in clash)
                raise TypeError(
                    f"make_strategy({spec!r}): cost_model={cost_model!r} means {means}, "
                    f"but {given} was given"
                )
            kwargs = {**kwargs, **chosen}
    elif cost_model is not None:
        kwargs = {**kwargs, "cost_model": cost_model}  # refused with the instance below
    return STRATEGIES.make(spec, **kwargs)


__all__ = [
    "STRATEGIES",
    "Capabilities",
    "RandomSearch",
    "SearchStrategy",
    "baseline_candidate",
    "baseline_trial",
    "capabilities",
    "check_capabilities",
    "is_baseline",
    "is_object_setting",
    "is_start",
    "make_strategy",
    "prediction_sources",
    "start_trial",
    "transfer_note",
]
