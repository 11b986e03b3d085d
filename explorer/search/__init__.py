"""Search strategies: one ask/tell interface, an explicit registry, ``make_strategy``."""

from __future__ import annotations

import inspect
from typing import Any

from explorer.errors import UnknownPluginError
from explorer.search._autotvm import AutoTVMSearch
from explorer.search._base import SearchStrategy
from explorer.search._droplet import DropletSearch, EvolutionaryDropletSearch
from explorer.search._evolutionary import EvolutionarySearch
from explorer.search._random import RandomSearch
from explorer.search._static import StaticSearch
from explorer.search._value import ValueSearch

STRATEGIES: dict[str, type[SearchStrategy]] = {
    "random": RandomSearch,
    "autotvm": AutoTVMSearch,
    "evolutionary": EvolutionarySearch,
    "droplet": DropletSearch,
    "evolutionary+droplet": EvolutionaryDropletSearch,
    "static": StaticSearch,
    "value": ValueSearch,
}


def make_strategy(spec: str | SearchStrategy, **kwargs: Any) -> SearchStrategy:
    """An instance from a registered name (or the instance itself, unchanged).

    Raises:
        UnknownPluginError: the name is not registered.
        TypeError: a keyword is not a parameter of the strategy (never silently dropped).
    """
    if isinstance(spec, SearchStrategy):
        if kwargs:
            raise TypeError("keyword arguments are only accepted with a strategy name")
        return spec
    try:
        cls = STRATEGIES[spec]
    except KeyError:
        raise UnknownPluginError("strategy", spec, STRATEGIES) from None
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise TypeError(
            f"strategy {spec!r} has no parameter(s) {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(accepted)) or '(none)'}"
        )
    return cls(**kwargs)


__all__ = ["STRATEGIES", "RandomSearch", "SearchStrategy", "make_strategy"]
