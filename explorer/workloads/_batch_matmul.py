"""Batched matrix multiplication: C[b, i, j] = sum_k A[b, i, k] * B[b, k, j].

Unlike ``topi.nn.batch_matmul`` (whose default is ``transpose_b=True``, i.e. A @ B^T), B is stored
(batch, K, N), the same way round as ``matmul``.
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

te = _tvm.te


def _build(p: Params) -> list[Any]:
    batch, M, N, K, dtype = p["batch"], p["M"], p["N"], p["K"], p["dtype"]
    A = te.placeholder((batch, M, K), dtype, name="A")
    B = te.placeholder((batch, K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute(
        (batch, M, N), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C"
    )
    return [A, B, C]


def _validate(p: Params) -> None:
    fam, b = "batch_matmul", p["batch"]
    check_elements(fam, "A[batch, M, K]", (b, p["M"], p["K"]))
    check_elements(fam, "B[batch, K, N]", (b, p["K"], p["N"]))
    check_elements(fam, "C[batch, M, N]", (b, p["M"], p["N"]))


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    return np.asarray(np.matmul(inputs[0], inputs[1]))


BATCH_MATMUL = OperatorFamily(
    name="batch_matmul",
    description="C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]",
    params=(
        ShapeParam("batch", 8, max=1 << 12, help="number of independent products"),
        ShapeParam("M", 128, help="rows of A and C"),
        ShapeParam("N", 128, help="columns of B and C"),
        ShapeParam("K", 128, help="reduction length"),
        dtype_param(),
    ),
    build=_build,
    flops=lambda p: 2 * p["batch"] * p["M"] * p["N"] * p["K"],
    reference=_reference,
    validate=_validate,
    presets={
        "batch_matmul_8x128": {"batch": 8, "M": 128, "N": 128, "K": 128},
        # BERT-base attention scores: 12 heads, 128 tokens, head size 64.
        "batch_matmul_attention": {"batch": 12, "M": 128, "N": 128, "K": 64},
    },
)
