"""Undo, redo, reset, branching, snapshots and change events."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.session import ScheduleSession, Snapshot
from explorer.session._snapshot import script_diff


def _labels(session: ScheduleSession) -> list[str]:
    return [step.label for step in session.history]


def test_root_snapshot(matmul) -> None:
    session = ScheduleSession(matmul)
    snap = session.snapshot
    assert snap.step_id == 0 and snap.path == ()
    assert not snap.can_undo and not snap.can_redo
    assert snap.diff == ""
    assert snap.trace_json == [[], []]
    assert "def apply_trace(sch: s_tir.Schedule) -> None:\n    pass" in snap.trace_python
    assert snap.block_names == ["C"] and snap.loop_names == ["i", "j", "k"]
    assert [(lp.name, lp.extent, lp.kind) for lp in snap.blocks[0].loops] == [
        ("i", 128, "serial"),
        ("j", 128, "serial"),
        ("k", 128, "serial"),
    ]
    assert snap.blocks[0].iter_kinds == "SSR" and snap.blocks[0].is_reduction
    assert snap.blocks[0].reads == ("A", "B") and snap.blocks[0].writes == ("C",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.script = ""  # type: ignore[misc]


def test_undo_redo_walk_the_path(matmul) -> None:
    session = ScheduleSession(matmul)
    s0 = session.snapshot
    s1 = session.apply("split", loop="i", factors=[None, 32])
    s2 = session.apply("parallel", loop="i_0")
    assert _labels(session) == [
        "split(loop='i', factors=[None, 32])",
        "parallel(loop='i_0')",
    ]
    assert session.undo().script == s1.script
    assert session.snapshot.can_redo
    assert session.undo().script == s0.script
    assert session.undo().script == s0.script  # at the root: nothing happens
    assert session.redo().script == s1.script
    assert session.redo().script == s2.script
    assert session.redo().script == s2.script  # at a leaf: nothing happens
    assert session.snapshot.trace_json == s2.trace_json


def test_undo_restores_names_and_trace(matmul) -> None:
    session = ScheduleSession(matmul)
    session.apply("split", loop="i", factors=[None, 32])
    session.apply("fuse", loops=["i_0", "i_1"])
    assert session.loops() == ["i_0_i_1_fused", "j", "k"]
    session.undo()
    assert session.loops() == ["i_0", "i_1", "j", "k"]
    session.apply("parallel", loop="i_0")  # the undone step's loops are addressable again
    assert session.snapshot.loops[0].kind == "parallel"


def test_branching_keeps_the_old_branch(matmul) -> None:
    session = ScheduleSession(matmul)
    a = session.apply("split", loop="i", factors=[None, 32]).step_id
    b = session.apply("parallel", loop="i_0").step_id
    session.undo()
    c = session.apply("unroll", loop="i_1").step_id  # a new branch from step a
    branches = session.branches()
    assert [br.tip for br in branches] == [b, c]
    assert [step.id for step in branches[0].steps] == [a, b]
    assert [step.id for step in branches[1].steps] == [a, c]
    assert [br.is_current for br in branches] == [False, True]
    unrolled = session.snapshot.script

    parallel = session.checkout(b)
    assert "T.parallel" in parallel.script and "T.unroll" not in parallel.script
    assert session.history[-1].id == b
    session.undo()
    assert session.redo().step_id == b  # redo follows the most recently visited child
    session.checkout(c)
    session.undo()
    assert session.redo().script == unrolled

    session.reset()
    assert session.snapshot.step_id == 0
    assert len(session.branches()) == 2
    assert session.redo().step_id == a
    assert session.redo().step_id == c
    assert session.step(b).parent == a
    with pytest.raises(KeyError):
        session.checkout(99)


def test_a_failed_step_does_not_create_a_branch(matmul) -> None:
    session = ScheduleSession(matmul)
    session.apply("split", loop="i", factors=[None, 32])
    with pytest.raises(ValueError):
        session.apply("vectorize", loop="k")
    assert len(session.branches()) == 1
    assert session.snapshot.step_id == 1


def test_diff_is_against_the_previous_step(matmul) -> None:
    session = ScheduleSession(matmul)
    session.apply("split", loop="i", factors=[None, 32])
    snap = session.apply("parallel", loop="i_0")
    assert snap.diff.startswith("--- step 1: split(loop='i', factors=[None, 32])\n")
    assert "+++ step 2: parallel(loop='i_0')" in snap.diff
    assert "-        for i_0, i_1, j, k in T.grid(4, 32, 128, 128):" in snap.diff
    assert "+        for i_0 in T.parallel(4):" in snap.diff


def test_trace_python_is_runnable(matmul) -> None:
    from explorer import _tvm

    session = ScheduleSession(matmul)
    session.apply("split", loop="j", factors=[None, 16])
    session.apply("reorder", loops=["k", "j_1"])
    session.apply("vectorize", loop="j_1")
    session.apply("cache_write", block="C")
    namespace: dict = {}
    exec(session.snapshot.trace_python, namespace)
    sch = _tvm.Schedule(matmul.mod())
    namespace["apply_trace"](sch)
    assert _tvm.tvm_ffi.structural_equal(sch.mod, session.mod)


def test_one_action_is_one_step_and_the_trace_is_tvms(matmul) -> None:
    session = ScheduleSession(matmul)
    snap = session.apply("split", loop="i", factors=[None, 32])
    kinds = [inst[0] for inst in snap.trace_json[0]]
    assert kinds == ["GetSBlock", "GetLoops", "Split"]
    assert snap.step.n_insts == 3
    snap = session.apply("reorder", loops=["j", "i_0"])
    assert [inst[0] for inst in snap.trace_json[0]][3:] == ["GetSBlock", "GetLoops", "Reorder"]


def test_on_change_and_unsubscribe(matmul) -> None:
    session = ScheduleSession(matmul)
    seen: list[Snapshot] = []
    unsubscribe = session.on_change(seen.append)
    session.apply("split", loop="i", factors=[None, 32])
    session.undo()
    session.redo()
    session.reset()
    session.undo()  # no change: no event
    assert [s.step_id for s in seen] == [1, 0, 1, 0]
    unsubscribe()
    unsubscribe()  # twice is harmless
    session.redo()
    assert len(seen) == 4


def test_schedule_copy_is_independent(matmul) -> None:
    session = ScheduleSession(matmul)
    sch = session.schedule()
    sch.parallel(sch.get_loops(sch.get_sblock("C"))[0])
    assert "T.parallel" not in session.snapshot.script
    assert session.snapshot.trace_json == [[], []]


@given(
    st.lists(st.text(alphabet="ab \t", max_size=4), max_size=6),
    st.lists(st.text(alphabet="ab \t", max_size=4), max_size=6),
)
def test_a_diff_has_one_line_per_line(before, after) -> None:
    # Issue 10: the tour printed "...* B[v_k, v_j]+        for i in T.parallel(128):", the
    # script's last line (no newline) glued to the next diff line.
    diff = script_diff("\n".join(before), "\n".join(after), "a", "b")
    lines = diff.splitlines()
    assert all(line[:1] in "@+- " for line in lines), lines
    added = [line[1:] for line in lines[2:] if line.startswith("+")]
    removed = [line[1:] for line in lines[2:] if line.startswith("-")]
    # what the diff adds and removes is exactly the lines that differ
    assert set(added) <= set(after) and set(removed) <= set(before)
    # a diff is about lines: texts that differ only by a final newline have none
    same = "\n".join(before).splitlines() == "\n".join(after).splitlines()
    assert (diff == "") == same
