"""Hand-scheduling: a ``ScheduleSession`` applies named primitives with a branching history.

``PRIMITIVES`` declares every primitive with its ``ParamSpec``\\ s (a UI builds forms from them);
``Snapshot`` (with ``BlockInfo``/``LoopInfo``) is what a UI renders after each step.
"""

from __future__ import annotations

from explorer.session._arguments import parse_arguments, parse_factors, parse_int, parse_loops
from explorer.session._errors_map import translate as translate_tvm_error
from explorer.session._names import BlockInfo, LoopInfo
from explorer.session._params import PARAM_KINDS, REQUIRED, ParamKind, ParamSpec
from explorer.session._primitives import (
    ANNOTATION_KEYS,
    PRIMITIVES,
    STORAGE_SCOPES,
    THREAD_AXES,
    Primitive,
    StepContext,
)
from explorer.session._session import Branch, ScheduleSession
from explorer.session._snapshot import Snapshot, Step, script_diff, trace_python
from explorer.session._trace_check import (
    CheckedTrace,
    check_trace,
    check_trace_json,
    check_trace_on_module,
    refit_trace,
    replay_decisions,
)
from explorer.session._trace_file import read_trace_file

__all__ = [
    "ANNOTATION_KEYS",
    "PARAM_KINDS",
    "PRIMITIVES",
    "REQUIRED",
    "STORAGE_SCOPES",
    "THREAD_AXES",
    "BlockInfo",
    "Branch",
    "CheckedTrace",
    "LoopInfo",
    "ParamKind",
    "ParamSpec",
    "Primitive",
    "ScheduleSession",
    "Snapshot",
    "Step",
    "StepContext",
    "check_trace",
    "check_trace_json",
    "check_trace_on_module",
    "parse_arguments",
    "parse_factors",
    "parse_int",
    "parse_loops",
    "read_trace_file",
    "refit_trace",
    "replay_decisions",
    "script_diff",
    "trace_python",
    "translate_tvm_error",
]
