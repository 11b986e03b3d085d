"""A fully connected layer: Y = relu(X @ W^T + bias), W stored (N, K) as in ``topi.nn.dense``.

Three TE stages (``dense``, ``bias_add``, ``relu``), so the PrimFunc has three blocks: the smallest
workload on which fusion choices (inline the epilogue or not) matter.
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
    M, N, K, dtype = p["M"], p["N"], p["K"], p["dtype"]
    X = te.placeholder((M, K), dtype, name="X")
    W = te.placeholder((N, K), dtype, name="W")
    bias = te.placeholder((N,), dtype, name="bias")
    k = te.reduce_axis((0, K), name="k")
    D = te.compute((M, N), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), name="dense")
    S = te.compute((M, N), lambda i, j: D[i, j] + bias[j], name="bias_add")
    zero = tirx.const(0, dtype)
    Y = te.compute((M, N), lambda i, j: te.max(S[i, j], zero), name="relu")
    return [X, W, bias, Y]


def _validate(p: Params) -> None:
    fam = "dense_bias_relu"
    check_elements(fam, "X[M, K]", (p["M"], p["K"]))
    check_elements(fam, "W[N, K]", (p["N"], p["K"]))
    check_elements(fam, "Y[M, N]", (p["M"], p["N"]))


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    X, W, bias = inputs
    return np.asarray(np.maximum(X @ W.T + bias, 0.0))


DENSE_BIAS_RELU = OperatorFamily(
    name="dense_bias_relu",
    description="Y[i, j] = relu(sum_k X[i, k] * W[j, k] + bias[j])",
    params=(
        ShapeParam("M", 128, help="rows of X and Y (batch of tokens)"),
        ShapeParam("N", 256, help="output features: rows of W, columns of Y"),
        ShapeParam("K", 256, help="input features (reduction length)"),
        dtype_param(),
    ),
    build=_build,
    # 2 per multiply-accumulate, then one add (bias) and one max (relu) per output element.
    flops=lambda p: 2 * p["M"] * p["N"] * p["K"] + 2 * p["M"] * p["N"],
    reference=_reference,
    validate=_validate,
    presets={
        # BERT-base feed-forward expansion: 128 tokens, 768 -> 3072.
        "dense_bert_ffn": {"M": 128, "N": 3072, "K": 768},
    },
)
