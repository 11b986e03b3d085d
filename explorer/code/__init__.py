"""What the machine runs: a schedule's generated code and its instruction mix.

* ``parse_functions(asm)``: the compute functions of an x86 assembly listing, each instruction
  classified (FMA by register width, other vector and scalar arithmetic, loads, stores,
  broadcasts and shuffles, stack spills, branches), with their loops.
* ``parse_asm(asm)``: the innermost loops' counts, as the static cost model (Tuna) reads them.
* ``code_mix(asm)``: the instruction mix in total and in the hot loop (``InstructionMix``:
  vector widths, FMAs, other arithmetic, loads, stores, broadcasts, spills, branches, flops per
  loaded byte).
* ``compare_mixes(before, after)``, ``hot_loop_diff``: what changed between two schedules' hot
  loops, in one sentence ("now issues 16 zmm FMAs per 2 loads instead of ...") and as a diff.
* ``generated_code(candidate)``: a schedule's assembly and LLVM IR (a GPU kernel's source), from
  the same build a measurement makes.
"""

from __future__ import annotations

from explorer.code._asm import (
    ASM_CLASSES,
    AsmFunction,
    AsmLoop,
    Instruction,
    classify,
    parse_asm,
    parse_functions,
)
from explorer.code._build import GeneratedCode, generated_code
from explorer.code._mix import (
    MIX_ROWS,
    CodeMix,
    InstructionMix,
    code_mix,
    compare_mixes,
    describe_hot_loop,
    hot_loop_diff,
    mix_of,
    mix_rows,
)

__all__ = [
    "ASM_CLASSES",
    "MIX_ROWS",
    "AsmFunction",
    "AsmLoop",
    "CodeMix",
    "GeneratedCode",
    "InstructionMix",
    "Instruction",
    "classify",
    "code_mix",
    "compare_mixes",
    "describe_hot_loop",
    "generated_code",
    "hot_loop_diff",
    "mix_of",
    "mix_rows",
    "parse_asm",
    "parse_functions",
]
