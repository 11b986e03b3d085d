"""``ScheduleSession``: hand-scheduling one workload, step by step, with a branching history."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from explorer import _tvm
from explorer.core import Candidate
from explorer.errors import ExplorerError, PrimitiveError, TraceError
from explorer.session._errors_map import error_sentence, translate
from explorer.session._names import NestIndex, index_schedule
from explorer.session._params import REQUIRED
from explorer.session._primitives import PRIMITIVES, Primitive, StepContext
from explorer.session._snapshot import Snapshot, Step, script_diff, trace_python
from explorer.session._trace_check import check_trace, compare_decisions, read_json_file
from explorer.target import Target
from explorer.types import JSON
from explorer.workloads import Workload

T = TypeVar("T")

FORMAT = "schedule-explorer/session"
FORMAT_VERSION = 1
LOAD = "load"  # the primitive name recorded for load_trace steps

# What TVM raises for an illegal step: ScheduleError and TVM's internal errors are
# RuntimeErrors; stale or malformed inputs are ValueError/TypeError.
_TVM_ERRORS = (RuntimeError, ValueError, TypeError)


@dataclass(frozen=True, slots=True)
class Branch:
    """One line of the history tree, from the root to a leaf.

    Attributes:
        tip: The id of the leaf step (``checkout(tip)`` goes there).
        steps: The steps from the root (excluded) to the tip.
        is_current: Whether the session's current step lies on this branch.
    """

    tip: int
    steps: tuple[Step, ...]
    is_current: bool


class _Node:
    """A history node. Its schedule is never edited after creation (steps edit copies)."""

    __slots__ = ("step", "sch", "parent", "children", "last_child", "_nest", "_cache")

    def __init__(self, step: Step, sch: Any, parent: _Node | None) -> None:
        self.step = step
        self.sch = sch
        self.parent = parent
        self.children: list[_Node] = []
        self.last_child: _Node | None = None  # redo follows the most recently visited child
        self._nest: NestIndex | None = None
        self._cache: dict[str, Any] = {}

    @property
    def nest(self) -> NestIndex:
        if self._nest is None:
            self._nest = index_schedule(self.sch)
        return self._nest

    def cached(self, key: str, make: Callable[[], T]) -> T:
        if key not in self._cache:
            self._cache[key] = make()
        value: T = self._cache[key]
        return value

    def script(self) -> str:
        return self.cached("script", lambda: str(self.sch.mod.script()))

    def trace_json(self) -> JSON:
        return self.cached("trace_json", lambda: _tvm.trace_to_json(self.sch.trace))

    def path(self) -> list[_Node]:
        nodes: list[_Node] = []
        node: _Node | None = self
        while node is not None:
            nodes.append(node)
            node = node.parent
        return nodes[::-1]


class ScheduleSession:
    """Schedule one workload by hand: apply named primitives, undo, redo, branch, save.

    Loops and blocks are referred to by readable names (see ``loops()``/``blocks()``), resolved
    again against the current schedule at every step. A step that fails raises
    ``PrimitiveError`` and leaves the session exactly as it was.

    Args:
        workload: What to schedule.
        target: Where it will run; defaults to ``Target.local_cpu()``.

    Example:
        >>> from explorer.workloads import get_workload
        >>> s = ScheduleSession(get_workload("matmul", M=64, N=64, K=64))
        >>> _ = s.apply("split", loop="i", factors=[None, 16])
        >>> s.loops()
        ['i_0', 'i_1', 'j', 'k']
        >>> _ = s.apply("parallel", loop="i_0")
        >>> s.undo().step.label
        "split(loop='i', factors=[None, 16])"
    """

    primitives: Mapping[str, Primitive] = MappingProxyType(PRIMITIVES)

    def __init__(self, workload: Workload, target: Target | None = None) -> None:
        self.workload = workload
        self.target = target if target is not None else Target.local_cpu()
        root_step = Step(
            id=0, primitive="start", args=MappingProxyType({}), parent=None, n_insts=0
        )
        self._root = _Node(root_step, _tvm.Schedule(workload.mod()), None)
        self._nodes: dict[int, _Node] = {0: self._root}
        self._cursor = self._root
        self._callbacks: list[Callable[[Snapshot], None]] = []

    # -- inspection ---------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        """The current state (script, diff, trace, loop nest)."""
        return self._snapshot(self._cursor)

    @property
    def mod(self) -> Any:
        """The current ``tvm.IRModule`` (immutable)."""
        return self._cursor.sch.mod

    def schedule(self) -> Any:
        """A copy of the current ``s_tir.Schedule`` to experiment with outside the session."""
        return self._cursor.sch.copy()

    def loops(self) -> list[str]:
        """Every loop's name as ``apply`` accepts it, in program order."""
        return self._cursor.nest.loop_names()

    def blocks(self) -> list[str]:
        """Every block's name (the root block excluded), in program order."""
        return self._cursor.nest.block_names()

    @property
    def history(self) -> tuple[Step, ...]:
        """The steps from the root (excluded) to the current step."""
        return tuple(node.step for node in self._cursor.path()[1:])

    def step(self, step_id: int) -> Step:
        """The step with id ``step_id`` (any branch)."""
        return self._node(step_id).step

    def branches(self) -> list[Branch]:
        """Every line of the history tree (root to leaf), oldest leaf first."""
        out = []
        for node in sorted(self._nodes.values(), key=lambda n: n.step.id):
            if node.children:
                continue
            path = node.path()
            is_current = any(n is self._cursor for n in path)
            out.append(Branch(node.step.id, tuple(n.step for n in path[1:]), is_current))
        return out

    # -- editing ------------------------------------------------------------------------------
    def apply(self, primitive_name: str, /, **args: Any) -> Snapshot:
        """Apply a primitive to the current schedule and make it the new current step.

        Args:
            primitive_name: A key of ``PRIMITIVES`` (``"split"``, ``"fuse"``...).
            **args: The primitive's parameters by name; loops and blocks by name.

        Returns:
            The new snapshot.

        Raises:
            PrimitiveError: unknown primitive or argument, bad value, or TVM refused the step;
                the session is unchanged.
        """
        prim = PRIMITIVES.get(primitive_name)
        if prim is None:
            raise PrimitiveError(
                str(primitive_name),
                None,
                f"no such primitive; primitives: {', '.join(PRIMITIVES)}",
            )
        normalised = self._normalise(prim, args)
        work = self._cursor.sch.copy()
        ctx = StepContext(prim.name, work, self._cursor.nest, self.target, normalised)
        try:
            prim.apply(ctx)
        except PrimitiveError:
            raise
        except _TVM_ERRORS as exc:
            raise translate(prim.name, exc, normalised) from None
        return self._push(prim.name, normalised, work)

    def load_trace(self, trace_json: JSON) -> Snapshot:
        """Replay a trace (e.g. a searched record's) on the unscheduled workload, as one step.

        The loaded schedule replaces the current one (the trace is complete, not a suffix) but
        the step is undoable; its loops and blocks are addressable by name like any others.
        The trace is checked first (``explorer.session.check_trace``): it is replayed in an
        isolated process, so no file can take this one down, and it is refused unless TVM
        replays it with exactly the decisions it records.

        Raises:
            PrimitiveError: the trace is malformed, does not apply to this workload, or would
                not replay as written; the session is unchanged.
        """
        try:
            plain = check_trace(self.workload, trace_json)
        except TraceError as exc:
            raise PrimitiveError(
                LOAD, "trace", str(exc), value=_trace_summary(trace_json), detail=exc.detail
            ) from None
        sch = _tvm.Schedule(self.workload.mod())
        try:
            _tvm.apply_trace_json(plain, sch)
            compare_decisions(plain, _tvm.trace_to_json(sch.trace)[1])
        except (*_TVM_ERRORS, TraceError) as exc:  # the isolated replay said it would work
            raise PrimitiveError(
                LOAD,
                "trace",
                f"the trace does not apply to {self.workload.key()}: {error_sentence(exc)}",
                value=_trace_summary(trace_json),
                detail=str(exc),
            ) from None
        return self._push(LOAD, {"trace": plain}, sch)

    # -- history ------------------------------------------------------------------------------
    def undo(self) -> Snapshot:
        """Go back one step (nothing happens at the root; see ``snapshot.can_undo``)."""
        if self._cursor.parent is not None:
            self._move(self._cursor.parent)
        return self.snapshot

    def redo(self) -> Snapshot:
        """Go forward to the most recently visited child (nothing happens at a leaf)."""
        if self._cursor.last_child is not None:
            self._move(self._cursor.last_child)
        return self.snapshot

    def reset(self) -> Snapshot:
        """Go back to the unscheduled program; the history stays reachable (``redo``)."""
        if self._cursor is not self._root:
            self._move(self._root)
        return self.snapshot

    def checkout(self, step_id: int) -> Snapshot:
        """Make any step of any branch the current one.

        Raises:
            KeyError: no step has that id.
        """
        node = self._node(step_id)
        if node is not self._cursor:
            self._move(node)
        return self.snapshot

    # -- hand-off -----------------------------------------------------------------------------
    def candidate(self) -> Candidate:
        """The current schedule as a ``Candidate`` for a measurer."""
        return Candidate(self.workload, self.target, self._plain_trace(self._cursor))

    def candidate_at(self, step_id: int) -> Candidate:
        """The schedule after step ``step_id`` (any branch) as a ``Candidate``; the current
        step stays as it is.

        Raises:
            KeyError: no step has that id.
        """
        return Candidate(self.workload, self.target, self._plain_trace(self._node(step_id)))

    def to_json(self) -> dict[str, Any]:
        """The current path as JSON: workload, target, the steps, and the resulting trace."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "tvm_version": _tvm.TVM_VERSION,
            "workload": self.workload.to_json(),
            "target": self.target.to_json(),
            "steps": [step.to_json() for step in self.history],
            "trace": self._plain_trace(self._cursor),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScheduleSession:
        """Rebuild a session saved by ``to_json`` by replaying its steps (each undoable).

        A hand-edited file is welcome as long as it still describes a session; whatever is
        wrong with it is named in one sentence (which field, which step).

        Raises:
            ExplorerError: not a saved session, a malformed field, or the steps no longer give
                the saved schedule.
            PrimitiveError: a saved step no longer applies (``step N:`` says which).
        """
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise ExplorerError(f"not a saved schedule session (format {FORMAT!r} expected)")
        if data.get("version") != FORMAT_VERSION:
            raise ExplorerError(f"unsupported session format version {data.get('version')!r}")
        try:
            workload = Workload.from_json(data.get("workload"))
            target = Target.from_json(data["target"]) if data.get("target") else None
        except (ExplorerError, TypeError, ValueError, KeyError) as exc:
            raise ExplorerError(f"the session's workload or target is not valid: {exc}") from None
        if _plain_json(workload.to_json()) != data.get("workload"):
            # A missing parameter would silently take its default, "32" would pass for 32.
            raise ExplorerError(
                f"the session's workload must describe it exactly as {workload.key()} does "
                f"(every shape parameter, numbers as numbers): {json.dumps(workload.to_json())}"
            )
        steps = data.get("steps", [])
        if not isinstance(steps, list):
            raise ExplorerError("the session's 'steps' must be a list of steps")
        session = cls(workload, target)
        for number, step in enumerate(steps, start=1):
            primitive, args = _saved_step(number, step)
            try:
                if primitive == LOAD:
                    session.load_trace(args.get("trace"))
                else:
                    session.apply(primitive, **args)
            except PrimitiveError as exc:
                raise PrimitiveError(
                    exc.primitive,
                    exc.arg,
                    f"step {number}: {exc.reason}",
                    value=exc.value,
                    detail=exc.detail,
                ) from None
        saved = data.get("trace")
        if saved is not None:
            try:
                plain = check_trace(session.workload, saved)
            except TraceError as exc:
                raise ExplorerError(f"the session's saved trace is not valid: {exc}") from None
            expected = _tvm.Schedule(session.workload.mod())
            _tvm.apply_trace_json(plain, expected)
            if not _tvm.tvm_ffi.structural_equal(expected.mod, session.mod):
                saved_version = data.get("tvm_version")
                why = (
                    f"it was saved with TVM {saved_version}, this is {_tvm.TVM_VERSION}"
                    if saved_version != _tvm.TVM_VERSION
                    else "its steps or its trace were edited"
                )
                raise ExplorerError(
                    "the session's steps no longer give its saved schedule (trace); "
                    f"{why}. Remove the 'trace' field to keep what the steps give"
                )
        return session

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``to_json()`` to ``path``."""
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ScheduleSession:
        """Read a session written by ``save``.

        Raises:
            ExplorerError: the file cannot be read or is not a saved session (the message
                names the file); ``from_json``'s errors otherwise.
        """
        data = read_json_file(path, what="a saved session", error=ExplorerError)
        try:
            return cls.from_json(data)
        except PrimitiveError:
            raise
        except ExplorerError as exc:
            raise ExplorerError(f"{os.fspath(path)}: {exc}") from None

    # -- events -------------------------------------------------------------------------------
    def on_change(self, callback: Callable[[Snapshot], None]) -> Callable[[], None]:
        """Call ``callback(snapshot)`` after every change; returns a function that unsubscribes.

        Callbacks run synchronously, in subscription order, after the change is committed; an
        exception in one propagates to the caller of the method that made the change.
        """
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return unsubscribe

    # -- internals ----------------------------------------------------------------------------
    def _normalise(self, prim: Primitive, args: Mapping[str, Any]) -> dict[str, Any]:
        names = [p.name for p in prim.params]
        for key in args:
            if key not in names:
                raise PrimitiveError(
                    prim.name,
                    key,
                    f"is not a parameter of {prim.name}; parameters: {', '.join(names)}",
                    value=args[key],
                )
        out: dict[str, Any] = {}
        for spec in prim.params:
            if spec.name not in args:
                if spec.default is REQUIRED:
                    raise PrimitiveError(
                        prim.name, spec.name, f"is required ({spec.help or spec.kind})"
                    )
                out[spec.name] = spec.default
                continue
            out[spec.name] = spec.coerce(prim.name, args[spec.name])
        return out

    def _push(self, primitive: str, args: Mapping[str, Any], sch: Any) -> Snapshot:
        parent = self._cursor
        step_id = max(self._nodes) + 1
        step = Step(
            id=step_id,
            primitive=primitive,
            args=MappingProxyType(dict(args)),
            parent=parent.step.id,
            n_insts=len(sch.trace.insts),
        )
        node = _Node(step, sch, parent)
        parent.children.append(node)
        self._nodes[step_id] = node
        self._move(node)
        return self.snapshot

    def _move(self, node: _Node) -> None:
        path = node.path()
        for parent, child in zip(path, path[1:], strict=False):
            parent.last_child = child
        self._cursor = node
        if self._callbacks:
            snap = self.snapshot
            for callback in list(self._callbacks):
                callback(snap)

    def _node(self, step_id: int) -> _Node:
        try:
            return self._nodes[step_id]
        except KeyError:
            raise KeyError(f"no step {step_id}; steps: {sorted(self._nodes)}") from None

    @staticmethod
    def _plain_trace(node: _Node) -> JSON:
        return json.loads(json.dumps(node.trace_json()))

    def _snapshot(self, node: _Node) -> Snapshot:
        parent = node.parent
        diff = ""
        if parent is not None:
            diff = node.cached(
                "diff",
                lambda: script_diff(
                    parent.script(),
                    node.script(),
                    f"step {parent.step.id}: {parent.step.label}",
                    f"step {node.step.id}: {node.step.label}",
                ),
            )
        nest = node.nest
        return Snapshot(
            workload=self.workload,
            target=self.target,
            step=node.step,
            path=tuple(n.step for n in node.path()[1:]),
            script=node.script(),
            diff=diff,
            trace_python=node.cached(
                "trace_py", lambda: trace_python(node.sch.trace, self.workload)
            ),
            trace_json=node.trace_json(),
            blocks=nest.blocks,
            loops=nest.loops,
            can_undo=parent is not None,
            can_redo=node.last_child is not None,
        )


def _trace_summary(trace_json: Any) -> str:
    """What a PrimitiveError shows as the value: the size of a trace, never the whole of it."""
    if isinstance(trace_json, list) and trace_json and isinstance(trace_json[0], list):
        return f"<{len(trace_json[0])} instructions>"
    return f"<{type(trace_json).__name__}>"


def _saved_step(number: int, step: Any) -> tuple[str, dict[str, Any]]:
    """A saved step's primitive and arguments, or an error naming what is wrong with it."""
    if not isinstance(step, Mapping):
        raise ExplorerError(f"step {number} of the session must be an object, not {step!r:.60}")
    primitive, args = step.get("primitive"), step.get("args", {})
    if not isinstance(primitive, str):
        raise ExplorerError(f"step {number} of the session has no 'primitive' name")
    if not isinstance(args, Mapping) or not all(isinstance(k, str) for k in args):
        raise ExplorerError(f"step {number} ({primitive}) must have 'args' as an object")
    return primitive, dict(args)


def _plain_json(value: Any) -> Any:
    """``value`` as it reads back from a JSON file (tuples become lists)."""
    return json.loads(json.dumps(value))
