"""Hand-scheduling: a ``ScheduleSession`` applies named primitives with a branching history.

``PRIMITIVES`` declares every primitive with its ``ParamSpec``\\ s (a UI builds forms from them);
``Snapshot`` (with ``BlockInfo``/``LoopInfo``) is what a UI renders after each step.
"""

from __future__ import annotations

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
from explorer.session._snapshot import Snapshot, Step, script_diff
from explorer.session._trace_check import (
    CheckedTrace,
    check_trace,
    check_trace_json,
    check_trace_on_module,
    refit_trace,
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
    "LoopInfo",
    "ParamKind",
    "ParamSpec",
    "Primitive",
    "ScheduleSession",
    "Snapshot",
    "Step",
    "StepContext",
    "CheckedTrace",
    "check_trace",
    "check_trace_json",
    "check_trace_on_module",
    "read_trace_file",
    "script_diff",
    "refit_trace",
    "translate_tvm_error",
]
