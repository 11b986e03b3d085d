"""A network built with packed schedules copies its weights into panels once, at build time (as
ONNX Runtime packs its weights when a session starts), not in every inference (issue 23)."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from explorer import _tvm
from explorer.model import MAX_ERROR
from explorer.model._import import lower_onnx, model_tasks
from explorer.model._onnx import read_onnx
from explorer.model._race_child import _relative_error
from explorer.space import DesignSpace, KnobSpace, Point
from explorer.target import Target

CONV = "fused_conv2d1_add_add1_relu"  # the tiny network's second convolution, with its residual


@pytest.fixture(scope="module")
def network(tiny_onnx):
    onnx_file = read_onnx(tiny_onnx)
    lowered = lower_onnx(onnx_file, "tiny")
    target = Target.local_cpu(num_cores=1)
    tasks = {name: workload for name, _, workload in model_tasks(lowered, target, "tiny")}
    return tiny_onnx, lowered, target, tasks


def _packed_schedule(workload, target):
    """(the task's IRModule, the trace of a random point of its first packed sketch)."""
    space = DesignSpace.of(workload, target)
    assert space.num_sketches > space.num_metaschedule_sketches  # the conv has packed sketches
    knobs, sketch = KnobSpace(space), space.num_metaschedule_sketches
    rng = np.random.default_rng(0)
    candidate = None
    while candidate is None:  # a random point of this sketch that TVM builds
        indices = tuple(int(rng.integers(d)) for d in knobs.dims(sketch))
        candidate = knobs.materialize(Point(sketch, indices))
    return workload.mod(), candidate.trace


def _hand_schedule(workload, edit):
    sch = _tvm.Schedule(workload.mod())
    edit(sch)
    return workload.mod(), _tvm.trace_to_json(sch.trace)


def _matches_onnxruntime(path, lowered, target, schedules):
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype("float32")
    got = _tvm.relax_runner(_tvm.build_relax(lowered, target, schedules))(x)
    expected = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    assert _relative_error(got, expected) <= MAX_ERROR


def test_a_packed_weight_copy_runs_once_at_build_time(network):
    path, lowered, target, tasks = network
    schedules = [_packed_schedule(tasks[CONV], target)]
    main = _tvm.apply_schedules(lowered, target.to_tvm(), schedules)["main"].script()
    # the convolution now takes its weights in panels, and no copy is left to run: TVM split
    # the copy into a function of its own and ran it on the constant weights
    assert f"{CONV}_prepacked" in main
    assert "_weight_prepack" not in main
    _matches_onnxruntime(path, lowered, target.to_tvm(), schedules)


def _weight_copy_inside_the_nest(sch):
    conv = sch.get_sblock("conv2d_nchw")
    copy = sch.cache_read(conv, 1, "global")  # param_0, the weights: a network constant
    sch.compute_at(copy, sch.get_loops(conv)[1])  # under the output-channel loop


def _input_copy(sch):
    sch.cache_read(sch.get_sblock("pad_temp"), 0, "global")  # lv3, the layer's input


@pytest.mark.parametrize("edit", [_weight_copy_inside_the_nest, _input_copy])
def test_copies_of_inputs_or_inside_the_compute_stay_in_the_kernel(network, edit):
    """A copy of a weight made inside the convolution's loops cannot move out whole, and a
    copy of the layer's input is not a constant: both stay, and the network is still right."""
    path, lowered, target, tasks = network
    schedules = [_hand_schedule(tasks[CONV], edit)]
    main = _tvm.apply_schedules(lowered, target.to_tvm(), schedules)["main"].script()
    assert "_prepacked" not in main and "_weight_prepack" not in main
    _matches_onnxruntime(path, lowered, target.to_tvm(), schedules)
