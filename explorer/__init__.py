"""Schedule Explorer: build tensor programs, schedule them by hand or by search, and measure them.

The core library; it imports without any notebook package. The notebook UI lives in ``widgets``.
"""

from __future__ import annotations

import importlib
from typing import Any

from explorer.errors import (
    ExplorerError,
    PrimitiveError,
    SearchError,
    StoreError,
    TargetError,
    UnknownPluginError,
    WorkloadError,
)
from explorer.types import MeasureStatus

# Imported on first use: they import TVM (about a second), and `explorer` itself must stay light
# so that the command line can catch a Ctrl-C pressed while TVM is still loading.
_LAZY = {
    "Target": "explorer.target",
    "Workload": "explorer.workloads",
    "get_workload": "explorer.workloads",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'explorer' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


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
