"""Save/load, load_trace and the hand-off to measurers."""

from __future__ import annotations

import json

import pytest
from session_helpers import assert_computes

from explorer import _tvm
from explorer.core import Candidate
from explorer.errors import ExplorerError, PrimitiveError
from explorer.session import ScheduleSession


def _tiled(workload) -> ScheduleSession:
    session = ScheduleSession(workload)
    session.apply("split", loop="C.i", factors=[None, 16])
    session.apply("split", loop="C.j", factors=[None, 16])
    session.apply("reorder", loops=["i_0", "j_0", "i_1", "j_1"])
    session.apply("reverse_compute_at", block="relu", loop="j_0")
    session.apply("fuse", loops=["i_0", "j_0"])
    session.apply("parallel", loop="i_0_j_0_fused")
    return session


def test_to_json_round_trip(mm_relu, tmp_path) -> None:
    session = _tiled(mm_relu)
    data = session.to_json()
    assert json.loads(json.dumps(data)) == data
    assert data["workload"] == mm_relu.to_json()
    assert [s["primitive"] for s in data["steps"]][:2] == ["split", "split"]
    assert data["steps"][0]["args"] == {"loop": "C.i", "factors": [None, 16]}
    assert data["trace"] == session.snapshot.trace_json

    again = ScheduleSession.from_json(data)
    assert _tvm.tvm_ffi.structural_equal(again.mod, session.mod)
    assert again.snapshot.script == session.snapshot.script
    assert [s.label for s in again.history] == [s.label for s in session.history]
    assert again.undo().script == session.undo().script  # the history is rebuilt, undoable

    path = tmp_path / "session.json"
    session.redo()
    session.save(path)
    loaded = ScheduleSession.load(path)
    assert _tvm.tvm_ffi.structural_equal(loaded.mod, session.mod)
    assert loaded.target == session.target
    assert_computes(loaded)


def test_save_keeps_only_the_current_path(matmul) -> None:
    session = ScheduleSession(matmul)
    session.apply("split", loop="i", factors=[None, 32])
    session.apply("parallel", loop="i_0")
    session.undo()
    session.apply("unroll", loop="i_1")
    steps = session.to_json()["steps"]
    assert [s["primitive"] for s in steps] == ["split", "unroll"]


def test_from_json_refuses_foreign_or_inconsistent_data(matmul) -> None:
    with pytest.raises(ExplorerError, match="not a saved schedule session"):
        ScheduleSession.from_json({"steps": []})
    session = ScheduleSession(matmul)
    session.apply("split", loop="i", factors=[None, 32])
    data = session.to_json()
    other = ScheduleSession(matmul)
    other.apply("split", loop="i", factors=[None, 16])
    data["trace"] = other.snapshot.trace_json
    with pytest.raises(ExplorerError, match="no longer give its saved schedule") as info:
        ScheduleSession.from_json(data)
    # Saved and loaded with one TVM: the message blames the edit, not the TVM version.
    assert "edited" in str(info.value) and "TVM" not in str(info.value)
    data = session.to_json()
    data["steps"][0]["args"]["factors"] = [3, 3]
    with pytest.raises(PrimitiveError, match="loop extent 128"):
        ScheduleSession.from_json(data)


def test_load_trace_is_one_undoable_step(mm_relu) -> None:
    searched = _tiled(mm_relu)
    record_trace = searched.candidate().trace

    session = ScheduleSession(mm_relu)
    session.apply("split", loop="relu.j", factors=[None, 8])
    before = session.snapshot
    snap = session.load_trace(record_trace)
    assert snap.step.primitive == "load"
    assert snap.step.label == f"load(trace=<{len(record_trace[0])} instructions>)"
    assert snap.script == searched.snapshot.script
    assert "i_0_j_0_fused" in session.loops()
    session.apply("split", loop="ax1", factors=[None, 4])  # loaded loops are addressable
    session.apply("vectorize", loop="ax1_1")
    assert_computes(session)
    session.undo()
    session.undo()
    assert session.undo().script == before.script

    # a loaded step survives save/load
    session.redo()
    again = ScheduleSession.from_json(json.loads(json.dumps(session.to_json())))
    assert _tvm.tvm_ffi.structural_equal(again.mod, session.mod)


@pytest.mark.parametrize(
    "trace, words",
    [
        ({"insts": []}, "[instructions, decisions]"),
        ([[["GetSBlock", [], ["nope", "main"], ["b0"]]], []], "does not apply"),
        ([[["NoSuchInst", [], [], []]], []], "is not a TVM schedule instruction"),
    ],
)
def test_load_trace_refuses_bad_traces(matmul, trace, words) -> None:
    session = ScheduleSession(matmul)
    before = session.snapshot
    with pytest.raises(PrimitiveError) as info:
        session.load_trace(trace)
    assert info.value.arg == "trace" and words in str(info.value)
    assert session.snapshot.script == before.script
    assert session.snapshot.step == before.step


def test_candidate(matmul, target) -> None:
    session = ScheduleSession(matmul, target)
    session.apply("split", loop="j", factors=[None, 16])
    cand = session.candidate()
    assert isinstance(cand, Candidate)
    assert cand.workload == matmul and cand.target == target
    assert cand.trace == session.snapshot.trace_json
    assert Candidate.from_json(json.loads(json.dumps(cand.to_json()))) == cand
    replayed = _tvm.Schedule(matmul.mod())
    _tvm.apply_trace_json(cand.trace, replayed)
    assert _tvm.tvm_ffi.structural_equal(replayed.mod, session.mod)
    cand.trace[0].clear()  # the candidate owns its copy
    assert session.snapshot.trace_json[0]
