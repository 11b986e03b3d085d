"""A NAS network as an ONNX model, so a candidate can be built and run whole (``explorer model
import``, the race against ONNX Runtime) instead of timed as a sum of its convolutions.

The graph is the network's inference: each layer's pieces on their slices of the input
(channels, and rows for a spatial split), their outputs concatenated back as ``_fisher``'s JAX
forward does; batch normalisation folded into the convolutions (a zero bias, as an exporter in
inference mode writes it); ReLU after the stem and between a block's convolutions, the shortcut
added before the block's last ReLU; the ImageNet stem's max pool; global average pooling and
the classifier. Weights are random (``seed``): latency depends on shapes only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from explorer.nas._layer import Layer
from explorer.nas._network import Network
from explorer.onnx_graph import OnnxGraph

INPUT, OUTPUT = "x", "y"


def network_onnx(network: Network, seed: int = 0, batch_size: int = 1) -> Any:
    """``network`` (transformed or not) as a checked ``onnx.ModelProto``: input ``x`` of
    ``batch_size x in_channels x height x width``, output ``y`` of ``batch_size x classes``.

    Example:
        >>> from explorer.nas import Group, get_network
        >>> net = get_network("resnet18_cifar", width=4)
        >>> grouped = net.transform([((Group(2),), (Group(2),))] + [None] * 7)
        >>> model = network_onnx(grouped)
        >>> sum(n.op_type == "Conv" for n in model.graph.node)
        20
    """
    g = OnnxGraph(seed)
    h = g.op("Relu", [layer_onnx(g, network.stem, INPUT)])
    if network.stem_pool:
        h = g.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for block in network.blocks:
        body = h
        for i, layer in enumerate(block.convs):
            body = layer_onnx(g, layer, body)
            if i < len(block.convs) - 1:
                body = g.op("Relu", [body])
        skip = h if block.shortcut is None else layer_onnx(g, block.shortcut, h)
        h = g.op("Relu", [g.op("Add", [body, skip])])
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    w = g.weight((network.num_classes, network.features), fan_in=network.features)
    g.output(g.op("Gemm", [h, w, g.const(np.zeros(network.num_classes))], transB=1), OUTPUT)
    shape = (batch_size, network.in_channels, network.height, network.width)
    return g.model(network.name, (INPUT, shape), (OUTPUT, (batch_size, network.num_classes)))


def layer_onnx(g: OnnxGraph, layer: Layer, x: str) -> str:
    """The layer's output in ``g`` from its input ``x``: each piece a convolution of its slice
    of ``x`` (input channels, and rows for a spatial split), the outputs concatenated on
    channels within a band of rows, then the bands on rows."""
    bands: dict[int, list[tuple[int, str]]] = {}
    for piece in layer.pieces:
        c = piece.conv
        part = x
        if (piece.in_start, c.in_channels) != (0, layer.in_channels):
            part = _slice(g, part, axis=1, start=piece.in_start, size=c.in_channels)
        if (piece.row_start, c.height) != (0, layer.height):
            part = _slice(g, part, axis=2, start=piece.row_start, size=c.height)
        w = g.weight(
            (c.out_channels, c.in_channels // c.groups, c.kernel, c.kernel),
            fan_in=c.in_channels // c.groups * c.kernel**2,
        )
        y = g.op(
            "Conv", [part, w, g.const(np.zeros(c.out_channels))],
            kernel_shape=[c.kernel, c.kernel], strides=[c.stride, c.stride],
            pads=[layer.padding] * 4, group=c.groups,
        )  # fmt: skip
        bands.setdefault(piece.out_row_start, []).append((piece.out_start, y))
    rows = []
    for _, band in sorted(bands.items()):
        outs = [y for _, y in sorted(band)]
        rows.append(outs[0] if len(outs) == 1 else g.op("Concat", outs, axis=1))
    return rows[0] if len(rows) == 1 else g.op("Concat", rows, axis=2)


def _slice(g: OnnxGraph, x: str, *, axis: int, start: int, size: int) -> str:
    starts, ends = g.const([start], np.int64), g.const([start + size], np.int64)
    return g.op("Slice", [x, starts, ends, g.const([axis], np.int64)])
