"""The UI packages are optional extras: fail on first use with an install hint, not on import."""

from __future__ import annotations

import importlib
from types import ModuleType

_HINT = (
    "the notebook explorer needs the 'lab' extras (ipywidgets, plotly, anywidget): "
    "pip install -e '.[lab]'  (or run `make lab`, which installs them)"
)


def require(module: str) -> ModuleType:
    """Import ``module`` or raise ``ImportError`` naming the missing extra."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} is missing: {_HINT}") from exc
