"""Writing ONNX networks with ``onnx.helper``: the graph builder the shipped networks
(``explorer.model``) and the NAS networks' export (``explorer.nas``) share.

Weights are random (latency depends on shapes, not on the values of the weights), scaled so
that activations stay of order one; batch normalisation is folded into the convolutions, as an
exporter in inference mode writes it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from explorer.extras import require

OPSET = 17  # LayerNormalization's first opset; TVM's frontend and ONNX Runtime both read it


class OnnxGraph:
    """A graph under construction: nodes, random initializers, unique names."""

    def __init__(self, seed: int) -> None:
        self.onnx = require("onnx", "building an ONNX network", "model")
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.weights: list[Any] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def weight(self, shape: tuple[int, ...], fan_in: int) -> str:
        """Random weights scaled by 1/sqrt(fan_in), so activations stay of order one."""
        name = self.name("w")
        values = self.rng.standard_normal(shape).astype(np.float32) / math.sqrt(fan_in)
        self.weights.append(self.onnx.numpy_helper.from_array(values, name))
        return name

    def const(self, values: Any, dtype: Any = np.float32) -> str:
        name = self.name("c")
        self.weights.append(self.onnx.numpy_helper.from_array(np.asarray(values, dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: Any) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(self.onnx.helper.make_node(op_type, inputs, [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> str:
        w = self.weight((cout, cin // groups, k, k), fan_in=cin // groups * k * k)
        b = self.const(np.zeros(cout))
        pad = k // 2
        return self.op(
            "Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride],
            pads=[pad] * 4, group=groups,
        )  # fmt: skip

    def dense(self, x: str, cin: int, cout: int) -> str:
        """MatMul then Add, as exporters write a linear layer of a 3-D activation."""
        w = self.weight((cin, cout), fan_in=cin)
        return self.op("Add", [self.op("MatMul", [x, w]), self.const(np.zeros(cout))])

    def model(
        self, name: str, x: tuple[str, tuple[int, ...]], y: tuple[str, tuple[int, ...]]
    ) -> Any:
        helper, f32 = self.onnx.helper, self.onnx.TensorProto.FLOAT
        graph = helper.make_graph(
            self.nodes, name, [helper.make_tensor_value_info(x[0], f32, list(x[1]))],
            [helper.make_tensor_value_info(y[0], f32, list(y[1]))], self.weights,
        )  # fmt: skip
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="explorer"
        )
        model.ir_version = 8  # readable by every ONNX Runtime of the last years
        self.onnx.checker.check_model(model)
        return model

    def output(self, x: str, name: str) -> None:
        self.nodes.append(self.onnx.helper.make_node("Identity", [x], [name]))
