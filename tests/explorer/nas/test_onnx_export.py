"""NAS networks as ONNX models (``explorer.nas.network_onnx``, issue 23: NAS on real networks):
every transformation's pieces compute in ONNX Runtime what the JAX forward of the search
computes, and a transformed network is a model TVM's frontend converts into tasks."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.model import lower_onnx, model_tasks, parse_onnx
from explorer.nas import (
    Bottleneck,
    Depthwise,
    Group,
    Layer,
    Network,
    SpatialSplit,
    SplitGroup,
    UnrollGroup,
    get_network,
    layer_onnx,
    network_onnx,
)
from explorer.nas._fisher import _conv_layer
from explorer.onnx_graph import OnnxGraph
from explorer.target import Target

pytest.importorskip("jax")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def run_onnx(model, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize(
    "step",
    [Group(4), Depthwise(), SplitGroup((1, 2)), UnrollGroup(2, 2), SpatialSplit(2), Bottleneck(2)],
    ids=lambda s: s.label(),
)
@pytest.mark.parametrize("stride", [1, 2])
def test_a_transformed_layer_computes_in_onnx_what_the_search_computes(step, stride) -> None:
    layer = step.apply(Layer.dense("conv", 8, 8, 8, 8, kernel=3, stride=stride))
    assert isinstance(layer, Layer), layer
    g = OnnxGraph(seed=1)
    g.output(layer_onnx(g, layer, "x"), "y")
    shape = (2, layer.in_channels, layer.height, layer.width)
    out = (2, layer.out_channels, layer.out_height, layer.out_width)
    model = g.model("layer", ("x", shape), ("y", out))
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == len(layer.pieces)
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    expected = np.asarray(_conv_layer(layer, [weights[n.input[1]] for n in convs], x))
    got = run_onnx(model, x)
    assert got.shape == out
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_a_transformed_network_runs_whole_and_converts_to_tvm_tasks() -> None:
    net = get_network("resnet18_cifar", width=4)
    plan = [((Group(2),), (Group(2),)), ((SpatialSplit(2),), (Depthwise(),))] + [None] * 6
    candidate = net.transform(plan)
    assert isinstance(candidate, Network) and candidate.macs < net.macs
    model = network_onnx(candidate)
    assert sum(n.op_type == "Conv" for n in model.graph.node) == sum(
        len(layer.pieces) for layer in candidate.layers()
    )
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    y = run_onnx(model, x)
    assert y.shape == (1, 10) and np.isfinite(y).all()
    source = model.SerializeToString()
    lowered = lower_onnx(parse_onnx(source, "candidate.onnx"), "candidate.onnx")
    tasks = model_tasks(lowered, Target.local_cpu(), "candidate.onnx")
    conv_tasks = [name for name, _, _ in tasks if "conv2d" in name]
    assert conv_tasks and len(tasks) >= len(conv_tasks)
