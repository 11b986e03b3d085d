"""Shared handling of rank-polymorphic families whose shape is given as ``D0``, ``D1``, ...

Parameters are a fixed list (a UI builds one picker per parameter), so a family that accepts
several ranks declares the largest number of dimensions and a rank parameter; dimensions past the
rank must stay at 1, so that two workloads that compute the same thing have the same key.
"""

from __future__ import annotations

from explorer.errors import WorkloadError
from explorer.workloads._base import Params, ShapeParam

MAX_DIM = 1 << 28  # the element-count limit (check_elements) is the real bound


def dim_params(defaults: tuple[int, ...], what: str = "input") -> tuple[ShapeParam, ...]:
    """``D0``, ``D1``, ... with the given defaults."""
    return tuple(
        ShapeParam(f"D{i}", d, max=MAX_DIM, help=f"extent of {what} axis {i} (1 if unused)")
        for i, d in enumerate(defaults)
    )


def dims(family: str, p: Params, ndim: int, rank_param: str) -> tuple[int, ...]:
    """The first ``ndim`` dimensions; raises ``WorkloadError`` if a later one is not 1."""
    n_declared = sum(1 for k in p if k.startswith("D") and k[1:].isdigit())
    for i in range(ndim, n_declared):
        if p[f"D{i}"] != 1:
            raise WorkloadError(
                f"{family}: parameter 'D{i}' must be 1 for a {ndim}-D input "
                f"({rank_param}={p[rank_param]!r}; got D{i}={p[f'D{i}']})"
            )
    return tuple(p[f"D{i}"] for i in range(ndim))
