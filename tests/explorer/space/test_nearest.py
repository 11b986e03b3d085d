"""A hand-made schedule mapped onto the knob space: which point, and what the notes say."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.errors import SearchError, TraceError
from explorer.measure import Candidate
from explorer.session import ScheduleSession
from explorer.space import DesignSpace, KnobSpace, StartMapping, nearest_point
from explorer.testing.sessions import hand_session
from explorer.workloads import get_workload

WORKLOAD = get_workload("matmul", M=64, N=64, K=64)


@pytest.fixture(scope="module")
def knobs(cpu_target):
    return KnobSpace(DesignSpace.of(WORKLOAD, cpu_target))


def hand(target) -> ScheduleSession:
    return hand_session(WORKLOAD, target)


def tiles(knobs: KnobSpace, mapping: StartMapping) -> dict[str, object]:
    values = knobs.decisions(mapping.point)
    domains = knobs.domains[mapping.point.sketch]
    return {d.knob.label: v for d, v in zip(domains, values, strict=True)}


def test_a_hand_schedule_keeps_its_splits_and_says_what_was_dropped(knobs, cpu_target):
    mapping = nearest_point(knobs, hand(cpu_target).candidate())
    assert not mapping.exact
    # The sketch without MetaSchedule's write cache is the nearest to a schedule without one.
    assert "cache_write" not in str(knobs.design.sketch_trace(mapping.point.sketch))
    assert tiles(knobs, mapping) == {
        "tile #0": [8, 1, 1, 8],  # i: outer factor outermost, inner factor innermost
        "tile #1": [4, 1, 1, 16],
        "tile #2": [64, 1],  # k was not split
        "categorical #0": 0,  # no unrolling
    }
    notes = "\n".join(mapping.notes)
    assert "C.i: your split 8 x 8 kept as tile [8, 1, 1, 8]" in notes
    assert "C.j: your split 4 x 16 kept as tile [4, 1, 1, 16]" in notes
    assert "C.k: not split by you" in notes
    assert "your reorder is not a knob and was dropped" in notes
    assert "your parallel (i_0) is not a knob" in notes
    assert "your vectorize (j_1) is not a knob" in notes
    assert knobs.materialize(mapping.point) is not None
    assert mapping.describe().startswith(f"nearest point {mapping.point.key()}")


def test_splits_that_do_not_fit_are_approximated_and_said_so(knobs, cpu_target):
    s = ScheduleSession(WORKLOAD, cpu_target)
    s.apply("split", loop="i", factors=[None, 2, 4, 2])  # 4 levels, kept
    s.apply("split", loop="k", factors=[None, 5])  # does not divide 64
    s.apply("fuse", loops=["i_0", "i_1"])
    s.apply("unroll", loop="k_1")
    mapping = nearest_point(knobs, s.candidate())
    got = tiles(knobs, mapping)
    assert got["tile #0"] == [8, 4, 1, 2]  # the fuse of i_0 (4) and i_1 (2) reads as one 8
    assert got["tile #2"] in ([16, 4], [8, 8], [13, 5])  # nearest perfect tile to 13 x 5
    notes = "\n".join(mapping.notes)
    assert "C.k: your split 13 x 5 does not divide 64 evenly; nearest tile" in notes
    assert "your fuse is not a knob and was dropped" in notes
    assert "your unrolling (5 steps) approximated as unroll depth" in notes


def test_a_searched_record_maps_exactly(knobs):
    point = knobs.random_point(np.random.default_rng(3))
    made = knobs.materialize(point)
    while made is None:  # pragma: no cover  (a refused point: draw again)
        point = knobs.random_point(np.random.default_rng(point.indices[0] + 1))
        made = knobs.materialize(point)
    bare = Candidate(made.workload, made.target, made.trace)  # no decisions: read the trace
    mapping = nearest_point(knobs, bare)
    assert mapping == StartMapping(point, (), exact=True)


def test_an_unscheduled_workload_maps_to_whole_loops(knobs, cpu_target):
    mapping = nearest_point(knobs, ScheduleSession(WORKLOAD, cpu_target).candidate())
    assert tiles(knobs, mapping)["tile #0"] == [64, 1, 1, 1]


def test_misuse_is_an_error_naming_the_problem(knobs, cpu_target):
    other = ScheduleSession(get_workload("matmul", M=32, N=32, K=32), cpu_target).candidate()
    with pytest.raises(SearchError, match="was made for matmul"):
        nearest_point(knobs, other)
    insts, decisions = hand(cpu_target).candidate().trace
    malformed = [[*insts, ["Vectorize", ["l999"], [], []]], decisions]
    with pytest.raises(TraceError, match="l999"):  # refused before TVM sees it
        nearest_point(knobs, Candidate(WORKLOAD, cpu_target, malformed))
    illegal = [[*insts, ["Vectorize", ["l3"], [], []]], decisions]  # k: a reduction loop
    with pytest.raises(TraceError, match="does not apply"):  # TVM refused it, in a worker
        nearest_point(knobs, Candidate(WORKLOAD, cpu_target, illegal))


def test_a_split_where_the_sketch_has_no_tile_is_said_to_be_dropped(cpu_target):
    w = get_workload("reduce_sum", D0=16, D1=8)
    s = ScheduleSession(w, cpu_target)
    s.apply("split", loop="i", factors=[None, 4])
    mapping = nearest_point(KnobSpace(DesignSpace.of(w, cpu_target)), s.candidate())
    assert "reduce_sum.i: your split 4 x 4 is not a knob of this sketch and was dropped" in (
        mapping.notes
    )


def test_a_packed_schedule_keeps_its_panels_on_the_packed_sketch_of_their_width(cpu_target):
    # Reproduces a new user's start from notebook 01's packed multiply (at 128): the notes read
    # "C.j: your split 4 x 32 has no tile in this space (innermost factor at most 16); nearest
    # tile [1, 4] used" (the packed sketch's knob tiles the 4 panels, not the 128 columns) and
    # said nothing of the user's cache_read and transform_layout.
    w = get_workload("matmul", M=128, N=128, K=128)
    panel = 2 * (cpu_target.vector_bits // 32)
    rows = 8 if cpu_target.vector_bits >= 512 else 4
    s = ScheduleSession(w, cpu_target)
    for primitive, args in [
        ("split", dict(loop="i", factors=[None, rows])),
        ("split", dict(loop="j", factors=[None, panel])),
        ("reorder", dict(loops=["i_0", "j_0", "k", "i_1", "j_1"])),
        ("cache_write", dict(block="C", write_index=0, storage_scope="global")),
        ("reverse_compute_at", dict(block="C_global", loop="j_0")),
        ("cache_read", dict(block="C", read_index=1, storage_scope="global")),
        ("transform_layout", dict(block="C", read_index=1, axis=1, factor=panel)),
        ("vectorize", dict(loop="j_1")),
    ]:
        s.apply(primitive, **args)
    space = KnobSpace(DesignSpace.of(w, cpu_target))
    mapping = nearest_point(space, s.candidate())
    notes = "\n".join(mapping.notes)
    assert f"it packs C.j in panels of {panel}" in notes
    assert "your cache_read, cache_write, reverse_compute_at, transform_layout are steps" in notes
    panels = 128 // panel
    assert (
        f"C.j: your split {panels} x {panel} kept: the sketch's panels of {panel}, "
        f"tile [{panels}, 1] of them" in notes
    )
    assert "has no tile in this space" not in notes
    assert space.materialize(mapping.point) is not None


def test_a_panel_split_across_the_users_loops_is_read_as_panels_and_said_so(cpu_target):
    w = get_workload("matmul", M=128, N=128, K=128)
    panel = 2 * (cpu_target.vector_bits // 32)
    s = ScheduleSession(w, cpu_target)
    s.apply("split", loop="i", factors=[None, 8])
    s.apply("split", loop="j", factors=[None, 2 * panel])  # two panels in the user's inner loop
    s.apply("cache_read", block="C", read_index=1, storage_scope="global")
    s.apply("transform_layout", block="C", read_index=1, axis=1, factor=panel)
    s.apply("cache_write", block="C", write_index=0, storage_scope="global")
    mapping = nearest_point(KnobSpace(DesignSpace.of(w, cpu_target)), s.candidate())
    notes = "\n".join(mapping.notes)
    assert f"C.j: your split {128 // (2 * panel)} x {2 * panel} read as the sketch's panels" in (
        notes
    )


def test_a_packed_tile_the_sketch_refuses_moves_to_the_nearest_that_builds(cpu_target):
    # B packed by hand, the rows left whole: the packed sketch's point has a one-row register
    # tile, which its check refuses; it was skipped for the next sketch, the packing dropped.
    w = get_workload("matmul", M=128, N=128, K=128)
    panel = 2 * (cpu_target.vector_bits // 32)
    s = ScheduleSession(w, cpu_target)
    s.apply("split", loop="j", factors=[None, panel])
    s.apply("cache_read", block="C", read_index=1, storage_scope="global")
    s.apply("transform_layout", block="C", read_index=1, axis=1, factor=panel)
    space = KnobSpace(DesignSpace.of(w, cpu_target))
    mapping = nearest_point(space, s.candidate())
    notes = "\n".join(mapping.notes)
    assert f"it packs C.j in panels of {panel}" in notes
    assert "C.i: tile [128, 1, 1] does not build in this sketch: its register tile of 1 row" in (
        notes
    )
    assert "nearest tile that builds: [" in notes
    assert "tried the next one" not in notes and "was dropped" not in notes
    assert space.materialize(mapping.point) is not None
