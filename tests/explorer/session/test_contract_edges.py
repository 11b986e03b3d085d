"""The session's contract at the edges issue 8 found: names that collide, TVM's raw text as a
message, hand-edited session files."""

from __future__ import annotations

import json
import math

import pytest

from explorer.errors import ExplorerError, PrimitiveError, TraceError
from explorer.session import ScheduleSession, read_trace_file, refit_trace
from explorer.session._trace_check import MAX_FILE_BYTES
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


def _recorded_trace(directory, needle: str, *, ok: bool = False) -> list:
    """The first recorded matmul 64^3 trace that contains ``needle`` (and measured ok)."""
    store = open_recording(directory)
    trace = next(
        t.candidate.trace
        for t in recorded_trials(store, SMALL)
        if needle in json.dumps(t.candidate.trace) and (t.result.is_ok or not ok)
    )
    store.close()
    return trace


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> ScheduleSession:
    session = ScheduleSession(SMALL)
    session.load_trace(_recorded_trace(tmp_path_factory.mktemp("rec"), "DecomposeReduction"))
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


def test_refit_is_explicit_and_names_every_change(tmp_path) -> None:
    trace = _recorded_trace(tmp_path, "SamplePerfectTile")
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

    trace = _recorded_trace(tmp_path, "SamplePerfectTile", ok=True)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    argv = ["measure", "matmul", "-p", "M=48", "-p", "N=64", "-p", "K=64", "--trace", str(path)]
    db = ["--db", str(tmp_path / "r.db"), "--repeat", "1"]
    assert main([*argv, *db]) == 2 and "--refit" in capsys.readouterr().err
    assert main([*argv, *db, "--refit"]) == 0
    out = capsys.readouterr().out
    assert "refit: instruction" in out and "matches NumPy" in out


# -- found by trying it as a new user ------------------------------------------------------------
def test_tvm_refusals_inside_a_trace_are_told_in_words(tmp_path) -> None:
    trace = _recorded_trace(tmp_path, "CacheWrite")
    kinds = [inst[0] for inst in trace[0]]
    outer = [inst for inst in trace[0] if inst[0] == "GetLoops"][-1][3][0]
    vectorize_outer = json.loads(json.dumps(trace))
    vectorize_outer[0].append(["Vectorize", [outer], [], []])
    bad_index = json.loads(json.dumps(trace))
    bad_index[0][kinds.index("CacheWrite")][2][0] = 5
    repeated = json.loads(json.dumps(trace))
    reorder = repeated[0][kinds.index("Reorder")][1]
    reorder[1] = reorder[0]
    session = ScheduleSession(SMALL)
    for bad, words in (
        (vectorize_outer, "cannot be vectorized"),
        (bad_index, "the index must be in 0..0"),
        (repeated, "names a loop twice"),
    ):
        with pytest.raises(PrimitiveError) as info:
            session.load_trace(bad)
        text = _plain(info.value)
        assert words in text, text
        for raw in ("For#", "SBlock#", "SRef", "buffer_index", "\x00"):
            assert raw not in text, text


def test_files_that_are_not_sessions_get_one_sentence_naming_them(tmp_path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: a byte too many, of zeros, without writing them
        fh.truncate(MAX_FILE_BYTES + 1)
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)))
    cases = {big: "larger than 4 MiB", binary: "not a JSON file", tmp_path: "is a folder"}
    for path, words in cases.items():
        with pytest.raises(ExplorerError) as info:
            ScheduleSession.load(path)
        assert words in _plain(info.value) and str(path) in str(info.value)
        with pytest.raises(ExplorerError, match=words):
            read_trace_file(path, SMALL)


def test_a_saved_workload_must_be_described_exactly(tmp_path) -> None:
    session = ScheduleSession(SMALL)
    session.apply("split", loop="i", factors=[None, 16])
    for edit in (
        lambda w: w["params"].pop("K"),  # would silently become K=256
        lambda w: w["params"].__setitem__("M", "64"),  # "64" would pass for 64
    ):
        data = json.loads(json.dumps(session.to_json()))
        edit(data["workload"])
        with pytest.raises(ExplorerError, match="exactly"):
            ScheduleSession.from_json(data)


def test_bom_records_and_other_operators(tmp_path) -> None:
    session = ScheduleSession(SMALL)
    session.apply("split", loop="i", factors=[None, 16])
    with_bom = tmp_path / "bom.json"
    with_bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(session.to_json()).encode())
    assert read_trace_file(with_bom, SMALL).trace == session.candidate().trace
    record = tmp_path / "record.json"  # one line of `explorer export --format jsonl`
    record.write_text(json.dumps({"id": 1, "candidate": session.candidate().to_json()}))
    assert read_trace_file(record, SMALL).trace == session.candidate().trace
    conv = get_workload("conv2d", N=1, CI=4, CO=4, H=8, W=8)
    with pytest.raises(TraceError) as info:
        read_trace_file(with_bom, conv)
    assert "--refit" not in str(info.value)  # re-fitting changes shapes, not operators
    other_shape = get_workload("matmul", M=64, N=64, K=32)
    with pytest.raises(TraceError, match="--refit"):
        read_trace_file(with_bom, other_shape)
