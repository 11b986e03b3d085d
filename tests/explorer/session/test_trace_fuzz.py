"""Untrusted traces: thousands of random mutations of real traces through ``load_trace``.

The contract (issue 8): the test process never dies, and every mutation is either applied
exactly as written or refused with one plain sentence, the session untouched; no decision is
ever changed silently. The regressions the issue reproduced come first, by name.
"""

from __future__ import annotations

import copy
import functools
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import _tvm
from explorer.errors import PrimitiveError, TraceError
from explorer.session import ScheduleSession, check_trace_json
from explorer.testing.recordings import SMALL, open_recording, recorded_trials
from explorer.testing.sessions import hand_session
from explorer.workloads import get_workload


@functools.lru_cache(maxsize=1)
def _real_traces() -> tuple[str, ...]:
    """Searched traces of matmul 64^3 from the shipped recording, plus a hand-made one."""
    store = open_recording()
    texts = {json.dumps(t.candidate.trace) for t in recorded_trials(store, SMALL)[:40]}
    store.close()
    texts.add(json.dumps(hand_session(SMALL).candidate().trace))
    return tuple(sorted(texts))


@functools.lru_cache(maxsize=1)
def _session() -> ScheduleSession:
    return ScheduleSession(SMALL)


def _searched() -> list:
    return [json.loads(t) for t in _real_traces() if '"SamplePerfectTile"' in t]


def _tile(trace: list) -> tuple[int, list[int]]:
    """The first tile decision of a searched trace: (instruction index, factors)."""
    kinds = [inst[0] for inst in trace[0]]
    return next((i, d) for i, d in trace[1] if kinds[i] == "SamplePerfectTile")


def _assert_refused_plainly(session: ScheduleSession, trace: object) -> PrimitiveError:
    before = session.snapshot
    with pytest.raises(PrimitiveError) as info:
        session.load_trace(trace)
    _assert_plain(str(info.value))
    assert session.snapshot.step == before.step and session.snapshot.script == before.script
    return info.value


def _assert_plain(message: str) -> None:
    assert "\n" not in message, message
    for raw in ("Check failed", "Traceback", "@T.prim_func", "0x", "ffi."):
        assert raw not in message, message
    assert len(message) < 400, message


# -- the reproductions -------------------------------------------------------------------
def test_zero_factor_refused_instead_of_sigfpe() -> None:
    trace = copy.deepcopy(_searched()[0])
    index, factors = _tile(trace)
    position = next(p for p, (i, _) in enumerate(trace[1]) if i == index)
    trace[1][position] = [index, [*factors[:-2], 0, math.prod(factors)]]
    error = _assert_refused_plainly(_session(), trace)
    assert f"instruction {index}" in str(error) and "positive" in str(error)


def test_decision_for_missing_instruction_refused_instead_of_sigsegv() -> None:
    trace = copy.deepcopy(_searched()[0])
    trace[1][0] = [999, trace[1][0][1]]
    error = _assert_refused_plainly(_session(), trace)
    assert "instruction 999" in str(error)


def test_decision_that_does_not_fit_is_not_repaired_silently() -> None:
    trace = copy.deepcopy(_searched()[0])
    index, factors = _tile(trace)
    position = next(p for p, (i, _) in enumerate(trace[1]) if i == index)
    trace[1][position] = [index, [2] * len(factors)]
    error = _assert_refused_plainly(_session(), trace)
    text = str(error)
    assert f"instruction {index}" in text and json.dumps([2] * len(factors)) in text
    assert "TVM would have used" in text and "extent 64" in text


def test_truncated_decisions_are_not_resampled() -> None:
    trace = copy.deepcopy(_searched()[0])
    dropped = trace[1].pop()
    error = _assert_refused_plainly(_session(), trace)
    assert f"instruction {dropped[0]}" in str(error) and "no decision" in str(error)


def test_trace_for_another_shape_is_refused() -> None:
    other = get_workload("matmul", M=64, N=64, K=63)
    trace = _searched()[0]
    with pytest.raises(PrimitiveError, match="another shape"):
        ScheduleSession(other).load_trace(trace)


@pytest.mark.parametrize(
    "value",
    ["a string", 5, None, {"trace": 5}, [1, 2, 3], [[["Split"]], []], float("nan")],
)
def test_non_traces_are_refused(value: object) -> None:
    _assert_refused_plainly(_session(), value)


def test_real_traces_load_exactly() -> None:
    session = ScheduleSession(SMALL)
    for text in _real_traces():
        trace = json.loads(text)
        snap = session.load_trace(trace)
        assert sorted(snap.trace_json[1]) == sorted(trace[1])
        assert [inst[0] for inst in snap.trace_json[0]] == [inst[0] for inst in trace[0]]


def test_static_check_names_the_instruction() -> None:
    with pytest.raises(TraceError, match=r"instruction 0: 'Bogus' is not a TVM"):
        check_trace_json([[["Bogus", [], [], []]], []])


# -- random mutations ----------------------------------------------------------------------------
_NAMES = ["None", "b0", "l1", "l2", "v5", "zz", '"x"', "Split", "SamplePerfectTile", ""]
_KINDS = [
    "Split",
    "Fuse",
    "Reorder",
    "Parallel",
    "Vectorize",
    "SamplePerfectTile",
    "SampleCategorical",
    "GetLoops",
    "GetSBlock",
    "Annotate",
    "Unroll",
    "Bogus",
    "",
]
# Messages echo a bit of the bad value; without "x", "." and "#" no random text can look like
# the TVM internals a message must not contain (0x addresses, ffi. types, For#0 objects).
_TEXT = st.text(alphabet=st.characters(blacklist_characters="x.#"), max_size=6)
_KEYS = st.text(alphabet=st.characters(blacklist_characters="x.#"), max_size=3)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-3, 130),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_NAMES),
    _TEXT,
)
_JSON = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_KEYS, inner),
    max_leaves=10,
)
_SMALL_INTS = st.integers(-3, 130)


@st.composite
def _mutations(draw: st.DrawFn) -> object:
    trace = copy.deepcopy(json.loads(draw(st.sampled_from(_real_traces()))))
    for _ in range(draw(st.integers(1, 3))):
        is_pair = isinstance(trace, list) and len(trace) == 2
        insts, decisions = (
            trace if is_pair and all(isinstance(p, list) for p in trace) else ([], [])
        )
        # Decision entries still shaped [index, value] (an earlier op may have broken some).
        pairs = [d for d in decisions if isinstance(d, list) and len(d) == 2]
        op = draw(st.integers(0, 12))
        if op == 0 and pairs:  # a decision's value: a tile, an index, anything
            pair = pairs[draw(st.integers(0, len(pairs) - 1))]
            pair[1] = draw(st.one_of(st.lists(_SMALL_INTS, max_size=6), _SMALL_INTS, _JSON))
        elif op == 1 and pairs:  # a tile re-factored with the same product, or permuted
            pair = pairs[draw(st.integers(0, len(pairs) - 1))]
            if isinstance(pair[1], list) and pair[1]:
                pair[1] = draw(st.permutations(pair[1]))
        elif op == 2 and pairs:  # a decision's index
            pair = pairs[draw(st.integers(0, len(pairs) - 1))]
            pair[0] = draw(st.one_of(st.integers(-5, len(insts) + 5), _JSON))
        elif op == 3 and decisions:  # drop, duplicate or truncate decisions
            i = draw(st.integers(0, len(decisions) - 1))
            choice = draw(st.integers(0, 2))
            if choice == 0:
                del decisions[i]
            elif choice == 1:
                decisions.append(copy.deepcopy(decisions[i]))
            else:
                del decisions[i:]
        elif op == 4 and insts:  # truncate or drop instructions
            i = draw(st.integers(0, len(insts) - 1))
            if draw(st.booleans()):
                del insts[i:]
            else:
                del insts[i]
        elif op == 5 and len(insts) > 1:  # swap two instructions
            i, j = draw(st.integers(0, len(insts) - 1)), draw(st.integers(0, len(insts) - 1))
            insts[i], insts[j] = insts[j], insts[i]
        elif op == 6 and insts:  # an instruction's name
            inst = insts[draw(st.integers(0, len(insts) - 1))]
            if isinstance(inst, list) and inst:  # (op 10 may have made it anything)
                inst[0] = draw(st.one_of(st.sampled_from(_KINDS), _JSON))
        elif op in (7, 8, 9) and insts:  # an input, an attribute or an output
            inst = insts[draw(st.integers(0, len(insts) - 1))]
            part = inst[op - 6] if isinstance(inst, list) and len(inst) == 4 else None
            if isinstance(part, list) and part:
                part[draw(st.integers(0, len(part) - 1))] = draw(_JSON)
            elif isinstance(inst, list) and len(inst) == 4:
                inst[op - 6] = draw(_JSON)
        elif op == 10 and insts:  # a whole instruction becomes any JSON
            insts[draw(st.integers(0, len(insts) - 1))] = draw(_JSON)
        elif op == 11:  # the whole file is any JSON
            trace = draw(_JSON)
        # op 12: unchanged (a real trace must load exactly)
    return trace


@settings(
    max_examples=3000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
@given(_mutations())
def test_random_mutations_apply_exactly_or_are_refused_plainly(trace: object) -> None:
    session = _session()
    before = session.snapshot
    try:
        snap = session.load_trace(trace)
    except PrimitiveError as error:
        _assert_plain(str(error))
        assert session.snapshot.step == before.step
        return
    # Applied: exactly as written, decision for decision, instruction for instruction.
    assert isinstance(trace, list)
    assert sorted(snap.trace_json[1]) == sorted(trace[1])
    assert [inst[0] for inst in snap.trace_json[0]] == [inst[0] for inst in trace[0]]
    replayed = _tvm.Schedule(SMALL.mod())
    _tvm.apply_trace_json(snap.trace_json, replayed)
    assert _tvm.tvm_ffi.structural_equal(replayed.mod, session.mod)
    session.undo()
