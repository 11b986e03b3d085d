"""The UI packages are optional extras: fail on first use with an install hint, not on import."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

from explorer import extras


def require(module: str) -> ModuleType:
    """Import ``module`` or raise ``MissingExtraError`` naming the ``lab`` extra."""
    return extras.require(module, "the notebook explorer", "lab")


def check_explorer() -> None:
    """Raise ``ImportError`` unless ``import explorer`` loads the explorer installed beside these
    widgets (another package of that name may come first on the import path)."""
    explorer = importlib.import_module("explorer")
    ours = Path(__file__).resolve().parent.parent / "explorer"
    found = Path(getattr(explorer, "__file__", None) or ".").resolve().parent
    if found != ours:
        raise ImportError(
            f"`import explorer` loaded {found}, not Schedule Explorer's explorer ({ours}): "
            "another package named `explorer` comes first on the import path; rename or "
            "uninstall it"
        )
