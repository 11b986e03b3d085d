"""JAX, imported on first use, with the programs XLA compiles kept on disk between processes.

Compiling a network's Fisher Potential (its forward and backward passes) took XLA 11.8 s for the
CIFAR ResNet-18 at width 2 on a quiet 2-core AMD EPYC (Zen 3), and running it 0.1 s, so every
``explorer nas`` run, notebook and NAS tab paid the compile again for the networks it had seen
before. JAX's persistent compilation cache keeps them in ``$SCHEDULE_EXPLORER_JAX_CACHE``, else
``$XDG_CACHE_HOME/schedule-explorer/jax`` (``~/.cache`` without ``XDG_CACHE_HOME``): the same
network in a new process then took 3.8 s.
Where the user configured JAX's own cache (``JAX_COMPILATION_CACHE_DIR``), theirs is used.

The cache holds at most ``MAX_CACHE_BYTES``, the least recently used programs going first (a
network's are about 0.8 MB), with ``filelock`` (the ``nas`` extra) keeping each entry whole
while several processes read and write it; without ``filelock`` JAX cannot bound it, and it
grows. An entry that cannot be read (damaged, say) is compiled again, and one that cannot be
written is not kept: either costs time, never a result, so neither is reported.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import warnings
from pathlib import Path
from types import ModuleType

from explorer._cache import user_cache_dir
from explorer.extras import require

CACHE_ENV = "SCHEDULE_EXPLORER_JAX_CACHE"
MAX_CACHE_BYTES = 256 << 20


def jax_for(what: str) -> ModuleType:
    """``jax``, its compilation cache set up, or ``MissingExtraError`` naming ``what`` needs it."""
    jax = require("jax", what, "nas")
    _use_cache(jax)
    return jax


def cache_dir() -> Path:
    """Where compiled programs are kept: ``$SCHEDULE_EXPLORER_JAX_CACHE``, else the user's
    cache dir."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return user_cache_dir() / "jax"


@functools.cache
def _use_cache(jax: ModuleType) -> None:
    if jax.config.jax_compilation_cache_dir:  # the user's own
        return
    jax.config.update("jax_compilation_cache_dir", str(cache_dir()))
    # every program of a network, its small ones too: a stem alone compiles in about a second
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if importlib.util.find_spec("filelock") is not None:  # else JAX refuses a bound
        jax.config.update("jax_compilation_cache_max_size", MAX_CACHE_BYTES)
    for action in ("reading", "writing"):
        warnings.filterwarnings(
            "ignore", message=f"Error {action} persistent compilation cache entry"
        )
