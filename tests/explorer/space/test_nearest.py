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
