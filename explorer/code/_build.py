"""The code a schedule compiles to, from the same build the measurement makes."""

from __future__ import annotations

from dataclasses import dataclass

from explorer import _tvm
from explorer.core import Candidate


@dataclass(frozen=True, slots=True)
class GeneratedCode:
    """A candidate's generated code.

    Attributes:
        target: the target it was built for (``str(Target)``).
        asm: the CPU's assembly (x86 AT&T syntax here); ``None`` for a target without one.
        llvm_ir: the LLVM IR LLVM compiled it from (``None`` likewise).
        device_source: a GPU target's kernel source (CUDA C), else ``None``.
        error: why there is no code (the trace did not replay, or TVM refused to compile it).
    """

    target: str
    asm: str | None
    llvm_ir: str | None
    device_source: str | None = None
    error: str | None = None


def generated_code(candidate: Candidate) -> GeneratedCode:
    """Replay ``candidate``'s trace and compile it as a measurement does (a schedule that
    does not compile is a result: ``error`` says why)."""
    try:
        sch = _tvm.Schedule(candidate.workload.mod())
        _tvm.apply_trace_json(candidate.trace, sch)
        executable = _tvm.compile_mod(sch.mod, candidate.target.to_tvm())
    except (_tvm.ScheduleError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        return GeneratedCode(str(candidate.target), None, None, error=first)
    host = executable.mod
    if candidate.target.kind == "cuda":
        device = host.imports[0].inspect_source() if host.imports else None
        return GeneratedCode(str(candidate.target), None, None, device)
    return GeneratedCode(
        str(candidate.target), host.inspect_source("asm"), host.inspect_source("ll")
    )
