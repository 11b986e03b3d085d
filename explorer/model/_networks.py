"""Networks to try the model path on, written with ``onnx.helper`` at their real shapes.

No model hub can be reached from every machine the explorer runs on, and latency depends on
shapes, not on the values of the weights: these are the published architectures with random
weights (batch normalisation folded into the convolutions, as an exporter in inference mode
writes them). ``NETWORKS`` maps a name to its builder; ``explorer model example NAME`` writes one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from explorer.onnx_graph import OnnxGraph


def tiny(seed: int = 0) -> Any:
    """conv-relu, conv-relu with a residual add, global pool, a linear layer: 1x3x32x32 in, 10
    classes out. Five tasks or so; imports and tunes in seconds (the tests' network)."""
    g = OnnxGraph(seed)
    h = g.op("Relu", [g.conv("x", 3, 16, 3)])
    h = g.op("Relu", [g.op("Add", [g.conv(h, 16, 16, 3), h])])
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    w = g.weight((10, 16), fan_in=16)
    g.output(g.op("Gemm", [h, w, g.const(np.zeros(10))], transB=1), "y")
    return g.model("tiny", ("x", (1, 3, 32, 32)), ("y", (1, 10)))


def resnet18(seed: int = 0, size: int = 224) -> Any:
    """ResNet-18 (He et al. 2016) for 1x3xSIZExSIZE images, 1000 classes."""
    g = OnnxGraph(seed)
    h = g.op("Relu", [g.conv("x", 3, 64, 7, stride=2)])
    h = g.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(2):
            s = stride if block == 0 else 1
            body = g.op("Relu", [g.conv(h, cin, cout, 3, stride=s)])
            body = g.conv(body, cout, cout, 3)
            skip = g.conv(h, cin, cout, 1, stride=s) if (s != 1 or cin != cout) else h
            h = g.op("Relu", [g.op("Add", [body, skip])])
            cin = cout
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    w = g.weight((1000, 512), fan_in=512)
    g.output(g.op("Gemm", [h, w, g.const(np.zeros(1000))], transB=1), "y")
    return g.model("resnet18", ("x", (1, 3, size, size)), ("y", (1, 1000)))


# MobileNetV2's inverted residual stages: expansion t, channels c, repeats n, first stride s
_MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                 (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip


def mobilenet_v2(seed: int = 0, size: int = 224) -> Any:
    """MobileNetV2 (Sandler et al. 2018): pointwise expansion, depthwise 3x3, linear pointwise
    projection, a residual add where shapes allow; ReLU6 as ``Clip(0, 6)``."""
    g = OnnxGraph(seed)
    lo, hi = g.const(0.0), g.const(6.0)

    def relu6(x: str) -> str:
        return g.op("Clip", [x, lo, hi])

    h, cin = relu6(g.conv("x", 3, 32, 3, stride=2)), 32
    for t, c, n, s in _MOBILENET_V2:
        for i in range(n):
            stride, hidden = (s if i == 0 else 1), cin * t
            body = relu6(g.conv(h, cin, hidden, 1)) if t != 1 else h
            body = relu6(g.conv(body, hidden, hidden, 3, stride=stride, groups=hidden))
            body = g.conv(body, hidden, c, 1)
            h = g.op("Add", [body, h]) if stride == 1 and cin == c else body
            cin = c
    h = relu6(g.conv(h, cin, 1280, 1))
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    w = g.weight((1000, 1280), fan_in=1280)
    g.output(g.op("Gemm", [h, w, g.const(np.zeros(1000))], transB=1), "y")
    return g.model("mobilenet_v2", ("x", (1, 3, size, size)), ("y", (1, 1000)))


def bert_layer(seed: int = 0, seq: int = 128, hidden: int = 768, heads: int = 12) -> Any:
    """One BERT-base encoder layer (Devlin et al. 2019) on a 1xSEQxHIDDEN activation:
    self-attention (MatMul, scaled Softmax), residual and LayerNormalization, then the
    feed-forward block with GELU written as exporters write it (with Erf)."""
    g = OnnxGraph(seed)
    dh, ffn = hidden // heads, 4 * hidden
    heads_shape = g.const([1, seq, heads, dh], np.int64)
    flat_shape = g.const([1, seq, hidden], np.int64)

    def split_heads(x: str) -> str:
        return g.op("Transpose", [g.op("Reshape", [x, heads_shape])], perm=[0, 2, 1, 3])

    def layer_norm(x: str) -> str:
        gamma, beta = g.const(np.ones(hidden)), g.const(np.zeros(hidden))
        return g.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)

    q, k, v = (split_heads(g.dense("x", hidden, hidden)) for _ in range(3))
    scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])])
    probs = g.op("Softmax", [g.op("Div", [scores, g.const(math.sqrt(dh))])], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    attention = g.dense(g.op("Reshape", [context, flat_shape]), hidden, hidden)
    h = layer_norm(g.op("Add", [attention, "x"]))
    up = g.dense(h, hidden, ffn)
    erf = g.op("Erf", [g.op("Div", [up, g.const(math.sqrt(2.0))])])
    gelu = g.op("Mul", [g.op("Mul", [up, g.op("Add", [erf, g.const(1.0)])]), g.const(0.5)])
    g.output(layer_norm(g.op("Add", [g.dense(gelu, ffn, hidden), h])), "y")
    return g.model("bert_layer", ("x", (1, seq, hidden)), ("y", (1, seq, hidden)))


NETWORKS: dict[str, Callable[..., Any]] = {
    "tiny": tiny,
    "resnet18": resnet18,
    "mobilenet_v2": mobilenet_v2,
    "bert_layer": bert_layer,
}
"""The networks ``explorer model example`` writes, by name."""
