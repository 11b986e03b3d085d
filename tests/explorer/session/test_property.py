"""Random primitive sequences (mostly illegal) never corrupt a session."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_helpers import assert_computes

from explorer import _tvm
from explorer.errors import PrimitiveError
from explorer.session import PRIMITIVES, ParamSpec, ScheduleSession
from explorer.workloads import get_workload

WORKLOADS = {
    "matmul": lambda: get_workload("matmul", M=32, N=32, K=32),
    "mm_relu": lambda: get_workload("session_mm_relu", N=32),
    "chain": lambda: get_workload("session_chain", N=32),
}
# a longer soak: SESSION_PROPERTY_EXAMPLES=500 pytest tests/explorer/session/test_property.py
MAX_EXAMPLES = int(os.environ.get("SESSION_PROPERTY_EXAMPLES", "35"))
FACTOR_ITEMS = st.sampled_from([None, None, 1, 2, 4, 8, 16, 32, 3, 0])


def _draw_arg(data: st.DataObject, spec: ParamSpec, session: ScheduleSession) -> Any:
    loops = session.loops() + ["nope"]
    blocks = session.blocks() + ["nope"]
    if spec.kind == "loop":
        return data.draw(st.sampled_from(loops))
    if spec.kind == "block":
        return data.draw(st.sampled_from(blocks))
    if spec.kind == "loops":
        return data.draw(st.lists(st.sampled_from(loops), min_size=1, max_size=4))
    if spec.kind == "factors":
        return data.draw(st.lists(FACTOR_ITEMS, min_size=1, max_size=3))
    if spec.kind == "int":
        return data.draw(st.integers(min_value=-1, max_value=8))
    if spec.kind == "choice":
        return data.draw(st.sampled_from([*spec.choices, "bogus"]))
    if spec.kind == "bool":
        return data.draw(st.booleans())
    return data.draw(st.text(max_size=3))


@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), workload=st.sampled_from(sorted(WORKLOADS)))
def test_random_sequences_never_corrupt_the_session(
    data: st.DataObject, workload: str, session_test_families: None
) -> None:
    session = ScheduleSession(WORKLOADS[workload]())
    for _ in range(data.draw(st.integers(min_value=1, max_value=8), label="steps")):
        action = data.draw(st.sampled_from([*PRIMITIVES, "undo", "redo"]), label="action")
        if action == "undo":
            session.undo()
            continue
        if action == "redo":
            session.redo()
            continue
        prim = PRIMITIVES[action]
        args = {
            spec.name: _draw_arg(data, spec, session)
            for spec in prim.params
            if spec.required or data.draw(st.booleans())
        }
        before = session.snapshot
        try:
            after = session.apply(action, **args)
        except PrimitiveError as err:
            assert err.primitive == action
            assert str(err).startswith(f"{action}(")
            now = session.snapshot
            assert now.script == before.script
            assert now.trace_json == before.trace_json
            assert now.step == before.step
            continue
        # a successful step: the trace alone rebuilds the module
        assert after.step.parent == before.step_id
        replayed = _tvm.Schedule(session.workload.mod())
        _tvm.apply_trace_json(after.trace_json, replayed)
        assert _tvm.tvm_ffi.structural_equal(replayed.mod, session.mod)
    assert_computes(session)


@settings(max_examples=MAX_EXAMPLES, deadline=None)
@given(
    read_index=st.integers(min_value=-1, max_value=3),
    axis=st.integers(min_value=-1, max_value=3),
    factor=st.integers(min_value=-1, max_value=70),
    copied=st.booleans(),
)
def test_any_packing_either_computes_or_is_refused_naming_its_argument(
    read_index: int, axis: int, factor: int, copied: bool
) -> None:
    """``transform_layout`` with any numbers, on a copy of B or on the function's own input."""
    session = ScheduleSession(get_workload("matmul", M=32, N=32, K=32))
    if copied:
        session.apply("cache_read", block="C", read_index=1)
    before = session.snapshot
    args = {"block": "C", "read_index": read_index, "axis": axis, "factor": factor}
    try:
        after = session.apply("transform_layout", **args)
    except PrimitiveError as err:
        assert err.arg in args and "\n" not in str(err)
        assert session.snapshot.trace_json == before.trace_json
        assert session.snapshot.script == before.script
        return
    assert copied and read_index == 1 and 0 <= axis <= 1 and 32 % factor == 0
    replayed = _tvm.Schedule(session.workload.mod())
    _tvm.apply_trace_json(after.trace_json, replayed)
    assert _tvm.tvm_ffi.structural_equal(replayed.mod, session.mod)
    assert_computes(session)
