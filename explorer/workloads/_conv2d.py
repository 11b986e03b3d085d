"""2-D convolution in NCHW layout with stride, padding, dilation and groups.

Written in TE rather than ``topi.nn.conv2d_nchw`` so the blocks have readable names: ``pad`` (the
zero-padded input, only when ``padding > 0``: a pure copy would be one more block for a schedule
to inline and a search to waste knobs on) and ``conv``. With ``groups=G`` the channels are split
into G groups convolved independently (the weight is ``(CO, CI/G, KH, KW)``); ``groups=CI=CO`` is a
depthwise convolution. Presets ``resnet18_c1`` ... ``resnet18_c12`` are the distinct convolution
layers of ResNet-18 at batch 1.
"""

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

te, tirx = _tvm.te, _tvm.tirx


def out_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    """Output extent of a convolution along one spatial axis (may be <= 0 for bad shapes)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def check_window(family: str, p: Params, dilation: int = 1) -> None:
    """Refuse a (dilated) kernel that does not fit in the padded input, naming the parameters."""
    for size, kernel in (("H", "KH"), ("W", "KW")):
        span = dilation * (p[kernel] - 1) + 1
        padded = p[size] + 2 * p["padding"]
        if span > padded:
            spread = f" (spanning {span} with dilation={dilation})" if dilation > 1 else ""
            raise WorkloadError(
                f"{family}: kernel {kernel}={p[kernel]}{spread} is larger than the padded input "
                f"{size} + 2*padding = {p[size]} + 2*{p['padding']} = {padded}"
            )


def pad_nchw(X: Any, padding: int, dtype: str) -> Any:
    """The ``pad`` stage: X with ``padding`` zeros around both spatial axes; X itself when 0."""
    N, C, H, W = (int(s) for s in X.shape)
    if padding == 0:
        return X
    zero = tirx.const(0, dtype)
    return te.compute(
        (N, C, H + 2 * padding, W + 2 * padding),
        lambda n, c, h, w: te.if_then_else(
            te.all(h >= padding, h < H + padding, w >= padding, w < W + padding),
            X[n, c, h - padding, w - padding],
            zero,
        ),
        name="pad",
    )


def windows(
    x: np.ndarray, kh: int, kw: int, stride: int, padding: int, dilation: int = 1
) -> np.ndarray:
    """im2col as a strided view: (N, C, H, W) -> (N, C, OH, OW, KH, KW), no copy, no loops."""
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    span_h, span_w = dilation * (kh - 1) + 1, dilation * (kw - 1) + 1
    win = np.lib.stride_tricks.sliding_window_view(xp, (span_h, span_w), axis=(2, 3))
    return win[:, :, ::stride, ::stride, ::dilation, ::dilation]


def _build(p: Params) -> list[Any]:
    N, CI, H, W, CO, KH, KW = (p[k] for k in ("N", "CI", "H", "W", "CO", "KH", "KW"))
    s, pad, d, dtype, G = p["stride"], p["padding"], p["dilation"], p["dtype"], p["groups"]
    CIg, COg = CI // G, CO // G
    X = te.placeholder((N, CI, H, W), dtype, name="X")
    Wt = te.placeholder((CO, CIg, KH, KW), dtype, name="W")
    Xp = pad_nchw(X, pad, dtype)
    OH, OW = out_size(H, KH, s, pad, d), out_size(W, KW, s, pad, d)
    rc = te.reduce_axis((0, CIg), name="rc")
    rh = te.reduce_axis((0, KH), name="rh")
    rw = te.reduce_axis((0, KW), name="rw")

    def channel(f: Any) -> Any:  # input channel rc of output channel f's group
        return rc if G == 1 else f // COg * CIg + rc  # G == 1: the same TIR as before groups

    Y = te.compute(
        (N, CO, OH, OW),
        lambda n, f, y, x: te.sum(
            Xp[n, channel(f), y * s + rh * d, x * s + rw * d] * Wt[f, rc, rh, rw],
            axis=[rc, rh, rw],
        ),
        name="conv",
    )
    return [X, Wt, Y]


def _out_hw(p: Params) -> tuple[int, int]:
    args = (p["stride"], p["padding"], p["dilation"])
    return out_size(p["H"], p["KH"], *args), out_size(p["W"], p["KW"], *args)


def _validate(p: Params) -> None:
    G = p["groups"]
    for name in ("CI", "CO"):
        if p[name] % G:
            raise WorkloadError(
                f"conv2d: {name}={p[name]} is not divisible by groups={G} "
                "(each group takes CI/groups input and makes CO/groups output channels)"
            )
    check_window("conv2d", p, p["dilation"])
    OH, OW = _out_hw(p)
    pad2 = 2 * p["padding"]
    check_elements("conv2d", "X[N, CI, H, W]", (p["N"], p["CI"], p["H"], p["W"]))
    check_elements("conv2d", "W[CO, CI/groups, KH, KW]", (p["CO"], p["CI"] // G, p["KH"], p["KW"]))
    check_elements(
        "conv2d",
        "pad[N, CI, H + 2*padding, W + 2*padding]",
        (p["N"], p["CI"], p["H"] + pad2, p["W"] + pad2),
    )
    check_elements("conv2d", "conv[N, CO, OH, OW]", (p["N"], p["CO"], OH, OW))


def _flops(p: Params) -> int:
    OH, OW = _out_hw(p)
    return int(2 * p["N"] * p["CO"] * OH * OW * (p["CI"] // p["groups"]) * p["KH"] * p["KW"])


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    x, w = inputs
    win = windows(x, p["KH"], p["KW"], p["stride"], p["padding"], p["dilation"])
    G = p["groups"]
    CIg, COg = p["CI"] // G, p["CO"] // G
    # Per group, (N, Cg, OH, OW, KH, KW) . (COg, Cg, KH, KW) -> (N, OH, OW, COg): one BLAS call.
    out = [
        np.tensordot(
            win[:, g * CIg : (g + 1) * CIg],
            w[g * COg : (g + 1) * COg],
            axes=([1, 4, 5], [1, 2, 3]),
        )
        for g in range(G)
    ]
    return np.asarray(np.concatenate(out, axis=3).transpose(0, 3, 1, 2))


# ResNet-18's distinct conv layers at batch 1: (input size, CI, CO, kernel, stride); padding k//2.
_RESNET18 = (
    (224, 3, 64, 7, 2),
    (56, 64, 64, 3, 1),
    (56, 64, 64, 1, 1),
    (56, 64, 128, 3, 2),
    (56, 64, 128, 1, 2),
    (28, 128, 128, 3, 1),
    (28, 128, 256, 3, 2),
    (28, 128, 256, 1, 2),
    (14, 256, 256, 3, 1),
    (14, 256, 512, 3, 2),
    (14, 256, 512, 1, 2),
    (7, 512, 512, 3, 1),
)

CONV2D = OperatorFamily(
    name="conv2d",
    description="Y[n, f, y, x] = sum_{c, r, s} pad(X)[n, c, y*stride + r*dil, x*stride + s*dil] "
    "* W[f, c, r, s] (c over f's group of CI/groups channels)",
    params=(
        ShapeParam("N", 1, max=1 << 10, help="batch"),
        ShapeParam("CI", 64, help="input channels"),
        ShapeParam("H", 56, help="input height"),
        ShapeParam("W", 56, help="input width"),
        ShapeParam("CO", 64, help="output channels (filters)"),
        ShapeParam("KH", 3, max=1 << 10, help="kernel height"),
        ShapeParam("KW", 3, max=1 << 10, help="kernel width"),
        ShapeParam("stride", 1, max=1 << 10, help="step between windows (both axes)"),
        ShapeParam("padding", 1, min=0, max=1 << 10, help="zeros added on each side"),
        ShapeParam("dilation", 1, max=1 << 10, help="spacing between kernel taps"),
        ShapeParam(
            "groups",
            1,
            help="channel groups convolved independently (divides CI and CO)",
            keyed_at_default=False,
        ),
        dtype_param(),
    ),
    build=_build,
    flops=_flops,
    reference=_reference,
    validate=_validate,
    presets={
        f"resnet18_c{i}": {
            "N": 1,
            "CI": ci,
            "H": hw,
            "W": hw,
            "CO": co,
            "KH": k,
            "KW": k,
            "stride": s,
            "padding": k // 2,
            "dilation": 1,
        }
        for i, (hw, ci, co, k, s) in enumerate(_RESNET18, start=1)
    },
)
