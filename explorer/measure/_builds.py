"""``BuildCache``: a measurer's latest builds, kept for the next timing of the same schedules.

A run's confirmation re-times its best candidates and its baseline side by side, right after
the search built and timed them. Building them again cost about a second of each small run
(a compile per candidate, and builder processes started for it), which is most of a small
NAS tuning or a model's chunk on a 2-core machine. The cache keeps the last ``capacity``
built libraries, keyed by everything their build reads (the build request but its output
path), and deletes each one it lets go.

Not thread-safe: ``LocalMeasurer`` uses it under its own lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BUILDS_KEPT = 64
"""Built libraries kept per measurer (tens to hundreds of KB each): a 64-trial run's builds
all stay until its confirmation."""


@dataclass(frozen=True)
class Build:
    """A built library on disk, with what its build reported."""

    path: str
    build_secs: float
    prepacked: Any  # the build's weight copies done apart from the kernel (``None``: none)


def build_key(request: Mapping[str, Any]) -> str:
    """What a build depends on: its request (workload, family module, target, trace), not
    where it writes."""
    inputs = {k: v for k, v in request.items() if k not in ("op", "path")}
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class BuildCache:
    """The latest ``capacity`` builds by ``build_key``; the least recently used goes first."""

    def __init__(self, capacity: int = BUILDS_KEPT) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be at least 0 (got {capacity})")
        self.capacity = capacity
        self._builds: OrderedDict[str, Build] = OrderedDict()

    def get(self, key: str) -> Build | None:
        """The kept build of ``key``, or ``None`` (never kept, let go, or its file is gone)."""
        build = self._builds.get(key)
        if build is None:
            return None
        if not os.path.exists(build.path):  # removed behind our back: build it again
            del self._builds[key]
            return None
        self._builds.move_to_end(key)
        return build

    def keep(self, key: str, build: Build) -> None:
        """Keep ``build`` (its file is the cache's from now on); let the oldest go past the
        capacity, deleting their files."""
        old = self._builds.pop(key, None)
        if old is not None and old.path != build.path:
            _remove(old.path)
        self._builds[key] = build
        while len(self._builds) > self.capacity:
            _, dropped = self._builds.popitem(last=False)
            _remove(dropped.path)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
