"""Depthwise 2-D convolution in NCHW layout (channel multiplier 1), with stride and padding.

Blocks: ``pad`` (only when ``padding > 0``) and ``depthwise``. The weight is
(C, 1, KH, KW), the layout ``topi.nn.depthwise_conv2d_nchw`` uses.
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
from explorer.workloads._conv2d import check_window, out_size, pad_nchw, windows

te = _tvm.te


def _out_hw(p: Params) -> tuple[int, int]:
    return (
        out_size(p["H"], p["KH"], p["stride"], p["padding"]),
        out_size(p["W"], p["KW"], p["stride"], p["padding"]),
    )


def _build(p: Params) -> list[Any]:
    N, C, H, W, KH, KW = (p[k] for k in ("N", "C", "H", "W", "KH", "KW"))
    s, dtype = p["stride"], p["dtype"]
    X = te.placeholder((N, C, H, W), dtype, name="X")
    F = te.placeholder((C, 1, KH, KW), dtype, name="W")
    Xp = pad_nchw(X, p["padding"], dtype)
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")
    Y = te.compute(
        (N, C, *_out_hw(p)),
        lambda n, c, y, x: te.sum(
            Xp[n, c, y * s + rh, x * s + rw] * F[c, 0, rh, rw], axis=[rh, rw]
        ),
        name="depthwise",
    )
    return [X, F, Y]


def _validate(p: Params) -> None:
    fam = "depthwise_conv2d"
    check_window(fam, p)
    pad2 = 2 * p["padding"]
    check_elements(fam, "X[N, C, H, W]", (p["N"], p["C"], p["H"], p["W"]))
    check_elements(fam, "W[C, 1, KH, KW]", (p["C"], 1, p["KH"], p["KW"]))
    check_elements(
        fam,
        "pad[N, C, H + 2*padding, W + 2*padding]",
        (p["N"], p["C"], p["H"] + pad2, p["W"] + pad2),
    )
    check_elements(fam, "depthwise[N, C, OH, OW]", (p["N"], p["C"], *_out_hw(p)))


def _flops(p: Params) -> int:
    OH, OW = _out_hw(p)
    return int(2 * p["N"] * p["C"] * OH * OW * p["KH"] * p["KW"])


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    x, w = inputs
    win = windows(x, p["KH"], p["KW"], p["stride"], p["padding"])
    return np.asarray(np.einsum("nchwij,cij->nchw", win, w[:, 0], optimize=True))


DEPTHWISE_CONV2D = OperatorFamily(
    name="depthwise_conv2d",
    description="Y[n, c, y, x] = sum_{r, s} pad(X)[n, c, y*stride + r, x*stride + s] "
    "* W[c, 0, r, s]",
    params=(
        ShapeParam("N", 1, max=1 << 10, help="batch"),
        ShapeParam("C", 32, help="channels (each convolved with its own filter)"),
        ShapeParam("H", 112, help="input height"),
        ShapeParam("W", 112, help="input width"),
        ShapeParam("KH", 3, max=1 << 10, help="kernel height"),
        ShapeParam("KW", 3, max=1 << 10, help="kernel width"),
        ShapeParam("stride", 1, max=1 << 10, help="step between windows (both axes)"),
        ShapeParam("padding", 1, min=0, max=1 << 10, help="zeros added on each side"),
        dtype_param(),
    ),
    build=_build,
    flops=_flops,
    reference=_reference,
    validate=_validate,
    presets={
        # MobileNet-v1's first depthwise layer.
        "depthwise_112": {
            "N": 1,
            "C": 32,
            "H": 112,
            "W": 112,
            "KH": 3,
            "KW": 3,
            "stride": 1,
            "padding": 1,
        },
        "depthwise_56_s2": {
            "N": 1,
            "C": 128,
            "H": 56,
            "W": 56,
            "KH": 3,
            "KW": 3,
            "stride": 2,
            "padding": 1,
        },
    },
)
