"""Winograd's F(4x4, 3x3) convolutions in a model's lowering (issue 23): taken only where they
were measured to win, the same numbers as ONNX Runtime's direct convolution, and tuned, built
and raced like any task."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer import _tvm
from explorer.core import ModelRecord, ModelTask
from explorer.errors import PrimitiveError
from explorer.model import ONNXRUNTIME, TUNED, best_schedules, race_model
from explorer.model._import import LOWERINGS, lower_as_stored, lower_onnx, model_tasks
from explorer.model._onnx import parse_onnx
from explorer.model._race_child import _relative_error
from explorer.model._tune import MIN_FIRST_CHUNK
from explorer.onnx_graph import OnnxGraph
from explorer.session import ScheduleSession
from explorer.storage import get_store
from explorer.target import Target

WINOGRAD_ERROR = 1e-4
"""Winograd's F(4x4, 3x3) in float32 sums in another order, through transforms with
fractional coefficients: a few millionths of the output's largest value on these layers,
far inside what a race accepts (``explorer.model.MAX_ERROR``)."""


def _conv_net(
    height, width, cin, cout, *, kernel=3, pads=(1, 1, 1, 1), stride=1, dilation=1, groups=1,
    batch=1, seed=0,
):  # fmt: skip
    """One convolution and its ReLU as an ONNX model (NCHW, as exporters write it)."""
    g = OnnxGraph(seed)
    w = g.weight((cout, cin // groups, kernel, kernel), fan_in=cin // groups * kernel * kernel)
    conv = g.op(
        "Conv", ["x", w, g.const(np.linspace(-1, 1, cout))], kernel_shape=[kernel, kernel],
        strides=[stride, stride], dilations=[dilation, dilation], pads=list(pads), group=groups,
    )  # fmt: skip
    y = g.op("Relu", [conv])
    out_h = (height + pads[0] + pads[2] - dilation * (kernel - 1) - 1) // stride + 1
    out_w = (width + pads[1] + pads[3] - dilation * (kernel - 1) - 1) // stride + 1
    g.output(y, "y")
    return g.model("conv", ("x", (batch, cin, height, width)), ("y", (batch, cout, out_h, out_w)))


def _task_names(model):
    onnx_file = parse_onnx(model.SerializeToString(), "conv.onnx")
    lowered = lower_onnx(onnx_file, "conv.onnx")
    return lowered, [name for name, _, _ in model_tasks(lowered, Target.local_cpu(), "conv")]


def _against_onnxruntime(model, lowered, schedules=(), seed=1):
    x_info = model.graph.input[0].type.tensor_type.shape.dim
    x = np.random.default_rng(seed).standard_normal([d.dim_value for d in x_info])
    x = x.astype("float32")
    target = Target.local_cpu(num_cores=1).to_tvm()
    got = _tvm.relax_runner(_tvm.build_relax(lowered, target, schedules))(x)
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return _relative_error(got, session.run(None, {"x": x}))


@settings(max_examples=6, deadline=None)
@given(
    out_h=st.integers(7, 33),
    out_w=st.integers(7, 33),
    pads=st.tuples(*[st.integers(0, 2)] * 4),
    channels=st.sampled_from([(64, 64), (64, 72), (80, 64)]),
    batch=st.integers(1, 2),
)
def test_a_winograd_convolution_computes_what_onnxruntime_does(
    out_h, out_w, pads, channels, batch
):
    """Any output size (edge tiles that reach past it), any padding on each side, batches."""
    height, width = out_h + 2 - pads[0] - pads[2], out_w + 2 - pads[1] - pads[3]
    model = _conv_net(height, width, *channels, pads=pads, batch=batch)
    lowered, names = _task_names(model)
    assert any(name.startswith("fused_conv2d_winograd") for name in names), names
    assert _against_onnxruntime(model, lowered) <= WINOGRAD_ERROR


@pytest.mark.parametrize(
    "why, shape, options",
    [
        ("stride 2", (57, 57, 64, 64), {"stride": 2}),
        ("a 1x1 kernel", (28, 28, 64, 64), {"kernel": 1, "pads": (0, 0, 0, 0)}),
        ("a 5x5 kernel", (28, 28, 64, 64), {"kernel": 5, "pads": (2, 2, 2, 2)}),
        ("dilation 2", (28, 28, 64, 64), {"dilation": 2, "pads": (2, 2, 2, 2)}),
        ("two groups", (28, 28, 64, 64), {"groups": 2}),
        ("an output 6 high", (6, 28, 64, 64), {}),
        ("32 input channels", (28, 28, 32, 64), {}),
        ("32 output channels", (28, 28, 64, 32), {}),
    ],
)
def test_convolutions_winograd_was_not_measured_on_stay_direct(why, shape, options):
    lowered, names = _task_names(_conv_net(*shape, **options))
    assert not any("winograd" in name for name in names), (why, names)
    assert any(name.startswith("fused_conv2d") for name in names), (why, names)


def test_the_smallest_convolution_taken_is_7x7_with_64_channels():
    _, names = _task_names(_conv_net(7, 7, 64, 64))
    assert any(name.startswith("fused_conv2d_winograd") for name in names), names


def test_a_model_imported_before_winograd_is_lowered_as_it_was():
    """A model imported before Winograd's convolutions has direct convolution tasks:
    ``lower_as_stored`` finds that lowering for it, today's for one imported today."""
    onnx_file = parse_onnx(_conv_net(28, 28, 64, 64).SerializeToString(), "conv")
    target = Target.local_cpu(num_cores=1)
    for lowering in LOWERINGS[:2]:
        lowered = lower_onnx(onnx_file, "conv", winograd=lowering.winograd)
        found = model_tasks(lowered, target, "conv")
        assert any("winograd" in name for name, _, _ in found) is lowering.winograd
        tasks = tuple(ModelTask(n, w, c, w.flops(), None, None) for n, c, w in found)
        model = ModelRecord(0, "conv", "", (), tasks, target, 0.0)
        assert lower_as_stored(onnx_file, model, "conv")[1] == lowering


def test_a_winograd_task_is_tuned_and_raced_against_onnxruntime(
    tmp_path, measurer, import_and_tune
):
    """The whole path on a network whose costliest task is Winograd's: imported, tuned (its
    schedules checked against its default build's output), raced against ONNX Runtime with
    the tuned schedules in place, and right."""
    path = tmp_path / "conv.onnx"
    onnx.save(_conv_net(28, 28, 64, 64), path)
    db = tmp_path / "records.db"
    model, tune = import_and_tune(path, db, measurer, cores=1, trials=8)
    (wino,) = [t for t in model.tasks if t.name.startswith("fused_conv2d_winograd")]
    assert wino.untuned_secs is not None and wino.error is None
    with get_store(db) as store:
        race = race_model(model, store, tune=tune, rounds=1, untuned=False)
        spent = {}
        for run_id, task, _ in store.model_runs(model.id):
            spent[task] = spent.get(task, 0) + store.count_trials(run_id=run_id, remeasures=False)
        assert sum(spent.values()) == 8 and spent[wino.name] >= MIN_FIRST_CHUNK, spent
        (trial,) = [t for name, t in best_schedules(model, store, tune=tune) if name == wino.name]
    entries = {e.name: e for e in race.entries}
    assert entries[TUNED].error is None and entries[TUNED].max_error <= WINOGRAD_ERROR
    assert entries[ONNXRUNTIME].round_secs
    # built with its tuned schedule in place whether or not the race keeps it
    lowered, _ = _task_names(_conv_net(28, 28, 64, 64))
    schedule = (trial.candidate.workload.mod(), trial.candidate.trace)
    assert _against_onnxruntime(_conv_net(28, 28, 64, 64), lowered, [schedule]) <= WINOGRAD_ERROR


def test_a_winograd_task_opens_in_the_editor():
    """Its six blocks are there to schedule by hand; an illegal step is refused in a sentence
    and leaves the session as it was."""
    onnx_file = parse_onnx(_conv_net(28, 28, 64, 64).SerializeToString(), "conv")
    target = Target.local_cpu(num_cores=1)
    lowered = lower_onnx(onnx_file, "conv")
    ((_, _, task),) = [t for t in model_tasks(lowered, target, "conv") if "winograd" in t[0]]
    session = ScheduleSession(task, target)
    for block in ("input_tile", "data_pack", "bgemm", "inverse", "conv2d_winograd"):
        assert f'T.sblock("{block}")' in session.snapshot.script, block
    before = session.snapshot.script
    with pytest.raises(PrimitiveError, match="bgemm"):
        session.apply("compute_inline", block="bgemm")  # a reduction: cannot be inlined
    assert session.snapshot.script == before
    session.apply("compute_inline", block="input_tile")
    assert 'T.sblock("input_tile")' not in session.snapshot.script
    assert 'T.sblock("data_pack")' in session.snapshot.script
