"""What a session shows after each step: frozen ``Step`` and ``Snapshot`` values."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from explorer import _tvm
from explorer.session._names import BlockInfo, LoopInfo
from explorer.session._params import jsonable, shown
from explorer.target import Target
from explorer.types import JSON
from explorer.workloads import Workload


@dataclass(frozen=True, slots=True)
class Step:
    """One user action in the history.

    Attributes:
        id: Unique within the session; 0 is the unscheduled root.
        primitive: The primitive's name, or ``"load"`` for ``load_trace``.
        args: The normalised arguments (lists as tuples).
        parent: The id of the step it was applied after (``None`` for the root).
        n_insts: The trace length after this step.
    """

    id: int
    primitive: str
    args: Mapping[str, Any]
    parent: int | None
    n_insts: int

    @property
    def label(self) -> str:
        """The call as a user would type it: ``split(loop='i', factors=[None, 16])``."""
        if self.primitive == "load":
            insts = self.args.get("trace")
            count = len(insts[0]) if isinstance(insts, (list, tuple)) and insts else 0
            return f"load(trace=<{count} instructions>)"
        if self.parent is None:
            return "(unscheduled)"
        inner = ", ".join(f"{k}={shown(v)!r}" for k, v in self.args.items() if v is not None)
        return f"{self.primitive}({inner})"

    def to_json(self) -> dict[str, Any]:
        return {"primitive": self.primitive, "args": jsonable(dict(self.args))}


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state of a session after a step; immutable, cheap to keep.

    Attributes:
        workload: What is scheduled.
        target: Where it will run.
        step: The step this snapshot follows (the root step for the unscheduled program).
        path: The steps from the root to here (root excluded), i.e. what ``undo`` walks back.
        script: The TVMScript of the module.
        diff: A unified diff of ``script`` against the previous step's (empty at the root).
        trace_python: The trace as runnable Python (``def apply_trace(sch): ...``).
        trace_json: The trace as plain JSON (what ``Candidate.trace`` holds). Do not mutate.
        blocks: Every block with its loops, outer to inner (for a tree or table view).
        loops: Every loop once, in program order.
        can_undo: Whether ``undo()`` would move.
        can_redo: Whether ``redo()`` would move.
    """

    workload: Workload
    target: Target
    step: Step
    path: tuple[Step, ...]
    script: str
    diff: str
    trace_python: str
    trace_json: JSON
    blocks: tuple[BlockInfo, ...]
    loops: tuple[LoopInfo, ...]
    can_undo: bool
    can_redo: bool

    @property
    def step_id(self) -> int:
        return self.step.id

    @property
    def loop_names(self) -> list[str]:
        return [lp.name for lp in self.loops]

    @property
    def block_names(self) -> list[str]:
        return [b.name for b in self.blocks]

    def loop_nest_text(self) -> str:
        """The loop nest per block as indented text (a quick look without a UI)."""
        lines = []
        for block in self.blocks:
            lines.append(f"block {block.name} [{block.iter_kinds}]")
            for lp in block.loops:
                lines.append("  " * (lp.depth + 1) + lp.label)
        return "\n".join(lines)


def trace_python(trace: Any, workload: Workload) -> str:
    """The trace as a runnable module: ``apply_trace(sch)`` replays it on a fresh schedule."""
    body = [f"    {line}" for line in trace.as_python()] or ["    pass"]
    header = [
        f"# Schedule for {workload.key()} (TVM {_tvm.TVM_VERSION}).",
        "# Replay: sch = s_tir.Schedule(workload.mod()); apply_trace(sch)",
        "from tvm import s_tir",
        "",
        "",
        "def apply_trace(sch: s_tir.Schedule) -> None:",
    ]
    return "\n".join(header + body) + "\n"


def script_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """A unified diff, one line per line (a script's last line has no newline: kept as is,
    difflib glued the next diff line onto it)."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), before_name, after_name, lineterm=""
    )
    return "".join(line + "\n" for line in lines)
