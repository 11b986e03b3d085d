"""Reading an x86 assembly listing (AT&T syntax, as LLVM writes it for TVM's kernels): the
instructions of each compute function, classified, and its loops.

One reader for two users: the static cost model (Tuna's features, ``explorer.cost_models``)
counts the innermost loops' instructions, and the generated-code view (``explorer.code``) shows
the instruction mix of a schedule and its hot loop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ASM_CLASSES = (
    "vfma_zmm",
    "vfma_ymm",
    "vfma_xmm",
    "varith",
    "scalar_fp",
    "vload",
    "sload",
    "vstore",
    "sstore",
    "shuffle",
    "branch",
    "spill",
    "call",
    "other",
)
"""The classes an instruction counts in (``classify``)."""

_SKIP_FUNCS = ("__tvm_ffi_", "__tvm_set_raised", "__truncsfhf2", "__extendhfsf2", "__TVMBackend")
_FP_ARITH = re.compile(r"^v?(add|sub|mul|div|max|min|sqrt|rcp|rsqrt)(ps|pd|ss|sd)$")
_FMA = re.compile(r"^v?f(n)?m(add|sub|addsub|subadd)\d*(ps|pd|ss|sd)$")
_VMOV = re.compile(r"^v?mov(aps|ups|apd|upd|dqa|dqu|dqa32|dqa64|dqu8|dqu16|dqu32|dqu64|ntps)$")
_SMOV = re.compile(r"^v?mov(ss|sd)$")
_SHUF = re.compile(r"^v?p?(broadcast|perm|shuf|unpck|insert|extract|blend|align|movsh|movsl)")


@dataclass(frozen=True)
class AsmLoop:
    """An innermost asm loop: its static instruction counts and FP work per iteration."""

    counts: dict[str, int]
    flops_per_iter: float  # FMA lanes x 2 + other FP-arith lanes
    stored_lanes: float  # lanes written per iteration (for data-movement loops)


def _width(operands: str) -> int:
    if "zmm" in operands:
        return 16
    if "ymm" in operands:
        return 8
    if "xmm" in operands:
        return 4
    return 1


def classify(mnemonic: str, operands: str) -> list[str]:
    """The classes one instruction counts in (a memory-operand FMA is an FMA *and* a load)."""
    ops = _split_operands(operands)
    has_mem = [("(" in o) for o in ops]
    stack = any(("%rsp" in o or "%rbp" in o) and "(" in o for o in ops)
    out: list[str] = []
    if mnemonic.startswith("j"):
        return ["branch"]
    if mnemonic.startswith("call"):
        return ["call"]
    fma = _FMA.match(mnemonic)
    arith = _FP_ARITH.match(mnemonic)
    if fma or arith:
        suffix = (fma or arith).group(3 if fma else 2)  # type: ignore[union-attr]  # one of them matched (tested above)
        packed = suffix in ("ps", "pd")
        if fma and packed:
            out.append({16: "vfma_zmm", 8: "vfma_ymm"}.get(_width(operands), "vfma_xmm"))
        elif packed:
            out.append("varith")
        else:
            out.append("scalar_fp")
        if any(has_mem):
            out.append("spill" if stack else ("vload" if packed else "sload"))
        if "{1to" in operands:
            out.append("shuffle")  # embedded broadcast
        return out
    if _SHUF.match(mnemonic):
        out.append("shuffle")
        if any(has_mem[:-1]):
            out.append("spill" if stack else "vload")
        return out
    vector = bool(_VMOV.match(mnemonic))
    scalar_fp_mov = bool(_SMOV.match(mnemonic))
    if vector or scalar_fp_mov or mnemonic.startswith("mov"):
        if has_mem and has_mem[-1]:
            out.append("spill" if stack else ("vstore" if vector else "sstore"))
        elif any(has_mem[:-1]):
            out.append("spill" if stack else ("vload" if vector else "sload"))
        else:
            out.append("other")
        return out
    if any(has_mem):
        out.append("spill" if stack else "sload")
    out.append("other")
    return out


def _split_operands(operands: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in operands:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _functions(asm: str) -> dict[str, list[str]]:
    names = set(re.findall(r"^\s*\.type\s+([^,\s]+),@function", asm, flags=re.M))
    funcs: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in asm.splitlines():
        label = re.match(r"^([^\s:#]+):", line)
        if label and label.group(1) in names:
            name = label.group(1)
            current = None if name.startswith(_SKIP_FUNCS) else funcs.setdefault(name, [])
            continue
        if current is not None:
            current.append(line)
    return funcs


@dataclass(frozen=True, slots=True)
class Instruction:
    """One instruction of a listing: its text, mnemonic and operands, the classes it counts in
    and its vector width in float32 lanes (1: scalar)."""

    text: str
    mnemonic: str
    operands: str
    classes: tuple[str, ...]
    lanes: int

    @property
    def flops(self) -> float:
        """Floating-point operations it performs (an FMA lane is two)."""
        first = self.classes[0]
        if first.startswith("vfma"):
            return 2.0 * self.lanes
        if first == "scalar_fp":
            return 2.0 if _FMA.match(self.mnemonic) else 1.0
        if first == "varith":
            return float(self.lanes)
        return 0.0


@dataclass(frozen=True, slots=True)
class AsmFunction:
    """A compute function of the listing: its instructions, and its loops as (first, last)
    instruction indices (a backward jump closes a loop), innermost ones marked."""

    name: str
    instructions: tuple[Instruction, ...]
    loops: tuple[tuple[int, int], ...]
    innermost: tuple[tuple[int, int], ...]


def parse_functions(asm: str) -> list[AsmFunction]:
    """Every compute function of an x86 AT&T listing (TVM's runtime helpers left out)."""
    out = []
    for name, lines in _functions(asm).items():
        labels: dict[str, int] = {}
        insts: list[Instruction] = []
        for line in lines:
            label = re.match(r"^([^\s:#]+):", line)
            if label:
                labels[label.group(1)] = len(insts)
                continue
            text = line.split("#", 1)[0].strip()
            if not text or text.startswith("."):
                continue
            mnemonic, *rest = text.split(None, 1)
            operands = rest[0].strip() if rest else ""
            classes = tuple(classify(mnemonic, operands))
            insts.append(Instruction(text, mnemonic, operands, classes, _width(operands)))
        ranges = []
        for i, inst in enumerate(insts):
            start = labels.get(inst.operands) if inst.mnemonic.startswith("j") else None
            if start is not None and start <= i:
                ranges.append((start, i))
        loops = tuple(sorted(set(ranges)))
        innermost = tuple(
            r for r in loops if not any(o != r and r[0] <= o[0] and o[1] <= r[1] for o in loops)
        )
        out.append(AsmFunction(name, tuple(insts), loops, innermost))
    return out


def parse_asm(asm: str) -> list[AsmLoop]:
    """The innermost loops of every compute function in an x86 AT&T assembly listing."""
    loops: list[AsmLoop] = []
    for function in parse_functions(asm):
        for start, end in function.innermost:
            counts: dict[str, int] = {}
            flops = lanes = 0.0
            for inst in function.instructions[start : end + 1]:
                for c in inst.classes:
                    counts[c] = counts.get(c, 0) + 1
                flops += inst.flops
                if "vstore" in inst.classes:
                    lanes += inst.lanes
                elif "sstore" in inst.classes:
                    lanes += 1
            loops.append(AsmLoop(counts, flops, lanes))
    return loops
