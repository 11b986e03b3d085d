"""Layer normalisation over the last axis of a 2-D input, with learned gamma and beta.

Stages: ``mean`` and ``var`` (two-pass, the numerically safe order), ``rstd`` = 1/sqrt(var + eps)
once per row, then ``layer_norm``. Reductions accumulate in the element type, as the TE is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.workloads._base import (
    OperatorFamily,
    Params,
    ShapeParam,
    check_elements,
    dtype_param,
)

te, tirx = _tvm.te, _tvm.tirx


def _build(p: Params) -> list[Any]:
    M, N, dtype = p["M"], p["N"], p["dtype"]
    X = te.placeholder((M, N), dtype, name="X")
    gamma = te.placeholder((N,), dtype, name="gamma")
    beta = te.placeholder((N,), dtype, name="beta")
    inv_n = tirx.const(1.0 / N, dtype)
    eps = tirx.const(p["eps"], dtype)
    k1 = te.reduce_axis((0, N), name="k1")
    k2 = te.reduce_axis((0, N), name="k2")
    mean = te.compute((M,), lambda i: te.sum(X[i, k1] * inv_n, axis=k1), name="mean")

    def _sq_dev(i: Any, k: Any) -> Any:
        d = X[i, k] - mean[i]
        return d * d * inv_n

    var = te.compute((M,), lambda i: te.sum(_sq_dev(i, k2), axis=k2), name="var")
    rstd = te.compute((M,), lambda i: te.rsqrt(var[i] + eps), name="rstd")
    Y = te.compute(
        (M, N),
        lambda i, j: (X[i, j] - mean[i]) * rstd[i] * gamma[j] + beta[j],
        name="layer_norm",
    )
    return [X, gamma, beta, Y]


def _validate(p: Params) -> None:
    check_elements("layer_norm", "X[M, N]", (p["M"], p["N"]))


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    x, gamma, beta = inputs
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return np.asarray((x - mean) / np.sqrt(var + p["eps"]) * gamma + beta)


LAYER_NORM = OperatorFamily(
    name="layer_norm",
    description="Y[i, j] = (X[i, j] - mean_i) / sqrt(var_i + eps) * gamma[j] + beta[j]",
    params=(
        ShapeParam("M", 128, max=1 << 20, help="rows (tokens), normalised independently"),
        ShapeParam("N", 768, max=1 << 20, help="features: the normalised axis"),
        ShapeParam("eps", 1e-5, kind="float", min=0, max=1, help="added to the variance"),
        dtype_param(),
    ),
    build=_build,
    # mean: mul + add; var: sub, mul, mul, add; out: sub, mul, mul, add (per element);
    # rstd: add + rsqrt per row.
    flops=lambda p: 12 * p["M"] * p["N"] + 2 * p["M"],
    reference=_reference,
    validate=_validate,
    presets={"layer_norm_512x768": {"M": 512, "N": 768}},
)
