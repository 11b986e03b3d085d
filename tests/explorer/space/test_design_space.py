"""The shared design space: sampling gives real, replayable, correct schedules."""

from __future__ import annotations

import json

import numpy as np
import pytest

from explorer import _tvm
from explorer.space import DesignSpace
from explorer.space._packing import panel_widths
from explorer.workloads import get_workload


@pytest.fixture(scope="module")
def space(cpu_target):
    return DesignSpace.of(get_workload("matmul", M=64, N=64, K=64), cpu_target)


def test_knobs_come_from_the_sketch_sampling_instructions(space):
    assert space.num_sketches >= 1
    for sketch, knobs in enumerate(space.knobs):
        kinds = [k.kind for k in knobs]
        assert "SamplePerfectTile" in kinds
        trace = space.sketch_trace(sketch)
        for knob in knobs:
            assert trace.insts[knob.inst_index].kind.name == knob.kind
            if knob.kind == "SamplePerfectTile":
                n, max_inner = knob.attrs
                assert len(knob.default) == n
                assert knob.default[-1] <= max_inner


def test_a_sample_replays_to_the_same_schedule_and_computes_the_right_answer(space, cpu_target):
    sample = space.sample(np.random.default_rng(3))
    w = sample.candidate.workload
    replayed = _tvm.Schedule(w.mod())
    _tvm.apply_trace_json(sample.candidate.trace, replayed)
    # Tile decisions multiply back to the loop extents (64) of the matmul, or to its panels
    # (64 / bn) in a packed sketch, whose columns are split by the panel width first.
    tiles = [int(np.prod(d)) for d in sample.decisions if isinstance(d, list)]
    panels = {64 // bn for bn in panel_widths(64, cpu_target.vector_lanes_f32)}
    assert tiles and all(t == 64 or t in panels for t in tiles)
    ex = _tvm.compile_mod(replayed.mod, cpu_target.to_tvm())
    ins = w.random_inputs()
    dev = _tvm.tvm.cpu()
    out = _tvm.tvm.runtime.empty(w.output_spec()[0], w.output_spec()[1], dev)
    ex["main"](*[_tvm.tvm.runtime.tensor(a, dev) for a in ins], out)
    assert w.check_output(out.numpy(), w.reference(ins)) is None


def test_sampling_is_reproducible_under_a_seed_and_varied_across_seeds(space):
    a = [space.sample(np.random.default_rng(7)).decisions for _ in range(1)]
    b = [space.sample(np.random.default_rng(7)).decisions for _ in range(1)]
    assert a == b
    rng = np.random.default_rng(11)
    keys = {json.dumps(space.sample(rng).decisions) for _ in range(20)}
    assert len(keys) > 5


def test_spaces_are_cached_per_workload_and_target(space, cpu_target):
    again = DesignSpace.of(get_workload("matmul", M=64, N=64, K=64), cpu_target)
    assert again is space
