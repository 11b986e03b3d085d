"""Dense matrix multiplication: C[i, j] = sum_k A[i, k] * B[k, j]."""

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
    M, N, K, dtype = p["M"], p["N"], p["K"], p["dtype"]
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return [A, B, C]


def _validate(p: Params) -> None:
    # Tensor names carry the parameter names so the message says which knob to turn down.
    check_elements("matmul", "A[M, K]", (p["M"], p["K"]))
    check_elements("matmul", "B[K, N]", (p["K"], p["N"]))
    check_elements("matmul", "C[M, N]", (p["M"], p["N"]))


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    return np.asarray(inputs[0] @ inputs[1])


MATMUL = OperatorFamily(
    name="matmul",
    description="C[i, j] = sum_k A[i, k] * B[k, j]",
    params=(
        ShapeParam("M", 256, help="rows of A and C"),
        ShapeParam("N", 256, help="columns of B and C"),
        ShapeParam("K", 256, help="reduction length"),
        dtype_param(),
    ),
    build=_build,
    flops=lambda p: 2 * p["M"] * p["N"] * p["K"],
    reference=_reference,
    validate=_validate,
    presets={
        "matmul_512": {"M": 512, "N": 512, "K": 512},
        "matmul_1024": {"M": 1024, "N": 1024, "K": 1024},
    },
)
