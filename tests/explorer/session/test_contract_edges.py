"""The session's contract at the edges issue 8 found: names that collide, TVM's raw text as a
message, hand-edited session files."""

from __future__ import annotations

import json
import math

import pytest

from explorer.errors import ExplorerError, PrimitiveError
from explorer.session import ScheduleSession, refit_trace
from explorer.testing.recordings import SMALL, open_recording, recorded_trials
from explorer.workloads import get_workload, parse_expression


def _plain(error: Exception) -> str:
    text = str(error)
    assert "\n" not in text and "Check failed" not in text and "SRef" not in text, text
    return text


def test_loops_keep_unique_addressable_names_after_a_colliding_split() -> None:
    w = parse_expression("C[i, i_0] = A[i, i_0] * 2", shapes={"A": (64, 32)})
    session = ScheduleSession(w)
    session.apply("split", loop="i", factors=[None, 4])
    names = session.loops()
    assert len(set(names)) == len(names) == 3, names
    extents = {}
    for name in names:  # every name denotes exactly its own loop
        extents[name] = next(lp.extent for lp in session.snapshot.loops if lp.name == name)
        snap = session.apply("parallel", loop=name)
        assert next(lp.kind for lp in snap.loops if lp.name == name) == "parallel"
        session.undo()
    assert sorted(extents.values()) == [4, 16, 32]


def test_a_factor_beyond_int32_is_refused_in_words() -> None:
    session = ScheduleSession(SMALL)
    with pytest.raises(PrimitiveError) as info:
        session.apply("split", loop="i", factors=[None, 2**40])
    assert info.value.arg == "factors" and "int32" in _plain(info.value)


@pytest.fixture(scope="module")
def loaded() -> ScheduleSession:
    store = open_recording()
    trace = next(
        t.candidate.trace
        for t in recorded_trials(store, SMALL)
        if "DecomposeReduction" in json.dumps(t.candidate.trace)
    )
    store.close()
    session = ScheduleSession(SMALL)
    session.load_trace(trace)
    return session


def test_parallel_over_a_decomposed_reduction_is_explained(loaded: ScheduleSession) -> None:
    outer = loaded.loops()[0]
    with pytest.raises(PrimitiveError) as info:
        loaded.apply("parallel", loop=outer)
    text = _plain(info.value)
    assert "compact dataflow" not in text and "decomposed reduction" in text


def test_moving_an_incomplete_block_is_explained(loaded: ScheduleSession) -> None:
    update = next(b for b in loaded.blocks() if b.endswith("_update") or b == "C")
    with pytest.raises(PrimitiveError) as info:
        loaded.apply("reverse_compute_at", block=update, loop=loaded.loops()[0])
    text = _plain(info.value)
    assert "violates condition" not in text and update in text


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda d: d["steps"][0].pop("args"), "split"),  # args missing: the split lacks loop
        (lambda d: d["steps"][0].__setitem__("args", [1, 2]), "'args' as an object"),
        (lambda d: d["steps"].__setitem__(0, "split"), "step 1 of the session"),
        (lambda d: d["steps"][0].pop("primitive"), "no 'primitive' name"),
        (lambda d: d.__setitem__("steps", {"a": 1}), "'steps' must be a list"),
        (lambda d: d.__setitem__("workload", {"family": "nope"}), "workload or target"),
        (lambda d: d.__setitem__("workload", 5), "workload or target"),
        (lambda d: d.__setitem__("target", {"kind": 3, "bogus": 1}), "workload or target"),
        (lambda d: d["steps"][0]["args"].__setitem__("factors", [None, 0]), "step 1"),
        (lambda d: d.__setitem__("trace", [[["Bogus", [], [], []]], []]), "saved trace"),
    ],
)
def test_hand_edited_session_files_get_one_sentence(edit, words) -> None:
    session = ScheduleSession(SMALL)
    session.apply("split", loop="i", factors=[None, 16])
    data = json.loads(json.dumps(session.to_json()))
    edit(data)
    with pytest.raises(ExplorerError) as info:
        ScheduleSession.from_json(data)
    assert words in _plain(info.value)
    assert not isinstance(info.value, (KeyError, TypeError))


def test_edited_trace_is_not_blamed_on_the_tvm_version() -> None:
    session = ScheduleSession(SMALL)
    session.apply("split", loop="i", factors=[None, 16])
    data = session.to_json()
    other = ScheduleSession(SMALL)
    other.apply("split", loop="i", factors=[None, 32])
    data["trace"] = other.snapshot.trace_json
    with pytest.raises(ExplorerError) as info:
        ScheduleSession.from_json(data)
    assert "TVM" not in str(info.value).split(";")[1] and "edited" in str(info.value)


def test_refit_is_explicit_and_names_every_change(tmp_path) -> None:
    store = open_recording(tmp_path)
    trace = next(
        t.candidate.trace
        for t in recorded_trials(store, SMALL)
        if "SamplePerfectTile" in json.dumps(t.candidate.trace)
    )
    store.close()
    other = get_workload("matmul", M=60, N=64, K=50)
    with pytest.raises(PrimitiveError, match="--refit"):  # never implicitly
        ScheduleSession(other).load_trace(trace)
    refit = refit_trace(other, trace)
    assert refit.notes and all("re-fitted to" in note for note in refit.notes)
    session = ScheduleSession(other)
    snap = session.load_trace(refit.trace)  # now it replays exactly as written
    assert sorted(snap.trace_json[1]) == sorted(refit.trace[1])
    kinds = [inst[0] for inst in trace[0]]
    changed = {i for i, (a, b) in enumerate(zip(trace[1], refit.trace[1], strict=True)) if a != b}
    assert len(changed) == len(refit.notes)
    for index, factors in refit.trace[1]:
        if kinds[index] == "SamplePerfectTile":
            assert math.prod(factors) in (60, 64, 50)


def test_refit_from_the_cli_prints_the_changes(tmp_path, capsys) -> None:
    from explorer.cli import main

    store = open_recording(tmp_path)
    trace = next(
        t.candidate.trace
        for t in recorded_trials(store, SMALL)
        if t.result.is_ok and "SamplePerfectTile" in json.dumps(t.candidate.trace)
    )
    store.close()
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    argv = ["measure", "matmul", "-p", "M=48", "-p", "N=64", "-p", "K=64", "--trace", str(path)]
    db = ["--db", str(tmp_path / "r.db"), "--repeat", "1"]
    assert main([*argv, *db]) == 2 and "--refit" in capsys.readouterr().err
    assert main([*argv, *db, "--refit"]) == 0
    out = capsys.readouterr().out
    assert "refit: instruction" in out and "matches NumPy" in out
