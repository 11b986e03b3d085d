"""An elementwise chain, out = relu(A * B + 1), as three stages ``mul``, ``add`` and ``relu``:
the textbook case for ``compute_inline`` (1-D or 2-D)."""

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
from explorer.workloads._dims import dim_params, dims

te, tirx = _tvm.te, _tvm.tirx


def _shape(p: Params) -> tuple[int, ...]:
    return dims("elementwise_chain", p, p["ndim"], "ndim")


def _build(p: Params) -> list[Any]:
    shape, dtype = _shape(p), p["dtype"]
    names = ["i", "j"][: len(shape)]
    A = te.placeholder(shape, dtype, name="A")
    B = te.placeholder(shape, dtype, name="B")
    one, zero = tirx.const(1, dtype), tirx.const(0, dtype)
    t1 = te.compute(shape, lambda *i: A[i] * B[i], name="mul", varargs_names=names)
    t2 = te.compute(shape, lambda *i: t1[i] + one, name="add", varargs_names=names)
    out = te.compute(shape, lambda *i: te.max(t2[i], zero), name="relu", varargs_names=names)
    return [A, B, out]


def _validate(p: Params) -> None:
    shape = _shape(p)
    check_elements(
        "elementwise_chain", "A[" + ", ".join(f"D{i}" for i in range(len(shape))) + "]", shape
    )


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    return np.asarray(np.maximum(inputs[0] * inputs[1] + 1.0, 0.0))


ELEMENTWISE_CHAIN = OperatorFamily(
    name="elementwise_chain",
    description="out = relu(A * B + 1), elementwise",
    params=(
        ShapeParam("ndim", 1, kind="choice", choices=(1, 2), help="rank of the tensors"),
        *dim_params((1 << 20, 1), what="tensor"),
        dtype_param(),
    ),
    build=_build,
    flops=lambda p: 3 * int(np.prod(_shape(p))),  # mul, add, max per element
    reference=_reference,
    validate=_validate,
    presets={"chain_1m": {"ndim": 1, "D0": 1 << 20}},
)
