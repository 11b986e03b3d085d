"""The instruction mix of a schedule's code and its hot loop (``code_mix``).

Counted statically, from the listing: the hot loop is the innermost loop doing the most
floating-point work per pass (in a kernel without arithmetic, the one storing most), which is
where a tensor kernel spends its time; its counts are per pass (one iteration of the loop as
written, after LLVM's unrolling). The total counts every instruction of the compute functions
once, not as often as it runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from explorer.code._asm import AsmFunction, Instruction, parse_functions

FLOAT_BYTES = 4  # the lanes counted are float32 lanes (``Instruction.lanes``)


@dataclass(frozen=True, slots=True)
class InstructionMix:
    """Counts of instructions by what they do.

    Attributes:
        instructions: every instruction counted.
        zmm, ymm, xmm: vector instructions on 512-, 256- and 128-bit registers (by their widest
            register; scalar floating-point code also runs in xmm registers and is not counted).
        fma: vector fused multiply-adds; ``vector_arith``: other packed floating-point
            arithmetic; ``scalar_arith``: scalar floating-point arithmetic (FMA included).
        loads, stores: memory reads and writes, vector or scalar (an arithmetic instruction with
            a memory operand counts as a load too), stack spills excepted.
        broadcasts: broadcasts, shuffles and permutes (an embedded ``{1toN}`` broadcast too).
        spills: loads and stores of the stack (registers that did not fit).
        branches: jumps, conditional or not.
        flops: floating-point operations (an FMA lane is two).
        loaded_bytes: bytes the loads read (a broadcast reads one element).
    """

    instructions: int = 0
    zmm: int = 0
    ymm: int = 0
    xmm: int = 0
    fma: int = 0
    vector_arith: int = 0
    scalar_arith: int = 0
    loads: int = 0
    stores: int = 0
    broadcasts: int = 0
    spills: int = 0
    branches: int = 0
    flops: float = 0.0
    loaded_bytes: float = 0.0

    @property
    def intensity(self) -> float | None:
        """Floating-point operations per loaded byte (``None`` when nothing is loaded)."""
        return self.flops / self.loaded_bytes if self.loaded_bytes else None

    @property
    def vector_bits(self) -> int:
        """The widest vector register used (0: scalar code)."""
        return 512 if self.zmm else 256 if self.ymm else 128 if self.xmm else 0


_COUNTS = ("instructions", "zmm", "ymm", "xmm", "fma", "vector_arith", "scalar_arith", "loads",
           "stores", "broadcasts", "spills", "branches")  # fmt: skip


def mix_of(instructions: Sequence[Instruction]) -> InstructionMix:
    """The mix of ``instructions``, each counted once."""
    counts: dict[str, int] = dict.fromkeys(_COUNTS, 0)
    flops = loaded = 0.0
    for inst in instructions:
        classes = inst.classes
        counts["instructions"] += 1
        register = _register(inst.operands)
        if register and _packed(inst):
            counts[register] += 1
        first = classes[0]
        counts["fma"] += first.startswith("vfma")
        counts["vector_arith"] += first == "varith"
        counts["scalar_arith"] += first == "scalar_fp"
        counts["broadcasts"] += "shuffle" in classes
        counts["spills"] += "spill" in classes
        counts["branches"] += first == "branch"
        counts["stores"] += "vstore" in classes or "sstore" in classes
        if "vload" in classes or "sload" in classes:
            counts["loads"] += 1
            one = "broadcast" in inst.mnemonic or "{1to" in inst.operands or "sload" in classes
            loaded += FLOAT_BYTES * (1 if one else inst.lanes)
        flops += inst.flops
    return InstructionMix(**counts, flops=flops, loaded_bytes=loaded)


def _packed(inst: Instruction) -> bool:
    """A vector instruction, not a scalar one that happens to use an xmm register."""
    if "broadcast" in inst.mnemonic:
        return True
    scalar = inst.mnemonic.endswith(("ss", "sd"))
    return not scalar and not {"scalar_fp", "sload", "sstore"} & set(inst.classes)


def _register(operands: str) -> str | None:
    for name in ("zmm", "ymm", "xmm"):
        if f"%{name}" in operands:
            return name
    return None


@dataclass(frozen=True, slots=True)
class CodeMix:
    """A listing's instruction mix: in total, and in its hot loop.

    Attributes:
        total: every instruction of the compute functions, each once.
        hot: one pass of the hot loop (``None``: the code has no loop).
        hot_function: the function holding the hot loop.
        hot_code: the hot loop's instructions, as the listing writes them.
    """

    total: InstructionMix
    hot: InstructionMix | None
    hot_function: str | None
    hot_code: tuple[str, ...]


def code_mix(asm: str) -> CodeMix:
    """The instruction mix of an x86 AT&T listing and of its hot loop."""
    functions = parse_functions(asm)
    total = mix_of([i for f in functions for i in f.instructions])
    hot = _hot_loop(functions)
    if hot is None:
        return CodeMix(total, None, None, ())
    function, (start, end) = hot
    body = function.instructions[start : end + 1]
    return CodeMix(total, mix_of(body), function.name, tuple(i.text for i in body))


def _hot_loop(functions: Sequence[AsmFunction]) -> tuple[AsmFunction, tuple[int, int]] | None:
    def work(item: tuple[AsmFunction, tuple[int, int]]) -> tuple[float, int, int]:
        function, (start, end) = item
        body = function.instructions[start : end + 1]
        flops = sum(i.flops for i in body)
        stores = sum(("vstore" in i.classes) * i.lanes + ("sstore" in i.classes) for i in body)
        return flops, stores, len(body)

    loops = [(f, span) for f in functions for span in f.innermost]
    return max(loops, key=work, default=None)


def describe_hot_loop(mix: InstructionMix) -> str:
    """``16 zmm FMAs per 2 loads`` (what a hot loop's pass mostly does, in a few words)."""
    width = {512: "zmm ", 256: "ymm ", 128: "xmm "}.get(mix.vector_bits, "")
    if mix.fma:
        work = _count(mix.fma, f"{width}FMA")
    elif mix.vector_arith:
        work = _count(mix.vector_arith, f"{width}vector op")
    elif mix.scalar_arith:
        work = _count(mix.scalar_arith, "scalar op")
    else:
        work = _count(mix.stores, "store")
    return f"{work} per {_count(mix.loads, 'load')}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' if n != 1 else ''}"


def compare_mixes(before: CodeMix, after: CodeMix) -> str:
    """One sentence on what changed between two schedules' hot loops."""
    if before.hot is None or after.hot is None:
        if before.hot is None and after.hot is None:
            return "Neither schedule's code has a loop."
        which = "now has" if before.hot is None else "no longer has"
        return f"The code {which} a loop."
    old, new = before.hot, after.hot
    if old == new:
        return f"The hot loop is the same: {describe_hot_loop(new)}."
    said = f"The hot loop now issues {describe_hot_loop(new)} instead of {describe_hot_loop(old)}"
    extra = []
    if new.spills != old.spills:
        extra.append(f"{new.spills} stack spills instead of {old.spills}")
    if old.intensity and new.intensity and abs(new.intensity / old.intensity - 1) > 0.05:
        extra.append(f"{new.intensity:.3g} flops per loaded byte instead of {old.intensity:.3g}")
    return said + (f", with {' and '.join(extra)}." if extra else ".")


def hot_loop_diff(before: CodeMix, after: CodeMix) -> list[str]:
    """The two hot loops' code, diffed line by line (``difflib``'s unified format)."""
    return list(
        difflib.unified_diff(
            list(before.hot_code), list(after.hot_code), "before", "after", lineterm="", n=2
        )
    )


MIX_ROWS: tuple[tuple[str, Callable[[InstructionMix], str]], ...] = (
    ("vector instructions, zmm / ymm / xmm", lambda m: f"{m.zmm} / {m.ymm} / {m.xmm}"),
    ("vector FMA", lambda m: str(m.fma)),
    ("other vector arithmetic", lambda m: str(m.vector_arith)),
    ("scalar arithmetic", lambda m: str(m.scalar_arith)),
    ("loads / stores", lambda m: f"{m.loads} / {m.stores}"),
    ("broadcasts and shuffles", lambda m: str(m.broadcasts)),
    ("stack spills", lambda m: str(m.spills)),
    ("branches", lambda m: str(m.branches)),
    ("instructions", lambda m: str(m.instructions)),
    ("flops", lambda m: f"{m.flops:g}"),
)
"""How every view (the CLI, the cost panel, the report) lays out a mix: label and value."""


def mix_rows(mix: CodeMix) -> list[tuple[str, str, str]]:
    """(label, hot loop, whole code) for each row of ``MIX_ROWS`` (``-``: no hot loop)."""
    return [
        (label, "-" if mix.hot is None else value(mix.hot), value(mix.total))
        for label, value in MIX_ROWS
    ]
