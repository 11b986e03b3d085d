"""Measuring candidates: build a schedule, run it, check it, time it.

``MEASURERS`` maps names to implementations; ``make_measurer("local", config=...)`` builds one.

* ``LocalMeasurer``: this machine's CPU, kernels built and run in a persistent pool of worker
  processes, so a crashing, hanging or memory-hungry kernel never takes the caller down.
* ``RemoteMeasurer``: the devices of a TVM RPC tracker (``explorer.fleet``): built here, run
  and timed there, a device that goes away mid-batch retried on another.
* ``ReplayMeasurer``: answers from recorded results (offline tests of search strategies).
"""

from __future__ import annotations

from typing import Any

from explorer._registry import Registry
from explorer.core import Candidate, MeasureResult, fastest_round, trace_key
from explorer.measure._base import MeasureConfig, Measurer
from explorer.measure._confirm import confirm_best
from explorer.measure._local import LocalMeasurer
from explorer.measure._remote import RemoteMeasurer, TargetNotReported
from explorer.measure._replay import ReplayMeasurer
from explorer.measure._timing import CONFIRM_RATIO, keep_off_worker_cores
from explorer.types import CacheFlush

MEASURERS: Registry[type[Measurer], Measurer] = Registry(
    "measurer",
    Measurer,
    {"local": LocalMeasurer, "remote": RemoteMeasurer, "replay": ReplayMeasurer},
)
"""Every measurer by name (a read-only mapping; ``explorer._registry.Registry``)."""


def make_measurer(name_or_instance: str | Measurer, **kwargs: Any) -> Measurer:
    """A measurer from its registry name (plus constructor arguments), or the instance given.

    Raises:
        UnknownPluginError: ``name_or_instance`` is not in ``MEASURERS``.
        TypeError: an argument the measurer does not take, or arguments given with an instance.
    """
    return MEASURERS.make(name_or_instance, **kwargs)


__all__ = [
    "CONFIRM_RATIO",
    "keep_off_worker_cores",
    "MEASURERS",
    "CacheFlush",
    "Candidate",
    "LocalMeasurer",
    "MeasureConfig",
    "MeasureResult",
    "Measurer",
    "RemoteMeasurer",
    "ReplayMeasurer",
    "TargetNotReported",
    "confirm_best",
    "fastest_round",
    "make_measurer",
    "trace_key",
]
