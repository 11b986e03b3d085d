"""The user's cache folder: what the explorer can measure or compile again, kept to save time."""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/schedule-explorer``, or ``~/.cache/schedule-explorer`` without it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "schedule-explorer"
