"""Schedule Explorer: build tensor programs, schedule them by hand or by search, and measure them.

The core library; it imports without any notebook package. The notebook UI lives in ``widgets``.
"""

# This file imports nothing when it runs (not even ``typing``): every public name below is loaded
# on first use. ``python -m explorer`` and the ``explorer`` command import this package before
# ``explorer.__main__`` can catch a Ctrl-C, so anything imported here was a window in which a
# Ctrl-C pressed on a busy machine printed a traceback instead of "interrupted" (seen once in a
# test run beside two CPU burners, in ``import typing``). TVM itself (about a second) is
# imported only by the commands that need it.
TYPE_CHECKING = False
if TYPE_CHECKING:
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

_LAZY = {
    "ExplorerError": "explorer.errors",
    "PrimitiveError": "explorer.errors",
    "SearchError": "explorer.errors",
    "StoreError": "explorer.errors",
    "TargetError": "explorer.errors",
    "UnknownPluginError": "explorer.errors",
    "WorkloadError": "explorer.errors",
    "MeasureStatus": "explorer.types",
    "Target": "explorer.target",
    "Workload": "explorer.workloads",
    "get_workload": "explorer.workloads",
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'explorer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


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
