"""Measuring candidates: build a schedule, run it, check it, time it.

``MEASURERS`` maps names to implementations; ``make_measurer("local", config=...)`` builds one.

* ``LocalMeasurer``: this machine's CPU, kernels built and run in a persistent pool of worker
  processes, so a crashing, hanging or memory-hungry kernel never takes the caller down.
* ``ReplayMeasurer``: answers from recorded results (offline tests of search strategies).
"""

from __future__ import annotations

import inspect
from typing import Any

from explorer.errors import UnknownPluginError
from explorer.measure._base import Candidate, MeasureConfig, Measurer, MeasureResult
from explorer.measure._confirm import confirm_best
from explorer.measure._local import LocalMeasurer
from explorer.measure._replay import ReplayMeasurer, trace_key

MEASURERS: dict[str, type[Measurer]] = {"local": LocalMeasurer, "replay": ReplayMeasurer}
"""Every measurer by name."""


def make_measurer(name_or_instance: str | Measurer, **kwargs: Any) -> Measurer:
    """A measurer from its registry name (plus constructor arguments), or the instance given.

    Raises:
        UnknownPluginError: ``name_or_instance`` is not in ``MEASURERS``.
        TypeError: an argument the measurer does not take, or arguments given with an instance.
    """
    if isinstance(name_or_instance, Measurer):
        if kwargs:
            raise TypeError(
                f"make_measurer: arguments {sorted(kwargs)} given with a ready "
                f"{type(name_or_instance).__name__} instance"
            )
        return name_or_instance
    if not isinstance(name_or_instance, str):
        raise TypeError(
            f"make_measurer takes a name or a Measurer (got {type(name_or_instance).__name__})"
        )
    try:
        cls = MEASURERS[name_or_instance]
    except KeyError:
        raise UnknownPluginError("measurer", name_or_instance, MEASURERS) from None
    params = inspect.signature(cls).parameters
    accepted = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise TypeError(
            f"make_measurer({name_or_instance!r}): unknown argument(s) {', '.join(unknown)}; "
            f"valid: {', '.join(accepted)}"
        )
    return cls(**kwargs)


__all__ = [
    "MEASURERS",
    "Candidate",
    "LocalMeasurer",
    "MeasureConfig",
    "MeasureResult",
    "Measurer",
    "ReplayMeasurer",
    "confirm_best",
    "make_measurer",
    "trace_key",
]
