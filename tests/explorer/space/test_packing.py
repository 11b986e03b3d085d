"""Packed sketches: B copied into panels, a register tile around them, for every strategy."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from explorer import _tvm
from explorer.space import DesignSpace, KnobSpace
from explorer.space._packing import (
    RegisterTile,
    packing_rules,
    panel_widths,
    register_tile,
    vector_registers,
)
from explorer.workloads import get_workload


def _packed(space: DesignSpace) -> list[int]:
    return [
        s
        for s in range(space.num_sketches)
        if any(i.kind.name == "TransformLayout" for i in space.sketch_trace(s).insts)
    ]


def _computes(candidate) -> None:
    w = candidate.workload
    sch = _tvm.Schedule(w.mod())
    _tvm.apply_trace_json(candidate.trace, sch)
    ex = _tvm.compile_mod(sch.mod, candidate.target.to_tvm())
    ins = w.random_inputs()
    dev = _tvm.tvm.cpu()
    out = _tvm.tvm.runtime.empty(w.output_spec()[0], w.output_spec()[1], dev)
    ex["main"](*[_tvm.tvm.runtime.tensor(a, dev) for a in ins], out)
    assert w.check_output(out.numpy(), w.reference(ins)) is None
    return sch.mod.script()


@pytest.mark.parametrize(
    ("family", "params", "panels"),
    [
        # B[k, j] -> [j // bn, k, j % bn]
        ("matmul", {"M": 64, "N": 64, "K": 48}, lambda bn: [("B", (64 // bn, 48, bn))]),
        # dense reads W[n, k]: the panels transpose it, [n // bn, k, n % bn]
        ("dense_bias_relu", {"M": 16, "N": 64, "K": 32}, lambda bn: [("W", (64 // bn, 32, bn))]),
        # the batch stays outermost: B[b, k, j] -> [b, j // bn, k, j % bn]
        (
            "batch_matmul",
            {"batch": 2, "M": 16, "N": 32, "K": 16},
            lambda bn: [("B", (2, 32 // bn, 16, bn))],
        ),
        # NCHW: the output channels are vectorized, the weights blocked OIHW -> OIHWo and the
        # output tile NCHW -> NCHWc
        (
            "conv2d",
            {"N": 1, "CI": 8, "H": 6, "W": 6, "CO": 32, "padding": 1},
            lambda bn: [("W", (32 // bn, 8, 3, 3, bn)), ("conv", (1, 32 // bn, 6, 6, bn))],
        ),
    ],
)
def test_packed_sketches_copy_the_panels_and_compute_the_right_answer(
    family, params, panels, cpu_target
):
    w = get_workload(family, **params)
    space = DesignSpace(w, cpu_target)
    packed = _packed(space)
    extent = int(params.get("N") if family != "conv2d" else params["CO"])
    widths = panel_widths(extent, cpu_target.vector_lanes_f32)
    assert len(packed) == len(widths) > 0
    # after MetaSchedule's own sketches, whose indices (stored with every trial) keep meaning
    assert packed == list(range(space.num_sketches - len(packed), space.num_sketches))
    knobs = KnobSpace(space)
    rng = np.random.default_rng(0)
    for sketch, bn in zip(packed, widths, strict=True):
        candidate = None
        while candidate is None:  # a random point of this sketch that TVM builds
            candidate = knobs.materialize(knobs.random_point(rng, sketch=sketch))
        script = _computes(candidate)
        for name, shape in panels(bn):
            text = ", ".join(map(str, shape))
            assert re.search(rf"{name}_global = T\.sblock_alloc_buffer\(\({text}\)\)", script)


def test_metaschedule_sketches_are_unchanged_before_the_packed_ones(cpu_target):
    w = get_workload("matmul", M=64, N=64, K=64)
    space = DesignSpace(w, cpu_target)
    context = _tvm.ms.TuneContext(
        mod=w.mod(),
        target=cpu_target.to_tvm(),
        space_generator="post-order-apply",
        task_name="matmul",
        rand_state=1,
        num_threads=cpu_target.num_cores,
    )
    own = [str(s.trace) for s in context.generate_design_space()]
    assert [str(space.sketch_trace(s)) for s in range(len(own))] == own
    assert len(_packed(space)) == space.num_sketches - len(own) > 0


@pytest.mark.parametrize(
    ("family", "params"),
    [
        ("softmax", {}),  # no product reduced over a panel
        # its input is read along the channel with computed indices: vector loads would gather
        ("depthwise_conv2d", {}),
        ("matmul", {"M": 30, "N": 30, "K": 30}),  # no multiple of the vector width divides 30
    ],
)
def test_no_packed_sketch_where_no_panel_fits(family, params, cpu_target):
    assert _packed(DesignSpace(get_workload(family, **params), cpu_target)) == []


def test_the_rule_replaces_metaschedules_tiling_and_keeps_its_annotations():
    names = [type(r).__name__ for r in packing_rules(16)]
    assert "MultiLevelTiling" not in names and "PackedTiling" in names
    assert "ParallelizeVectorizeUnroll" in names  # parallel, vectorize and unroll knobs
    assert "RandomComputeLocation" not in names  # it would move the panels' copy into a tile


def test_metaschedule_only_is_the_space_without_its_packed_sketches(cpu_target):
    space = DesignSpace.of(get_workload("matmul", M=64, N=64, K=64), cpu_target)
    own = space.metaschedule_only()
    assert own.num_sketches == space.num_metaschedule_sketches < space.num_sketches
    assert _packed(own) == [] and own.knobs == space.knobs[: own.num_sketches]
    sample = own.sample(np.random.default_rng(0))
    assert sample.sketch < own.num_sketches
    _computes(sample.candidate)


@pytest.mark.parametrize(
    ("family", "params", "copy", "panels"),
    [
        # the source's order would be (co, ci, kh, kw): one float per cache line of the panels
        (
            "conv2d",
            {"N": 1, "CI": 8, "H": 6, "W": 6, "CO": 32, "padding": 1},
            "W_global",
            lambda bn: (32 // bn, 8, 3, 3, bn),
        ),
        ("matmul", {"M": 64, "N": 64, "K": 48}, "B_global", lambda bn: (64 // bn, 48, bn)),
    ],
)
def test_the_panels_copy_loops_in_the_panels_order(family, params, copy, panels, cpu_target):
    """ResNet-18's C12 spent most of its time in the weights' copy, which looped in the
    source's order; the copy's loops now follow the packed buffer, panel lanes innermost."""
    w = get_workload(family, **params)
    space = DesignSpace(w, cpu_target)
    widths = panel_widths(int(params.get("CO", params.get("N"))), cpu_target.vector_lanes_f32)
    for sketch, bn in zip(_packed(space), widths, strict=True):
        sch = _tvm.Schedule(w.mod())
        space.sketch_trace(sketch).apply_to_schedule(sch, remove_postproc=True)
        loops = sch.get_loops(sch.get_sblock(copy))
        assert tuple(int(sch.get(loop).extent) for loop in loops) == panels(bn)


def test_a_point_stored_before_its_sketch_changed_is_not_read_as_another(cpu_target):
    """A stored point names indices into its sketch's domains as they were; read into today's
    they would name another schedule. Its decisions' values decide."""
    space = KnobSpace(DesignSpace(get_workload("matmul", M=64, N=64, K=48), cpu_target))
    sketch = _packed(space.design)[0]
    origin = space.origin(sketch)
    rng = np.random.default_rng(0)
    points = (space.random_point(rng, sketch=sketch) for _ in range(99))
    point, candidate = next(
        (p, c) for p in points if p != origin and (c := space.materialize(p)) is not None
    )
    assert space.point_of_candidate(candidate) == point
    # the same point stored under another sketch's domains: the indices of the origin
    moved = dataclasses.replace(
        candidate, decisions={**candidate.decisions, "point": list(origin.indices)}
    )
    assert space.point_of_candidate(moved) == point  # found by its values
    # values no domain of today's sketch holds: no point at all
    stale = dataclasses.replace(
        candidate,
        decisions={**candidate.decisions, "values": [[7, 7, 7]] * len(point.indices)},
    )
    assert space.point_of_candidate(stale) is None
    # a knob added or removed since: the stored indices no longer fit, the values still may
    resized = dataclasses.replace(
        candidate, decisions={**candidate.decisions, "point": [*point.indices, 0]}
    )
    assert space.point_of_candidate(resized) == point
    for junk in (7, "x", None, {"a": 1}):  # a hand-edited file: no point, no crash
        odd = {**candidate.decisions, "point": list(origin.indices), "values": junk}
        expected = origin if junk is None else None
        assert space.point_of_candidate(dataclasses.replace(candidate, decisions=odd)) == expected


def test_the_tile_s_write_back_computes_the_epilogue(cpu_target):
    """A fused task's bias and ReLU are computed as the register tile is written back: the one
    block that writes the function's output reads the tile's accumulator. Apart, they were one
    more pass over the whole output (ResNet-18's 7x7 stem: 140 -> 189 GFLOPS at 64 trials)."""
    w = get_workload("dense_bias_relu", M=16, N=64, K=32)
    space = DesignSpace(w, cpu_target)
    assert _packed(space)
    for sketch in _packed(space):
        sch = _tvm.Schedule(w.mod())
        space.sketch_trace(sketch).apply_to_schedule(sch, remove_postproc=True)
        func = sch.mod["main"]
        name = func.params[-1].name
        stores = re.findall(rf"^\s*{name}\[[^\]]*\] = (.*)$", sch.mod.script(), flags=re.M)
        assert len(stores) == 1 and "_global[" in stores[0], stores


@pytest.mark.parametrize(
    "rows, vectors, choices, fits",
    [
        (7, 2, (1, 7, 49), True),  # a 7x7 layer's 7 x 32 tile on AVX-512: 14 accumulators
        (1, 2, (1, 7, 49), False),  # 2 accumulators: each FMA waits on the one before
        (49, 2, (1, 7, 49), False),  # 98 accumulators: spilled to memory
        (7, 1, (1, 7, 49), True),  # 7 x 16: the most this shape allows under 8
        (1, 1, (1,), True),  # a single row (a matrix-vector product) has no other choice
        (15, 2, tuple(range(1, 17)), True),  # 30 accumulators and the panel's 2 vectors
        (16, 2, tuple(range(1, 17)), False),  # 32 and 2 more: one register short
        (2, 2, tuple(range(1, 17)), False),
    ],
)
def test_a_register_tile_fits_the_registers_and_keeps_the_fma_units_busy(
    rows, vectors, choices, fits
):
    assert RegisterTile(rows, vectors, choices).fits(32) is fits


def _tile_of(candidate, lanes):
    sch = _tvm.Schedule(candidate.workload.mod())
    _tvm.apply_trace_json(candidate.trace, sch)
    return register_tile(sch.trace, lanes)


def test_no_schedule_of_a_7x7_layer_has_a_one_row_register_tile(cpu_target):
    """ResNet-18's 7x7 layers landed at 80-95 GFLOPS in search after search where a 7-row tile
    reached 180-210: only rows in {1, 7, 49} divide 7 x 7, and a search could spend its whole
    budget on 1-row tiles. The space now refuses every tile that does not fit."""
    w = get_workload("conv2d", N=1, CI=16, H=7, W=7, CO=32, padding=1)
    space = DesignSpace(w, cpu_target)
    lanes = cpu_target.vector_lanes_f32
    knobs = KnobSpace(space)
    rng = np.random.default_rng(0)
    refused = kept = 0
    for sketch in _packed(space):
        for _ in range(24):
            point = knobs.random_point(rng, sketch=sketch)
            candidate = knobs.materialize(point)
            rows = [v[-1] for v in knobs.decisions(point) if isinstance(v, list) and len(v) == 3]
            if np.prod(rows) != 7:  # 1 or 49 rows: too few accumulators or too many
                assert candidate is None
                refused += 1
                continue
            tile = _tile_of(candidate, lanes)
            assert tile is not None and tile.rows == 7 and tile.fits(vector_registers(lanes))
            kept += 1
    assert refused and kept
    # What a strategy draws at random lies in the space that is left.
    samples = [space.sample(rng) for _ in range(12)]
    tiles = [_tile_of(s.candidate, lanes) for s in samples if s.sketch in _packed(space)]
    assert tiles and all(t is not None and t.rows == 7 for t in tiles)


def test_a_packed_sketch_s_own_decisions_are_a_tile_that_fits(cpu_target):
    """Droplet starts from each sketch's own decisions (index 0 of every knob): a refused
    origin would leave it nothing to measure there."""
    for params in ({"H": 7, "W": 7}, {"H": 14, "W": 14}, {"H": 28, "W": 28}):
        w = get_workload("conv2d", N=1, CI=16, CO=32, padding=1, **params)
        space = KnobSpace(DesignSpace(w, cpu_target))
        for sketch in _packed(space.design):
            assert space.materialize(space.origin(sketch)) is not None


def test_an_nhwc_depthwise_convolution_packs_its_weights_and_computes_the_right_answer(
    cpu_target,
):
    """Regression (issue 23): a depthwise convolution lowered channels-last reads its input as
    ``X[n, h + kh, w + kw, c + rc]`` (``rc`` of extent 1), contiguous along the channels it
    vectorizes, and got no packed sketch: MobileNetV2's 56x56 depthwise tasks stayed at a
    quarter of the peak. Its weights now pack into panels and its input is read as it is."""
    from onnx import TensorProto, helper, numpy_helper

    from explorer.model import lower_onnx, model_tasks, parse_onnx

    weights = np.random.default_rng(0).standard_normal((32, 1, 3, 3)).astype("float32")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], group=32, pads=[1, 1, 1, 1])],
        "depthwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 8, 8])],
        [numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx_file = parse_onnx(model.SerializeToString(), "depthwise.onnx")
    found = model_tasks(lower_onnx(onnx_file, "depthwise.onnx"), cpu_target, "depthwise.onnx")
    (task,) = [w for name, _, w in found if "conv2d" in name]
    assert "group_conv2d_nhwc" in task.mod().script()
    space = DesignSpace(task, cpu_target)
    # a network's weights are laid out by TVM's layout rewrite, not by the sketch's own copy
    packed = range(space.num_metaschedule_sketches, space.num_sketches)
    assert len(packed) == len(panel_widths(32, cpu_target.vector_lanes_f32)) > 0
    knobs = KnobSpace(space)
    rng = np.random.default_rng(0)
    for sketch in packed:
        built = []  # random points of this sketch that TVM builds
        for _ in range(200):
            candidate = knobs.materialize(knobs.random_point(rng, sketch=sketch))
            if candidate is not None:
                built.append(candidate)
            if len(built) == 3:
                break
        assert len(built) == 3, f"sketch {sketch}: fewer than 3 of 200 random points build"
        for candidate in built:
            _computes(candidate)


def test_a_ctrl_c_in_the_register_tile_check_is_an_interrupt_not_a_refused_schedule(
    cpu_target, monkeypatch
):
    """The check is Python that TVM's C++ calls back. TVM's FFI made a KeyboardInterrupt raised
    there a bare RuntimeError, which the space takes for a refused schedule: a Ctrl-C during
    the static model's scoring was swallowed and scoring went on for 2 minutes (a loaded CI)."""
    space = DesignSpace.of(get_workload("matmul", M=16, N=16, K=16), cpu_target)
    knobs = KnobSpace(space)
    sketch = space.num_metaschedule_sketches  # the first packed sketch: it runs the check
    assert knobs.materialize(knobs.origin(sketch)) is not None

    def pressed(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr("explorer.space._packing._fits", pressed)
    with pytest.raises(KeyboardInterrupt):
        knobs.materialize(knobs.origin(sketch))
