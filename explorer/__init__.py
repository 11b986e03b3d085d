"""Schedule Explorer: build tensor programs, schedule them by hand or by search, and measure them.

The core library; it imports without any notebook package. The notebook UI lives in ``widgets``.
"""

from __future__ import annotations

from explorer.errors import (
    ExplorerError,
    PrimitiveError,
    SearchError,
    StoreError,
    TargetError,
    UnknownPluginError,
    WorkloadError,
)
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload, get_workload

__version__ = "0.1.0"

__all__ = [
    "ExplorerError",
    "MeasureStatus",
    "PrimitiveError",
    "SearchError",
    "StoreError",
    "Target",
    "TargetError",
    "UnknownPluginError",
    "Workload",
    "WorkloadError",
    "__version__",
    "get_workload",
]
