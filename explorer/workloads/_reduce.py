"""Sum over one axis of a 2-D or 3-D input: Y = X.sum(axis)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.errors import WorkloadError
from explorer.workloads._base import (
    OperatorFamily,
    Params,
    ShapeParam,
    check_elements,
    dtype_param,
)
from explorer.workloads._dims import dim_params, dims

te = _tvm.te


def _shape(p: Params) -> tuple[int, ...]:
    return dims("reduce_sum", p, p["ndim"], "ndim")


def _build(p: Params) -> list[Any]:
    shape, axis = _shape(p), p["axis"]
    X = te.placeholder(shape, p["dtype"], name="X")
    r = te.reduce_axis((0, shape[axis]), name="r")
    out_shape = shape[:axis] + shape[axis + 1 :]

    def body(*idx: Any) -> Any:
        index = (*idx[:axis], r, *idx[axis:])  # the reduced axis in its input position
        return te.sum(X[index], axis=r)

    names = [n for n in ("i", "j", "k")[: len(shape)]]
    del names[axis]  # keep each output axis named after its input axis position
    Y = te.compute(out_shape, body, name="reduce_sum", varargs_names=names)
    return [X, Y]


def _validate(p: Params) -> None:
    if p["axis"] >= p["ndim"]:
        raise WorkloadError(
            f"reduce_sum: parameter 'axis'={p['axis']} is out of range for a {p['ndim']}-D input "
            f"(ndim={p['ndim']}; valid axes 0..{p['ndim'] - 1})"
        )
    shape = _shape(p)
    check_elements("reduce_sum", "X[" + ", ".join(f"D{i}" for i in range(len(shape))) + "]", shape)


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    return np.asarray(inputs[0].sum(axis=p["axis"]))


REDUCE_SUM = OperatorFamily(
    name="reduce_sum",
    description="Y = sum of X over one axis (2-D or 3-D X)",
    params=(
        ShapeParam("ndim", 2, kind="choice", choices=(2, 3), help="rank of the input"),
        *dim_params((1024, 1024, 1)),
        ShapeParam("axis", 1, min=0, max=2, help="the axis summed away"),
        dtype_param(),
    ),
    build=_build,
    # One add per input element (the usual convention; strictly n - 1 per output).
    flops=lambda p: int(np.prod(_shape(p))),
    reference=_reference,
    validate=_validate,
    presets={
        "reduce_rows_1024": {"ndim": 2, "D0": 1024, "D1": 1024, "axis": 1},
        "reduce_cols_1024": {"ndim": 2, "D0": 1024, "D1": 1024, "axis": 0},
    },
)
