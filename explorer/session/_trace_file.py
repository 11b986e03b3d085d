"""``read_trace_file``: the schedule in a file (a bare trace, a saved session, a record), checked.

A saved session is read as ``ScheduleSession.load`` reads it, steps and all: a file that the
notebook refuses (steps that no longer give the saved trace, a target that is not valid) is
refused here too, and a session saved without its trace gives the trace its steps make. The
target the file names is returned with the trace, so that the command line can say when it
measures for another one.
"""

from __future__ import annotations

import json
import os
from typing import Any

from explorer.errors import ExplorerError, TargetError, TraceError
from explorer.session._session import FORMAT, ScheduleSession
from explorer.session._trace_check import CheckedTrace, check_trace, read_json_file, refit_trace
from explorer.target import Target
from explorer.workloads import Workload


def read_trace_file(
    path: str | os.PathLike[str], workload: Workload, *, refit: bool = False
) -> CheckedTrace:
    """The checked trace in a file: a bare trace, a saved session, or a record's JSON.

    A file that says which workload it was made for (a session, a record) must name
    ``workload``: a trace recorded for another shape would be "repaired" into another schedule.
    With ``refit=True`` a file made for another shape of the same operator is re-fitted
    (``refit_trace``) and the notes say what changed.

    Raises:
        TraceError: unreadable, not JSON, not a trace, a session that does not load
            (``ScheduleSession.from_json``), made for another workload, or a trace that would
            not replay as written (``check_trace``).
    """
    name = os.fspath(path)
    data = read_json_file(path, what="a trace or a saved session", error=TraceError)
    if isinstance(data, dict) and data.get("format") == FORMAT:
        data = _session_as_candidate(name, data)
    if isinstance(data, dict) and isinstance(data.get("candidate"), dict):
        data = data["candidate"]  # a record, as `explorer export --format jsonl` writes one
    target = None
    if isinstance(data, dict):  # a saved session or a candidate: take its trace
        if "trace" not in data:
            raise TraceError(f"{name}: a JSON object without a 'trace' field is not a trace")
        saved_for = data.get("workload")
        same_family = isinstance(saved_for, dict) and saved_for.get("family") == workload.family
        exact = saved_for == json.loads(json.dumps(workload.to_json()))
        if saved_for is not None and not exact and not (refit and same_family):
            hint = " (--refit re-fits one to another shape of its operator)" if same_family else ""
            raise TraceError(
                f"{name} was saved for {_workload_key(saved_for)}, not {workload.key()}; "
                f"a schedule does not carry over to another workload{hint}"
            )
        target = _saved_target(name, data.get("target"))
        data = data["trace"]
    try:
        if refit:
            checked = refit_trace(workload, data)
        else:
            checked = CheckedTrace(check_trace(workload, data), ())
    except TraceError as exc:
        raise TraceError(f"{name}: {exc}", detail=exc.detail) from None
    return CheckedTrace(checked.trace, checked.notes, target)


def _session_as_candidate(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """A saved session as its workload, target and current trace, loaded as ``load`` does."""
    try:
        session = ScheduleSession.from_json(data)
    except ExplorerError as exc:
        raise TraceError(f"{name}: {exc}") from None
    return {
        "workload": json.loads(json.dumps(session.workload.to_json())),
        "target": data.get("target"),
        "trace": session.candidate().trace,
    }


def _saved_target(name: str, data: Any) -> Target | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TraceError(f"{name}: its target must be an object as Target.to_json writes one")
    try:
        return Target.from_json(data)
    except (TargetError, TypeError, ValueError) as exc:
        raise TraceError(f"{name}: its target is not valid: {exc}") from None


def _workload_key(data: Any) -> str:
    try:
        return Workload.from_json(data).key()
    except Exception:  # noqa: BLE001  (only for the message)
        return "another workload"
