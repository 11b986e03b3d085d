"""Trace and session files at their limits (issue 21): nesting, size, sessions read with their
steps, and the target a file was saved for. Every case is refused in one sentence naming the
file, or read exactly as ``ScheduleSession.load`` reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.cli import main
from explorer.errors import ExplorerError, PrimitiveError, TraceError
from explorer.session import ScheduleSession, check_trace_json, read_trace_file
from explorer.session._trace_check import (
    MAX_FILE_BYTES,
    MAX_FILE_NESTING,
    MAX_INSTRUCTIONS,
    MAX_TRACE_NESTING,
)
from explorer.target import Target
from explorer.workloads import get_workload

SMALL = get_workload("matmul", M=16, N=16, K=16)
SHAPE = ["matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16"]


def _saved_session() -> dict:
    session = ScheduleSession(SMALL)
    session.apply("split", loop="i", factors=[None, 4])
    return json.loads(json.dumps(session.to_json()))


SESSION = _saved_session()


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _places(value: object, path: tuple = ()) -> list[tuple]:
    """Every position in a JSON value, as a path of keys and indices."""
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _places(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _places(item, (*path, i))
    return out


def _put(value: object, path: tuple, new: object) -> object:
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    at = copy
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = new
    return copy


# -- nesting ------------------------------------------------------------------------------------
def test_a_900_deep_list_anywhere_in_a_session_is_one_sentence(tmp_path) -> None:
    """Seen: a 900-level list inside a trace's instruction passed the checks and ended in a
    RecursionError (exit 1) when it was pickled for the replay worker."""
    path = tmp_path / "deep.json"
    for place in _places(SESSION):
        path.write_text(json.dumps(_put(SESSION, place, _nested(900))))
        with pytest.raises(TraceError, match="nests lists or objects more than") as info:
            read_trace_file(path, SMALL)
        assert str(path) in str(info.value)
        with pytest.raises(ExplorerError, match="nests lists or objects more than"):
            ScheduleSession.load(path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(MAX_TRACE_NESTING + 1, 5000), where=st.integers(0, 10**6))
def test_a_trace_nested_too_deep_is_refused_before_it_is_copied(depth: int, where: int) -> None:
    trace = SESSION["trace"]
    places = [p for p in _places(trace) if p]
    deep = _put(trace, places[where % len(places)], _nested(depth))
    with pytest.raises(TraceError, match="nests lists or objects more than"):
        check_trace_json(deep)
    with pytest.raises(PrimitiveError, match="nests lists or objects more than"):
        ScheduleSession(SMALL).load_trace(deep)


def test_real_files_are_well_within_the_nesting_bounds() -> None:
    def depth(value: object) -> int:
        if isinstance(value, (list, dict)):
            items = value.values() if isinstance(value, dict) else value
            return 1 + max((depth(v) for v in items), default=0)
        return 0

    assert depth(SESSION["trace"]) <= MAX_TRACE_NESTING - 2
    loaded = ScheduleSession(SMALL)
    loaded.load_trace(SESSION["trace"])  # a `load` step holds a whole trace
    assert depth(loaded.to_json()) <= MAX_FILE_NESTING // 2


# -- size ---------------------------------------------------------------------------------------
def test_the_size_is_checked_before_the_content(tmp_path) -> None:
    """Seen: a 50 MB trace parsed for 38 s and 1.4 GB before "at most 10000 instructions". A
    file one byte over the limit and broken at its end says its size, so it was not parsed."""
    instruction = json.dumps(["GetSBlock", [], ["C", "main"], ["b0"]])
    count = MAX_FILE_BYTES // (len(instruction) + 2) + 1
    path = tmp_path / "big.json"
    path.write_text(f"[[{', '.join([instruction] * count)}], [] BROKEN")
    assert path.stat().st_size > MAX_FILE_BYTES
    with pytest.raises(TraceError, match="larger than 4 MiB"):
        read_trace_file(path, SMALL)
    # the largest trace allowed is far below the size limit, even as a session writes it
    most = json.dumps([json.loads(instruction)] * MAX_INSTRUCTIONS, indent=1)
    assert len(most) < MAX_FILE_BYTES / 2


def test_instructions_are_counted_before_the_trace_is_copied() -> None:
    too_many = [[["GetSBlock", [], ["C", "main"], ["b0"]]] * (MAX_INSTRUCTIONS + 1), []]
    too_many[0][-1] = object()  # the copy would refuse this; the count comes first
    with pytest.raises(TraceError, match=f"at most {MAX_INSTRUCTIONS} instructions"):
        check_trace_json(too_many)


def test_a_packed_schedule_saved_to_a_file_is_read_back(tmp_path) -> None:
    """Seen: the best of a tune, a packed schedule, was refused when notebook 02 read it back:
    TVM writes transform_layout's index map as a JSON graph in a string, and its pad value as
    null, which the check took for an undefined variable and a bad attribute."""
    session = ScheduleSession(SMALL)
    session.apply("cache_read", block="C", read_index=1)
    session.apply("transform_layout", block="C", read_index=1, axis=1, factor=8)
    path = tmp_path / "packed.json"
    path.write_text(json.dumps(session.snapshot.trace_json))
    assert read_trace_file(path, SMALL).trace == session.snapshot.trace_json
    assert ScheduleSession(SMALL).load_trace(read_trace_file(path, SMALL).trace).script == (
        session.snapshot.script
    )

    trace = json.loads(json.dumps(session.snapshot.trace_json))
    inst = next(i for i in trace[0] if i[0] == "TransformLayout")
    for bad in ('{"root_index": 0, "nodes": [{"type": "ir.Var"}]}', "{not json"):
        inst[1][1] = bad
        with pytest.raises(TraceError, match="TransformLayout has an input .* not an index map"):
            check_trace_json(trace)


# -- a saved session is read with its steps, and its target ---------------------------------------
def test_a_session_file_is_read_as_load_reads_it(tmp_path) -> None:
    """Seen: `measure --trace` took a session's trace and ignored its steps, while
    `ScheduleSession.load` refused the same file (its steps no longer gave that trace)."""
    edited = json.loads(json.dumps(SESSION))
    edited["steps"][0]["args"]["factors"] = [None, 8]  # the trace still says 4
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    with pytest.raises(ExplorerError) as loaded:
        ScheduleSession.load(path)
    with pytest.raises(TraceError) as read:
        read_trace_file(path, SMALL)
    assert str(loaded.value) == str(read.value)
    assert "steps no longer give its saved schedule" in str(read.value)

    steps_only = json.loads(json.dumps(SESSION))
    del steps_only["trace"]  # a session without its trace: the steps make it
    path.write_text(json.dumps(steps_only))
    checked = read_trace_file(path, SMALL)
    assert checked.trace == SESSION["trace"]
    assert checked.target == Target.from_json(SESSION["target"])


def test_a_session_target_that_is_not_valid_is_refused_as_load_refuses_it(tmp_path) -> None:
    bad = json.loads(json.dumps(SESSION))
    bad["target"]["mcpu"] = "pentium-9000"
    path = tmp_path / "bad-target.json"
    path.write_text(json.dumps(bad))
    for read in (ScheduleSession.load, lambda p: read_trace_file(p, SMALL)):
        with pytest.raises(ExplorerError, match="pentium-9000"):
            read(path)
    record = {"candidate": {"workload": SESSION["workload"], "target": 7, "trace": []}}
    path.write_text(json.dumps(record))
    with pytest.raises(TraceError, match="its target must be an object"):
        read_trace_file(path, SMALL)


def test_measuring_a_file_saved_for_another_target_says_so(tmp_path, capsys) -> None:
    """Seen: a session's target fields ignored without a word."""
    db = tmp_path / "records.db"
    elsewhere = json.loads(json.dumps(SESSION))
    here = Target.local_cpu()
    elsewhere["target"] = {**here.to_json(), "num_cores": 1, "name": "a one-core machine"}
    path = tmp_path / "elsewhere.json"
    path.write_text(json.dumps(elsewhere))
    code = main(["measure", *SHAPE, "--trace", str(path), "--db", str(db)])
    out = capsys.readouterr().out
    assert code in (0, 1), out  # measured (ok, or noisy on a busy machine)
    saved = Target.from_json(elsewhere["target"])
    assert f"note: {path} was saved for {saved.key()}; measuring it for {here.key()}" in out

    gpu = json.loads(json.dumps(SESSION))
    gpu["target"] = Target(kind="cuda", arch="sm_80").to_json()
    path.write_text(json.dumps(gpu))
    assert main(["measure", *SHAPE, "--trace", str(path), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "was saved for the cuda target cuda:sm_80" in err and "--target cuda" in err


# -- anything in a file -------------------------------------------------------------------------
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=30,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_JSON.map(json.dumps)
    | st.builds(  # anything, anywhere in a real session
        lambda place, value: json.dumps(_put(SESSION, place, value)),
        st.sampled_from(_places(SESSION)),
        _JSON,
    )
    | st.builds(  # anything, under up to 5000 lists (written by hand: json.dumps would recurse)
        lambda depth, value: "[" * depth + json.dumps(value) + "]" * depth,
        st.integers(0, 5000),
        _JSON,
    )
)
def test_any_json_in_a_file_is_read_or_refused_in_one_sentence(text, tmp_path_factory) -> None:
    path = Path(tmp_path_factory.mktemp("any")) / "file.json"
    path.write_text(text)
    try:
        read_trace_file(path, SMALL)
    except TraceError as exc:
        assert str(path) in str(exc) and "\n" not in str(exc).strip()
