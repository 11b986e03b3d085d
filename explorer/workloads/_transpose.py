"""Transpose: out = X.transpose(perm) for a 2-D, 3-D or 4-D X; pure data movement (0 FLOPs).

``perm`` is a choice among the permutations written as strings ("1,0", "0,2,1", ...), so that it
survives JSON unchanged; its length is the rank, and ``D{rank}``... must stay at 1.
"""

from __future__ import annotations

import itertools
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

te = _tvm.te

PERMS: tuple[str, ...] = tuple(
    ",".join(map(str, perm)) for rank in (2, 3, 4) for perm in itertools.permutations(range(rank))
)


def _perm(p: Params) -> tuple[int, ...]:
    return tuple(int(s) for s in p["perm"].split(","))


def _shape(p: Params) -> tuple[int, ...]:
    return dims("transpose", p, len(_perm(p)), "perm")


def _build(p: Params) -> list[Any]:
    perm, shape = _perm(p), _shape(p)
    X = te.placeholder(shape, p["dtype"], name="X")
    inverse = [perm.index(axis) for axis in range(len(perm))]
    out_shape = tuple(shape[a] for a in perm)
    # out[o_0, ..., o_n] = X[i] where i[perm[k]] = o_k.
    Y = te.compute(
        out_shape,
        lambda *o: X[tuple(o[inverse[a]] for a in range(len(perm)))],
        name="transpose",
        varargs_names=[f"o{k}" for k in range(len(perm))],
    )
    return [X, Y]


def _validate(p: Params) -> None:
    shape = _shape(p)
    check_elements("transpose", "X[" + ", ".join(f"D{i}" for i in range(len(shape))) + "]", shape)


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    return np.transpose(inputs[0], _perm(p))


TRANSPOSE = OperatorFamily(
    name="transpose",
    description="out = X.transpose(perm) (2-D to 4-D)",
    params=(
        ShapeParam(
            "perm",
            "1,0",
            kind="choice",
            choices=PERMS,
            help="output axis k = input axis perm[k]; its length is the rank",
        ),
        *dim_params((1024, 1024, 1, 1)),
        dtype_param(),
    ),
    build=_build,
    flops=lambda p: 0,
    reference=_reference,
    validate=_validate,
    presets={
        "transpose_1024": {"perm": "1,0", "D0": 1024, "D1": 1024},
        # NCHW -> NHWC of a ResNet activation.
        "transpose_nchw_nhwc": {"perm": "0,2,3,1", "D0": 1, "D1": 64, "D2": 56, "D3": 56},
    },
)
