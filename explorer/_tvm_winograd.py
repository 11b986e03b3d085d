"""Winograd convolutions for the Relax lowering (part of the module that imports TVM: only
``explorer._tvm_relax`` imports this one).

A 3x3, stride-1 convolution computed as Winograd's F(4x4, 3x3) (Lavin and Gray, 2016): each
6x6 input tile is transformed (``data_pack``), multiplied channel by channel with the
transformed weights in 36 independent matrix products (``bgemm``), and transformed back into
a 4x4 output tile (``inverse``): 36 multiplications per channel pair and tile where the direct
convolution does 144, for float32 results within a few millionths of the direct ones.

The weights' transform is a function of its own that ``FoldConstant`` runs at build time on
the network's constant weights, as ONNX Runtime prepares its weights once per session; TOPI's
``conv2d_winograd_nhwc`` computes it inside the convolution, in every call. The blocks carry
TOPI's names and schedule rules, so MetaSchedule's own Winograd rules for CPUs schedule the
two transforms.
"""

from __future__ import annotations

from typing import Any

import tvm
from tvm import te, topi
from tvm.topi.nn.winograd_util import winograd_transform_matrices

TILE = 4
"""Output tile side, the ``m`` of F(m x m, 3 x 3); the input tiles are ``TILE + 2`` a side."""

MIN_OUTPUT = 7
"""The smallest output height and width a convolution becomes Winograd's at: the smallest
measured. ResNet-18's four 3x3 shapes alone, channels-last, 64 trials of ``evolutionary``
each way, re-timed together (2-core Zen 4, ``docs/reproduction.md``, "Whole networks"):
Winograd's was 2.09x faster at 56x56 (64 channels), 2.81x at 28x28 (128), 2.02x at 14x14
(256) and 1.48x at 7x7 (512), where its edge tiles compute 8x8 outputs for 7x7 and its
transformed weights are 4x the original."""

MIN_CHANNELS = 64
"""The fewest input and output channels a convolution becomes Winograd's with: the fewest
measured. With fewer, the transforms, which scale with the channels, weigh more against the
products, which scale with their square; not measured, so left direct."""


def winograd_applies(call: Any) -> bool:
    """Whether a Relax ``nn.conv2d`` call is computed as Winograd's: static channels-last
    float32 shapes, 3x3 weights, stride and dilation 1, one group, an output at least
    ``MIN_OUTPUT`` a side, at least ``MIN_CHANNELS`` channels in and out."""
    attrs, (data, weight) = call.attrs, call.args
    types = (data.ty, weight.ty, call.ty)
    if any(str(getattr(t, "dtype", "")) != "float32" for t in types):
        return False
    layouts = (str(attrs.data_layout), str(attrs.kernel_layout), str(attrs.out_layout))
    if layouts != ("NHWC", "OHWI", "NHWC") or int(attrs.groups) != 1:
        return False
    if [int(s) for s in attrs.strides] != [1, 1] or [int(d) for d in attrs.dilation] != [1, 1]:
        return False
    shapes = [getattr(t, "shape", None) for t in types]
    if any(s is None or not all(isinstance(d, tvm.tirx.IntImm) for d in s) for s in shapes):
        return False
    out_c, kh, kw, in_c = (int(d) for d in weight.ty.shape)
    _, out_h, out_w, _ = (int(d) for d in call.ty.shape)
    return (
        (kh, kw) == (3, 3) and min(out_h, out_w) >= MIN_OUTPUT and min(in_c, out_c) >= MIN_CHANNELS
    )


def winograd_weights(weight: te.Tensor) -> te.Tensor:
    """The transformed weights ``G w G^T`` of OHWI 3x3 weights: ``[6, 6, out, in]``."""
    out_c, kh, kw, in_c = (int(d) for d in weight.shape)
    alpha = TILE + kh - 1
    _, _, g = winograd_transform_matrices(TILE, kh, str(weight.dtype))
    r_kh = te.reduce_axis((0, kh), "r_kh")
    r_kw = te.reduce_axis((0, kw), "r_kw")
    return te.compute(
        (alpha, alpha, out_c, in_c),
        lambda eps, nu, co, ci: te.sum(
            weight[co, r_kh, r_kw, ci] * g[eps, r_kh] * g[nu, r_kw], axis=[r_kh, r_kw]
        ),
        name="winograd_weights",
    )


def conv2d_winograd(data: te.Tensor, weights: te.Tensor, padding: Any) -> te.Tensor:
    """An NHWC 3x3 stride-1 convolution of ``data`` with transformed weights
    (``winograd_weights``), padded by ``padding`` (top, left, bottom, right)."""
    n, height, width, in_c = (int(d) for d in data.shape)
    alpha, _, out_c, _ = (int(d) for d in weights.shape)
    dtype = str(data.dtype)
    a, b, _ = winograd_transform_matrices(TILE, 3, dtype)
    top, left, bottom, right = (int(p) for p in padding)
    out_h, out_w = height + top + bottom - 2, width + left + right - 2
    tiles_h, tiles_w = -(-out_h // TILE), -(-out_w // TILE)
    tiles = n * tiles_h * tiles_w
    # The last tiles reach past the output: pad the input as far as they read.
    data_pad = topi.nn.pad(
        data,
        (0, top, left, 0),
        (
            0,
            (tiles_h - 1) * TILE + alpha - height - top,
            (tiles_w - 1) * TILE + alpha - width - left,
            0,
        ),
        name="data_pad",
        attrs={"schedule_rule": "None"},
    )

    def tile_of(p: Any) -> tuple[Any, Any, Any]:
        return p // (tiles_h * tiles_w), (p // tiles_w) % tiles_h * TILE, p % tiles_w * TILE

    def input_tile(eps: Any, nu: Any, p: Any, ci: Any) -> Any:
        batch, y, x = tile_of(p)
        return data_pad[batch, y + eps, x + nu, ci]

    tile = te.compute(
        (alpha, alpha, tiles, in_c), input_tile, name="input_tile", attrs={"schedule_rule": "None"}
    )
    r_a, r_b = te.reduce_axis((0, alpha), "r_a"), te.reduce_axis((0, alpha), "r_b")
    data_pack = te.compute(
        (alpha, alpha, tiles, in_c),
        lambda eps, nu, p, ci: te.sum(
            tile[r_a, r_b, p, ci] * b[r_a, eps] * b[r_b, nu], axis=[r_a, r_b]
        ),
        name="data_pack",
        attrs={
            "auto_scheduler_simplify_const_tensor_indices": ["eps", "nu", "r_a", "r_b"],
            "schedule_rule": "conv2d_nhwc_winograd_data_pack",
        },
    )
    ci = te.reduce_axis((0, in_c), "ci")
    bgemm = te.compute(
        (alpha, alpha, tiles, out_c),
        lambda eps, nu, p, co: te.sum(
            data_pack[eps, nu, p, ci] * weights[eps, nu, co, ci], axis=[ci]
        ),
        name="bgemm",
        attrs={"meta_schedule.write_cache_level": [2]},
    )
    r_a, r_b = te.reduce_axis((0, alpha), "r_a"), te.reduce_axis((0, alpha), "r_b")
    inverse = te.compute(
        (TILE, TILE, tiles, out_c),
        lambda vh, vw, p, co: te.sum(
            bgemm[r_a, r_b, p, co] * a[r_a, vh] * a[r_b, vw], axis=[r_a, r_b]
        ),
        name="inverse",
        attrs={
            "auto_scheduler_simplify_const_tensor_indices": ["vh", "vw", "r_a", "r_b"],
            "schedule_rule": "conv2d_nhwc_winograd_inverse",
        },
    )
    return te.compute(
        (n, out_h, out_w, out_c),
        lambda i, h, w, co: inverse[
            h % TILE, w % TILE, (i * tiles_h + h // TILE) * tiles_w + w // TILE, co
        ],
        name="conv2d_winograd",
    )


def legalize_conv2d(bb: Any, call: Any) -> Any:
    """A ``LegalizeOps`` rule for ``relax.nn.conv2d``: Winograd's where ``winograd_applies``,
    Relax's own legalization otherwise."""
    data, weight = call.args
    if winograd_applies(call):
        weights = bb.emit_te(winograd_weights, weight, primfunc_name_hint="winograd_weights")
        return bb.call_te(conv2d_winograd, data, weights, call.attrs.padding)
    return tvm.ir.Op.get("relax.nn.conv2d").get_attr("FLegalize")(bb, call)
