"""Softmax over the last axis of a 2-D input, in the four stages of a numerically safe softmax:
``maxval`` (row maximum), ``exp`` (exp(x - max)), ``expsum`` (row sum) and ``softmax``."""

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

te = _tvm.te


def _build(p: Params) -> list[Any]:
    M, N, dtype = p["M"], p["N"], p["dtype"]
    X = te.placeholder((M, N), dtype, name="X")
    k1 = te.reduce_axis((0, N), name="k1")
    k2 = te.reduce_axis((0, N), name="k2")
    mx = te.compute((M,), lambda i: te.max(X[i, k1], axis=k1), name="maxval")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="exp")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="expsum")
    Y = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="softmax")
    return [X, Y]


def _validate(p: Params) -> None:
    check_elements("softmax", "X[M, N]", (p["M"], p["N"]))


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    x = inputs[0]
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return np.asarray(e / e.sum(axis=-1, keepdims=True))


SOFTMAX = OperatorFamily(
    name="softmax",
    description="Y[i, j] = exp(X[i, j] - max_k X[i, k]) / sum_k exp(X[i, k] - max X[i, :])",
    params=(
        ShapeParam("M", 128, max=1 << 20, help="rows (independent softmaxes)"),
        ShapeParam("N", 1024, max=1 << 20, help="length of each row (the softmax axis)"),
        dtype_param(),
    ),
    build=_build,
    # Per element: a max, a subtraction, an exp, an add and a division (exp counted as one).
    flops=lambda p: 5 * p["M"] * p["N"],
    reference=_reference,
    validate=_validate,
    presets={
        "softmax_128x1024": {"M": 128, "N": 1024},
        # BERT-base attention probabilities: 12 heads x 128 queries over 128 keys.
        "softmax_attention": {"M": 12 * 128, "N": 128},
    },
)
