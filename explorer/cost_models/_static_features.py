"""Target-aware static features of a schedule: its generated assembly plus its loop nest (Tuna).

Tuna (Wang et al., arXiv 2104.14641) scores a schedule without running it, from features of the
program IR and of the generated low-level code. This module computes such features for one
candidate on a CPU target:

1. **Assembly** (``Executable.mod.inspect_source("asm")``; in TVM 0.27 the ``Executable`` itself
   has no ``inspect_source``/``get_source`` and ``Module.get_source`` does not exist, verified).
   Instructions are classified (vector FMA by register width, other packed FP arithmetic, scalar
   FP, vector/scalar loads and stores, broadcasts and shuffles, branches, stack spills, calls,
   integer/other).
2. **Dynamic scaling** (our approximation; Tuna's exact rule is unknown). Asm basic blocks cannot
   be mapped to TIR loops reliably after LLVM unrolls and peels, so only *innermost asm loops*
   (a backward jump closes a loop; a loop containing no other loop is innermost) are counted, and
   each one's trip count is derived from TIR by the work it performs: a loop with FP arithmetic
   executes ``flops / flops-per-iteration`` times in total (its share of the workload's FLOPs),
   a loop without (zero-fill, copies) ``elements / stored-lanes-per-iteration`` times, the
   elements being the iterations of TIR's pure data-movement blocks. Instructions outside
   innermost loops run rarely and are ignored. All counts are finally expressed *per unit of
   work* (per FLOP), so they are comparable across workload sizes, as the calibration needs.
3. **Loop nest** of the scheduled TIR (before lowering, where loops still carry their kinds):
   parallel extent vs cores and the load imbalance ``ceil(P/cores)*cores/P``, the vectorised
   lanes vs the target's lanes, and per-buffer footprints of the main block's inner tiles
   (distinct cache lines when the loops from level ``l`` inwards vary, by interval analysis of
   the affine indices) against L1 and L2. The bytes that must be filled into a cache of capacity
   ``C`` are ``footprint(l*) * iterations outside l*``, ``l*`` the outermost level whose tile
   fits, less the reuse across consecutive outer iterations a buffer does not depend on.

The cost features (``COST_FEATURES``) are in cycles-relevant units per FLOP, divided by the
effective parallel speed-up ``P / ceil(P / cores)`` (per-core work); the static model is a
positive linear combination of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.code import ASM_CLASSES, AsmLoop, parse_asm
from explorer.core import Candidate
from explorer.target import Target

tirx = _tvm.tirx
SBlockRealize = _tvm.tvm.s_tir.SBlockRealize

COST_FEATURES = (
    *ASM_CLASSES,
    "l1_fill_bytes",  # bytes brought into L1 (from L2 or beyond), per FLOP per core
    "l2_fill_bytes",  # bytes brought into L2 (from L3/DRAM), per FLOP per core
    "launches",  # parallel-region launches per FLOP (thread-pool wake-up cost)
    "vector_waste",  # 1 - vector-width utilisation of the main block (0 when not vectorised)
    "imbalance",  # ceil(P/cores)*cores/P - 1
    "idle_cores",  # 1 - min(P, cores)/cores
)
"""The features the static model's linear cost is a combination of, in order."""


@dataclass(frozen=True)
class StaticFeatures:
    """The static analysis of one candidate: cost features plus readable diagnostics."""

    values: np.ndarray  # float64, one per COST_FEATURES
    asm_counts: dict[str, int]  # static counts in the innermost asm loops
    parallel_extent: int
    speedup: float
    vector_lanes: int  # TIR-vectorised lanes of the main block (1: none)
    footprints: dict[str, float] = field(default_factory=dict)  # diagnostics, bytes
    ok: bool = True  # False: the trace did not replay or compile

    def as_dict(self) -> dict[str, float]:
        return dict(zip(COST_FEATURES, map(float, self.values), strict=True))


def failed_features() -> StaticFeatures:
    return StaticFeatures(np.zeros(len(COST_FEATURES)), {}, 1, 1.0, 1, ok=False)


def extract_json(candidate: dict[str, Any]) -> StaticFeatures:
    """``extract`` of ``Candidate.to_json()``: what a worker process runs for the static model."""
    return extract(Candidate.from_json(candidate))


def extract(candidate: Candidate) -> StaticFeatures:
    """Replay, compile and analyse one candidate (``ok=False`` when TVM refuses it)."""
    target = candidate.target
    try:
        sch = _tvm.Schedule(candidate.workload.mod())
        _tvm.apply_trace_json(candidate.trace, sch)
        mod = sch.mod
        asm = _tvm.compile_mod(mod, target.to_tvm()).mod.inspect_source("asm")
    except (_tvm.ScheduleError, ValueError, RuntimeError):
        return failed_features()
    nest = analyse_nest(mod["main"])
    return combine(parse_asm(asm), nest, candidate, target)


# --------------------------------------------------------------------------------------------
# Loop nest (scheduled TIR)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Loop:
    var: object
    extent: int
    kind: int  # tirx.ForKind value


@dataclass
class LeafBlock:
    """A leaf block with the loops around it and its buffer accesses (buffer, index exprs)."""

    name: str
    loops: list[Loop]
    bindings: dict[object, object]  # block iter var -> binding expr over loop vars
    accesses: list[tuple[Any, list[Any]]]  # TVM's (untyped) Buffer and PrimExprs
    is_compute: bool  # stores an arithmetic result (not a copy or a constant)

    @property
    def iterations(self) -> int:
        return math.prod(lp.extent for lp in self.loops)


@dataclass
class Nest:
    blocks: list[LeafBlock]

    @property
    def main(self) -> LeafBlock | None:
        compute = [b for b in self.blocks if b.is_compute] or self.blocks
        return max(compute, key=lambda b: b.iterations, default=None)


def analyse_nest(func: object) -> Nest:
    blocks: list[LeafBlock] = []
    _walk(func.body, [], blocks)  # type: ignore[attr-defined]  # a TIR PrimFunc (TVM is untyped here)
    return Nest(blocks)


def _walk(stmt: object, loops: list[Loop], out: list[LeafBlock]) -> None:
    if isinstance(stmt, tirx.For):
        extent = stmt.extent
        n = int(extent.value) if isinstance(extent, tirx.IntImm) else 1
        _walk(stmt.body, [*loops, Loop(stmt.loop_var, n, int(stmt.kind))], out)
    elif isinstance(stmt, SBlockRealize):
        block = stmt.block
        if _contains_block(block.body):
            _walk(block.body, loops, out)
            return
        bindings = {iv.var: v for iv, v in zip(block.iter_vars, stmt.iter_values, strict=True)}
        accesses: list[tuple[Any, list[Any]]] = []
        stores: list[Any] = []
        _collect(block.body, accesses, stores)
        is_compute = any(_is_arith(v) for v in stores)
        out.append(LeafBlock(block.name_hint, loops, bindings, accesses, is_compute))
    elif isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _walk(s, loops, out)
    elif hasattr(stmt, "body"):
        _walk(stmt.body, loops, out)  # IfThenElse/LetStmt/AttrStmt/...: descend
        else_case = getattr(stmt, "else_case", None)
        if else_case is not None:
            _walk(else_case, loops, out)


def _contains_block(stmt: object) -> bool:
    if isinstance(stmt, SBlockRealize):
        return True
    if isinstance(stmt, tirx.SeqStmt):
        return any(_contains_block(s) for s in stmt.seq)
    body = getattr(stmt, "body", None)
    return body is not None and _contains_block(body)


def _collect(node: Any, accesses: list[tuple[Any, list[Any]]], stores: list[Any]) -> None:
    if isinstance(node, tirx.BufferStore):
        accesses.append((node.buffer, list(node.indices)))
        stores.append(node.value)
        _collect(node.value, accesses, stores)
    elif type(node).__name__ == "BufferLoad":  # tirx.BufferLoad is a factory function
        accesses.append((node.buffer, list(node.indices)))
    elif isinstance(node, tirx.SeqStmt):
        for s in node.seq:
            _collect(s, accesses, stores)
    else:
        for attr in ("a", "b", "value", "body", "condition", "then_case", "else_case"):
            child = getattr(node, attr, None)
            if child is not None and not isinstance(child, (int, float, str)):
                _collect(child, accesses, stores)
        for arg in getattr(node, "args", None) or ():
            _collect(arg, accesses, stores)


def _is_arith(expr: object) -> bool:
    if type(expr).__name__ == "BufferLoad" or isinstance(expr, (tirx.IntImm, tirx.FloatImm)):
        return False
    if isinstance(expr, tirx.Cast):
        return _is_arith(expr.value)
    return True


def _span(expr: object, widths: dict[object, float]) -> float:
    """Upper bound of (max - min) of ``expr`` when each variable moves over its width."""
    if isinstance(expr, tirx.Var):
        return widths.get(expr, 0.0)
    if isinstance(expr, (tirx.IntImm, tirx.FloatImm)):
        return 0.0
    if isinstance(expr, (tirx.Add, tirx.Sub)):
        return _span(expr.a, widths) + _span(expr.b, widths)
    if isinstance(expr, tirx.Mul):
        for x, y in ((expr.a, expr.b), (expr.b, expr.a)):
            if isinstance(y, tirx.IntImm):
                return abs(int(y.value)) * _span(x, widths)
        return _span(expr.a, widths) + _span(expr.b, widths)
    if isinstance(expr, (tirx.FloorDiv, tirx.Div)) and isinstance(expr.b, tirx.IntImm):
        return math.ceil(_span(expr.a, widths) / max(1, int(expr.b.value)))
    if isinstance(expr, (tirx.FloorMod, tirx.Mod)) and isinstance(expr.b, tirx.IntImm):
        return min(_span(expr.a, widths), int(expr.b.value) - 1)
    if isinstance(expr, (tirx.Min, tirx.Max)):
        return max(_span(expr.a, widths), _span(expr.b, widths))
    if isinstance(expr, tirx.Cast):
        return _span(expr.value, widths)
    return 0.0


def tile_footprints(block: LeafBlock, level: int) -> dict[str, float]:
    """Bytes (in 64-byte lines along the last dimension) each buffer touches while the loops
    ``level..`` vary and the outer ones stay fixed."""
    loop_w = {lp.var: float(lp.extent - 1) for lp in block.loops[level:]}
    block_w = {v: _span(b, loop_w) for v, b in block.bindings.items()}
    widths = {**loop_w, **block_w}
    out: dict[str, float] = {}
    for buffer, indices in block.accesses:
        itemsize = np.dtype(str(buffer.dtype)).itemsize
        dims = [_span(i, widths) + 1 for i in indices] or [1.0]
        last_bytes = math.ceil(dims[-1] * itemsize / 64) * 64
        size = math.prod(dims[:-1]) * last_bytes
        out[buffer.name] = max(out.get(buffer.name, 0.0), size)
    return out


def _depends(block: LeafBlock, buffer_name: str, loop: Loop) -> bool:
    widths = {loop.var: 1.0}
    block_w = {v: _span(b, widths) for v, b in block.bindings.items()}
    widths.update(block_w)
    return any(
        any(_span(i, widths) > 0 for i in idx)
        for buf, idx in block.accesses
        if buf.name == buffer_name
    )


def fill_bytes(block: LeafBlock, capacity: int) -> float:
    """Bytes brought into a cache of ``capacity`` bytes over the whole block."""
    loops = block.loops
    for level in range(len(loops) + 1):
        fp = tile_footprints(block, level)
        if sum(fp.values()) <= capacity or level == len(loops):
            break
    if level == 0:
        return sum(fp.values())  # everything fits: compulsory traffic only
    outer = loops[:level]
    total = 0.0
    for name, size in fp.items():
        reps = math.prod(lp.extent for lp in outer)
        for lp in reversed(outer):  # consecutive iterations that reuse the same tile
            if _depends(block, name, lp):
                break
            reps //= max(1, lp.extent)
        total += size * max(1, reps)
    return total


# --------------------------------------------------------------------------------------------
# Putting it together
# --------------------------------------------------------------------------------------------
PARALLEL, VECTORIZED = int(tirx.ForKind.PARALLEL), int(tirx.ForKind.VECTORIZED)


def combine(
    loops: Sequence[AsmLoop], nest: Nest, candidate: Candidate, target: Target
) -> StaticFeatures:
    workload = candidate.workload
    flops = float(max(workload.flops(), 1))
    main = nest.main
    moved = float(sum(b.iterations for b in nest.blocks if not b.is_compute))

    # Step 1. Dynamic instruction counts: each innermost asm loop runs its share of the work.
    compute = [lp for lp in loops if lp.flops_per_iter > 0]
    movement = [lp for lp in loops if lp.flops_per_iter == 0 and lp.stored_lanes > 0]
    dyn = dict.fromkeys(ASM_CLASSES, 0.0)
    static_counts: dict[str, int] = {}
    groups: tuple[tuple[list[AsmLoop], float, Callable[[AsmLoop], float]], ...] = (
        (compute, flops, lambda lp: lp.flops_per_iter),
        (movement, moved, lambda lp: lp.stored_lanes),
    )
    for group, work, per in groups:
        capacity = sum(per(lp) for lp in group)
        for lp in group:
            # Loops of one group share its work in proportion to what one iteration does: a
            # vector main loop and its scalar remainder both appear, the main loop dominating.
            trips = work / capacity if capacity else 0.0
            for c, n in lp.counts.items():
                dyn[c] += n * trips
                static_counts[c] = static_counts.get(c, 0) + n

    # Step 2. Parallelism of the main block.
    cores = max(1, target.num_cores)
    par = [lp for lp in (main.loops if main else []) if lp.kind == PARALLEL]
    p_extent = math.prod(lp.extent for lp in par) if par else 1
    speedup = p_extent / math.ceil(p_extent / cores)
    imbalance = math.ceil(p_extent / cores) * cores / p_extent - 1.0
    idle = 1.0 - min(p_extent, cores) / cores
    launches = 0.0
    if par and main:
        first = main.loops.index(par[0])
        launches = float(math.prod(lp.extent for lp in main.loops[:first]))

    # Step 3. Vector width actually used by the main block vs the target's.
    vec = [lp.extent for lp in (main.loops if main else []) if lp.kind == VECTORIZED]
    lanes = math.prod(vec) if vec else 1
    target_lanes = max(1, target.vector_lanes_f32)
    waste = 0.0 if not vec else 1.0 - lanes / (math.ceil(lanes / target_lanes) * target_lanes)

    # Step 4. Cache traffic of the main block's tiles.
    l1 = fill_bytes(main, target.l1d_bytes) if main else 0.0
    l2 = fill_bytes(main, target.l2_bytes) if main else 0.0

    per_core = 1.0 / (flops * speedup)
    values = [dyn[c] * per_core for c in ASM_CLASSES]
    values += [l1 * per_core, l2 * per_core, launches / flops, waste, imbalance, idle]
    return StaticFeatures(
        values=np.asarray(values, dtype=np.float64),
        asm_counts=static_counts,
        parallel_extent=p_extent,
        speedup=speedup,
        vector_lanes=lanes,
        footprints={"l1_fill": l1, "l2_fill": l2},
    )
