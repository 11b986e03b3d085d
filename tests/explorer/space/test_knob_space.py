"""The knob space: only perfect tilings, exact round trips between points, decisions and traces."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer import _tvm
from explorer.core import trace_key
from explorer.space import DesignSpace, KnobSpace, Point, factorizations
from explorer.workloads import get_workload


@pytest.fixture(scope="module")
def space(cpu_target):
    return KnobSpace(DesignSpace.of(get_workload("matmul", M=64, N=48, K=32), cpu_target))


@given(st.integers(1, 360), st.integers(1, 4), st.integers(0, 64))
@settings(max_examples=60, deadline=None)
def test_factorizations_are_exactly_the_perfect_tilings(extent, n, max_inner):
    got = factorizations(extent, n, max_inner)
    assert len(set(got)) == len(got)
    for f in got:
        assert len(f) == n and math.prod(f) == extent
        assert max_inner <= 0 or f[-1] <= max_inner
    if n == 2 and max_inner <= 0:
        assert len(got) == sum(1 for d in range(1, extent + 1) if extent % d == 0)


def test_the_origin_is_the_sketch_itself(space):
    for sketch in range(space.num_sketches):
        origin = space.origin(sketch)
        defaults = tuple(k.default for k in space.design.knobs[sketch])
        assert space.decisions(origin) == tuple(_tvm.to_plain(d) for d in defaults)


def test_random_points_materialize_to_schedules_carrying_their_decisions(space):
    rng = np.random.default_rng(0)
    for _ in range(10):
        point = space.random_point(rng)
        cand = space.materialize(point)
        assert cand is not None
        assert space.point_of_candidate(cand) == point
        sch = _tvm.Schedule(space.workload.mod())
        _tvm.apply_trace_json(cand.trace, sch)
        replayed = [
            _tvm.to_plain(sch.trace.get_decision(i))
            for i in sch.trace.insts
            if i.kind.name in ("SamplePerfectTile", "SampleCategorical", "SampleComputeLocation")
        ]
        assert tuple(replayed) == space.decisions(point)
        assert space.point_of(point.sketch, replayed) == point


def test_a_materialized_schedule_marks_its_postprocessing_and_is_known_without_the_mark(space):
    """MetaSchedule's evolution replays a schedule without its postprocessing and runs it
    again, which needs the mark (a model task's weights were laid out twice); a schedule stored
    before it was marked is still the same schedule to a search and to a recording."""
    cand = space.materialize(space.random_point(np.random.default_rng(1)))
    assert cand is not None
    insts, decisions = cand.trace
    (at,) = [i for i, inst in enumerate(insts) if inst[0] == "EnterPostproc"]
    unmarked = [insts[:at] + insts[at + 1 :], [[i - (i > at), d] for i, d in decisions]]
    sch = _tvm.Schedule(space.workload.mod())
    _tvm.apply_trace_json(unmarked, sch)  # still a whole schedule without it
    assert trace_key(unmarked) == trace_key(cand.trace)
    other = space.materialize(space.random_point(np.random.default_rng(2)))
    assert other is not None and trace_key(other.trace) != trace_key(cand.trace)


def test_dims_count_every_tiling(space):
    for sketch in range(space.num_sketches):
        for domain in space.domains[sketch]:
            if domain.knob.kind == "SamplePerfectTile":
                n, max_inner = domain.knob.attrs
                extent = math.prod(domain.values[0])
                assert domain.size == len(factorizations(extent, n, max_inner))
    assert space.size() == sum(math.prod(space.dims(s)) for s in range(space.num_sketches))


def test_a_random_point_of_one_sketch_stays_in_it(space):
    rng = np.random.default_rng(3)
    for sketch in range(space.num_sketches):
        assert {space.random_point(rng, sketch=sketch).sketch for _ in range(5)} == {sketch}
    with pytest.raises(ValueError, match="no sketch 99"):
        space.random_point(rng, sketch=99)


def test_points_outside_the_space_are_refused(space):
    with pytest.raises(ValueError, match="not a point"):
        space.materialize(Point(0, (0,)))
    with pytest.raises(ValueError, match="not a point"):
        space.decisions(Point(99, space.origin().indices))
    assert space.point_of(0, [[3, 5, 7, 11]] * len(space.domains[0])) is None


def test_one_knob_space_per_workload_and_target_is_shared(space):
    # Three caches held them (one keyed on an object's id(), which a rebuilt space reuses).
    again = KnobSpace.of(
        get_workload(space.workload.family, **dict(space.workload.params)), space.target
    )
    assert again is KnobSpace.of(space.workload, space.target)
    assert again.workload == space.workload and again.size() == space.size()


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=12,
)


@given(
    st.lists(st.just(["EnterPostproc", [], [], []]) | _json, max_size=4)
    | st.dictionaries(st.text(max_size=4), _json)
)
@settings(max_examples=200, deadline=None)
def test_a_trace_key_is_a_text_for_any_json_a_database_may_hold(value):
    """A stored trace is whatever JSON the database holds: its key never raises, and a value
    without the mark keys as its canonical text."""
    key = trace_key(value)
    assert isinstance(key, str) and trace_key(key) == key  # its own text keys the same
    if "EnterPostproc" not in repr(value):
        assert key == json.dumps(value, sort_keys=True, separators=(",", ":"))
