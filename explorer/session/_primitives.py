"""The schedule primitives a session offers, declared Exo style.

Each entry of ``PRIMITIVES`` is a frozen ``Primitive``: its name, its parameters as
``ParamSpec``\\ s (a UI builds a form from them), an ``apply`` function and a docstring that ends
with a ``Rewrite:`` before/after example. ``apply(ctx, args)`` receives the normalised arguments
and a ``StepContext`` that resolves loop and block names against the schedule being edited (a
copy: the session swaps it in only when the step succeeds).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from explorer.core import divisors
from explorer.errors import PrimitiveError
from explorer.session._names import BlockInfo, LoopInfo, NestIndex
from explorer.session._params import ParamSpec, shown
from explorer.target import Target

STORAGE_SCOPES = ("global", "local", "shared")
THREAD_AXES = (
    "blockIdx.x",
    "blockIdx.y",
    "blockIdx.z",
    "threadIdx.x",
    "threadIdx.y",
    "threadIdx.z",
    "vthread",
)
ANNOTATION_KEYS = (
    "pragma_auto_unroll_max_step",
    "pragma_unroll_explicit",
    "meta_schedule.unroll_explicit",
    "meta_schedule.unroll_implicit",
    "meta_schedule.parallel",
    "meta_schedule.vectorize",
)


class StepContext:
    """What a primitive's ``apply`` sees: the schedule to edit and name resolution.

    Names resolve against ``nest`` (the IR before the step). ``get_sblock``/``get_loops`` results
    are memoised per step so a step adds each lookup to the trace once.
    """

    def __init__(
        self,
        primitive: str,
        sch: Any,
        nest: NestIndex,
        target: Target,
        args: Mapping[str, Any],
    ) -> None:
        self.primitive = primitive
        self.sch = sch
        self.nest = nest
        self.target = target
        self.args = args
        self._blocks: dict[str, Any] = {}
        self._loops: dict[str, list[Any]] = {}

    def fail(self, arg: str | None, reason: str) -> PrimitiveError:
        """A ``PrimitiveError`` about argument ``arg`` (raise it)."""
        value = shown(self.args.get(arg)) if arg is not None else None
        return PrimitiveError(self.primitive, arg, reason, value=value)

    def block_info(self, arg: str) -> BlockInfo:
        """The ``BlockInfo`` named by argument ``arg``; unknown names list the valid ones."""
        name = self.args[arg]
        info = self.nest.block(name)
        if info is None:
            valid = ", ".join(self.nest.block_names()) or "(none)"
            raise self.fail(arg, f"no block named {name!r}; blocks: {valid}")
        return info

    def block(self, arg: str) -> Any:
        """The ``SBlockRV`` named by argument ``arg``."""
        return self._block_rv(self.block_info(arg).name)

    def loop_info(self, arg: str, name: str | None = None) -> tuple[LoopInfo, str, int]:
        """``(info, block, index)`` of the loop named by ``arg`` (or by ``name`` in that arg)."""
        found = self.nest.find_loop(self.args[arg] if name is None else name)
        if isinstance(found, str):
            raise self.fail(arg, found)
        return found

    def loop(self, arg: str, name: str | None = None) -> Any:
        """The ``LoopRV`` named by argument ``arg`` (or by ``name``, an item of a loop list)."""
        _, block, index = self.loop_info(arg, name)
        if block not in self._loops:
            self._loops[block] = list(self.sch.get_loops(self._block_rv(block)))
        return self._loops[block][index]

    def loops(self, arg: str) -> list[Any]:
        """The ``LoopRV``\\ s named by the list argument ``arg``."""
        seen: dict[str, str] = {}
        for name in self.args[arg]:
            info, _, _ = self.loop_info(arg, name)
            # "i" and "C.i" may both name one loop: compare canonical names
            if info.name in seen:
                raise self.fail(arg, f"{name!r} and {seen[info.name]!r} name the same loop")
            seen[info.name] = name
        return [self.loop(arg, name) for name in self.args[arg]]

    def _block_rv(self, name: str) -> Any:
        if name not in self._blocks:
            self._blocks[name] = self.sch.get_sblock(name)
        return self._blocks[name]


ApplyFn = Callable[[StepContext], None]


@dataclass(frozen=True, slots=True)
class Primitive:
    """A schedule primitive as the session offers it.

    Attributes:
        name: The registry key (``"split"``).
        params: The declared arguments, in form order.
        apply: ``apply(ctx)`` edits ``ctx.sch``; raises ``PrimitiveError`` or lets TVM raise.
        doc: What it does, ending with a ``Rewrite:`` before/after block.
    """

    name: str
    params: tuple[ParamSpec, ...]
    apply: ApplyFn
    doc: str

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def signature(self) -> str:
        """``split(loop, factors)``: the call form shown in menus."""
        return f"{self.name}({', '.join(p.name for p in self.params)})"


# -- apply functions (their docstrings are the primitives' docs) --------------------------------


def _split(ctx: StepContext) -> None:
    """Split a loop into nested loops with the given trip counts (outer first).

    One factor may be ``None``: it is inferred as ceil(extent / product of the others). Factors
    that do not divide the extent give predicated (guarded) tiles.

    Rewrite:
        for i in range(128):            for i_0 in range(8):
            C[i] = ...          ->          for i_1 in range(16):
                                                C[i_0 * 16 + i_1] = ...
        split(loop="i", factors=[None, 16])
    """
    info, _, _ = ctx.loop_info("loop")
    factors = ctx.args["factors"]
    if None not in factors and info.extent is not None:
        product = math.prod(factors)
        if product != info.extent:
            raise ctx.fail(
                "factors",
                f"the factors must multiply to the loop extent {info.extent}, or contain one "
                f"None (got {shown(factors)} \u2192 {product})",
            )
    ctx.sch.split(ctx.loop("loop"), list(factors))


def _fuse(ctx: StepContext) -> None:
    """Fuse perfectly nested loops (outer to inner) into one loop.

    Rewrite:
        for i in range(64):             for i_j_fused in range(4096):
            for j in range(64):   ->        C[i_j_fused // 64, i_j_fused % 64] = ...
                C[i, j] = ...
        fuse(loops=["i", "j"])
    """
    ctx.sch.fuse(*ctx.loops("loops"))


def _reorder(ctx: StepContext) -> None:
    """Put loops of one nest in the given order (outer first); other loops stay in place.

    Rewrite:
        for i in range(64):             for k in range(64):
            for k in range(64):   ->        for i in range(64):
                C[i] += A[i, k]                 C[i] += A[i, k]
        reorder(loops=["k", "i"])
    """
    ctx.sch.reorder(*ctx.loops("loops"))


def _parallel(ctx: StepContext) -> None:
    """Run the iterations of a data-parallel loop on several CPU threads.

    Parallel loops cannot be nested (TVM's thread pool refuses at compile time): fuse them.

    Rewrite:
        for i in range(64):       ->    for i in T.parallel(64):
            C[i] = ...                      C[i] = ...
        parallel(loop="i")
    """
    info, _, _ = ctx.loop_info("loop")
    for other, where in _nested(ctx, info):
        if other.kind == "parallel":
            raise ctx.fail(
                "loop",
                f"loop {info.name} is {where} parallel loop {other.name}; parallel loops cannot "
                "be nested (TVM's thread pool refuses them when compiling); fuse them instead",
            )
    ctx.sch.parallel(ctx.loop("loop"))


def _vectorize(ctx: StepContext) -> None:
    """Turn a data-parallel innermost loop into SIMD vector operations.

    Only innermost loops are accepted: TVM's code generator silently drops or miscompiles
    vectorized loops that contain other loops.

    Rewrite:
        for j in range(16):       ->    for j in T.vectorized(16):
            C[j] = A[j] + B[j]              C[j] = A[j] + B[j]
        vectorize(loop="j")
    """
    info, _, _ = ctx.loop_info("loop")
    inner = ctx.nest.enclosed(info)
    if inner:
        raise ctx.fail(
            "loop",
            f"loop {info.name} contains loop(s) {', '.join(lp.name for lp in inner)}; only an "
            "innermost loop can be vectorized (reorder or split first)",
        )
    ctx.sch.vectorize(ctx.loop("loop"))


def _unroll(ctx: StepContext) -> None:
    """Fully unroll a loop (best on short inner loops).

    Rewrite:
        for k in range(4):        ->    for k in T.unroll(4):
            C[0] += A[k]                    C[0] += A[k]
        unroll(loop="k")
    """
    ctx.sch.unroll(ctx.loop("loop"))


def _nested(ctx: StepContext, info: LoopInfo) -> list[tuple[LoopInfo, str]]:
    outer = [(lp, "inside") for lp in ctx.nest.enclosing(info)]
    return outer + [(lp, "around") for lp in ctx.nest.enclosed(info)]


def _check_order(ctx: StepContext, reverse: bool) -> None:
    """Refuse moves that would put a block after a consumer / before a producer outside the loop.

    TVM checks the blocks *under* the target loop only; a producer with no producers of its own
    passes ``reverse_compute_at`` vacuously and lands after its consumer (wrong results).
    """
    block = ctx.block_info("block").name
    loop, _, _ = ctx.loop_info("loop")
    nest = ctx.nest
    if block in loop.blocks or not loop.blocks:
        return  # TVM explains this case itself
    first, last = nest.position(loop.blocks[0]), nest.position(loop.blocks[-1])
    if reverse:
        bad = [
            b for b in nest.consumers(block) if b not in loop.blocks and nest.position(b) < first
        ]
        relation, order = "reads", "before"
    else:
        bad = [
            b for b in nest.producers(block) if b not in loop.blocks and nest.position(b) > last
        ]
        relation, order = "writes", "after"
    if bad:
        raise ctx.fail(
            "loop",
            f"block {bad[0]} {relation} what block {block} {'writes' if reverse else 'reads'} "
            f"and runs {order} loop {loop.name}; moving {block} there would break the dependence",
        )


def _check_index(ctx: StepContext, arg: str, buffers: tuple[str, ...], what: str) -> None:
    index = ctx.args[arg]
    if index >= len(buffers):
        names = ", ".join(f"{i}={b}" for i, b in enumerate(buffers)) or "none"
        raise ctx.fail(
            arg,
            f"block {ctx.args['block']} {what} {len(buffers)} buffer(s) ({names}); "
            f"the index must be in 0..{len(buffers) - 1}",
        )


def _cache_read(ctx: StepContext) -> None:
    """Add a block that copies one buffer the block reads into a new buffer, read from there.

    ``read_index`` counts the block's read buffers (matmul ``C``: 0 = A, 1 = B). Move the copy
    with ``compute_at`` to copy only the tile a loop iteration needs.

    Rewrite:
        for i, k:                       for ax0, ax1:  A_global[ax0, ax1] = A[ax0, ax1]
            C[i] += A[i, k]       ->    for i, k:
                                            C[i] += A_global[i, k]
        cache_read(block="C", read_index=0, storage_scope="global")
    """
    _check_index(ctx, "read_index", ctx.block_info("block").reads, "reads")
    ctx.sch.cache_read(ctx.block("block"), ctx.args["read_index"], ctx.args["storage_scope"])


def _transform_layout(ctx: StepContext) -> None:
    """Store a copied buffer in panels: one dimension split, the position in a panel last.

    Dimension ``axis`` of the buffer the block reads at ``read_index`` is split by ``factor``:
    the panel number becomes the first dimension and the position in the panel the last.

    This is the packing step of fast GEMM kernels: after ``cache_read`` of matmul's B, splitting
    its columns (axis 1) by a multiple of the vector width makes each panel's rows contiguous,
    so the inner loop streams them into vector registers instead of striding N floats per k.
    The buffer must be allocated in the function (a ``cache_read`` copy): the function's own
    inputs keep their layout. ``read_index`` counts the block's read buffers; ``factor`` must
    divide the dimension.

    Rewrite:
        for k, j:  B_global[k, j] = B[k, j]       for k, j:  B_global[j // 32, k, j % 32] = B[k, j]
        C[i, j] += A[i, k] * B_global[k, j]  ->  C[i, j] += A[i, k] * B_global[j // 32, k, j % 32]
        transform_layout(block="C", read_index=1, axis=1, factor=32)
    """
    info = ctx.block_info("block")
    _check_index(ctx, "read_index", info.reads, "reads")
    block = ctx.block("block")
    buffer = ctx.sch.get(block).reads[ctx.args["read_index"]].source
    if any(buffer.same_as(p) for p in ctx.sch.mod["main"].params):
        raise ctx.fail(
            "read_index",
            f"{buffer.name} is an input of the function, whose layout the caller fixes; "
            f"copy it first with cache_read(block={info.name!r}, "
            f"read_index={ctx.args['read_index']}) and transform the copy",
        )
    shape = [int(n) for n in buffer.shape]
    axis, factor = ctx.args["axis"], ctx.args["factor"]
    if axis >= len(shape):
        raise ctx.fail("axis", f"{buffer.name} has {len(shape)} dimensions: 0..{len(shape) - 1}")
    if shape[axis] % factor:
        raise ctx.fail(
            "factor",
            f"must divide dimension {axis} of {buffer.name} ({shape[axis]}); "
            f"divisors: {', '.join(map(str, divisors(shape[axis])))}",
        )

    def panels(*axes: Any) -> list[Any]:
        rest = [a for n, a in enumerate(axes) if n != axis]
        return [axes[axis] // factor, *rest, axes[axis] % factor]

    ctx.sch.transform_layout(block, ("read", ctx.args["read_index"]), panels)


def _cache_write(ctx: StepContext) -> None:
    """Make the block write into a new buffer, plus a block that copies it to the original.

    Rewrite:
        for i, k:                       for i, k:
            C[i] += A[i, k]       ->        C_global[i] += A[i, k]
                                        for ax0:  C[ax0] = C_global[ax0]
        cache_write(block="C", write_index=0, storage_scope="global")
    """
    _check_index(ctx, "write_index", ctx.block_info("block").writes, "writes")
    ctx.sch.cache_write(ctx.block("block"), ctx.args["write_index"], ctx.args["storage_scope"])


def _compute_at(ctx: StepContext) -> None:
    """Move a producer block under a loop of its consumer, computing only what it needs there.

    Rewrite:
        for i, j:  B[i, j] = A[i, j] * 2        for i:
        for i, j:  C[i, j] = B[i, j] + 1  ->        for ax0:  B[i, ax0] = A[i, ax0] * 2
                                                    for j:    C[i, j] = B[i, j] + 1
        compute_at(block="B", loop="C.i")
    """
    _check_order(ctx, reverse=False)
    ctx.sch.compute_at(
        ctx.block("block"), ctx.loop("loop"), preserve_unit_loops=ctx.args["preserve_unit_loops"]
    )


def _reverse_compute_at(ctx: StepContext) -> None:
    """Move a consumer block under a loop of its producer (e.g. a write-back under a tile).

    Rewrite:
        for i, j:  B[i, j] = A[i, j] * 2        for i:
        for i, j:  C[i, j] = B[i, j] + 1  ->        for j:    B[i, j] = A[i, j] * 2
                                                    for ax0:  C[i, ax0] = B[i, ax0] + 1
        reverse_compute_at(block="C", loop="B.i")
    """
    _check_order(ctx, reverse=True)
    ctx.sch.reverse_compute_at(
        ctx.block("block"), ctx.loop("loop"), preserve_unit_loops=ctx.args["preserve_unit_loops"]
    )


def _compute_inline(ctx: StepContext) -> None:
    """Substitute a (non-reduction) block's expression into its consumers and remove it.

    Rewrite:
        for i:  B[i] = A[i] * 2
        for i:  C[i] = B[i] + 1     ->    for i:  C[i] = A[i] * 2 + 1
        compute_inline(block="B")
    """
    ctx.sch.compute_inline(ctx.block("block"))


def _reverse_compute_inline(ctx: StepContext) -> None:
    """Fold a block into its single producer (e.g. an activation into a write-back).

    Rewrite:
        for i:  B[i] = A[i] * 2
        for i:  C[i] = max(B[i], 0)  ->   for i:  C[i] = max(A[i] * 2, 0)
        reverse_compute_inline(block="C")
    """
    ctx.sch.reverse_compute_inline(ctx.block("block"))


def _decompose_reduction(ctx: StepContext) -> None:
    """Split a reduction's initialisation out into its own block, placed before ``loop``.

    Do it last: ``parallel``/``vectorize`` afterwards see two blocks under the loop.

    Rewrite:
        for i, k:                           for i:
            with init: C[i] = 0       ->        C_init[i] = 0
            C[i] += A[i, k]                     for k:  C[i] += A[i, k]   # block C_update
        decompose_reduction(block="C", loop="k")
    """
    ctx.block_info("block")
    ctx.loop_info("loop")
    ctx.sch.decompose_reduction(ctx.block("block"), ctx.loop("loop"))


def _rfactor(ctx: StepContext) -> None:
    """Turn part of a reduction into a data-parallel stage writing partial results.

    ``factor_axis`` places the new dimension in the partial-result buffer.

    Rewrite:
        for k_0, k_1:                        for k_0, k_1:  C_rf[k_1] += A[k_0 * 4 + k_1]
            C[0] += A[k_0 * 4 + k_1]   ->    for k_1:       C[0] += C_rf[k_1]
        rfactor(loop="k_1", factor_axis=0)
    """
    ctx.sch.rfactor(ctx.loop("loop"), ctx.args["factor_axis"])


def _annotate(ctx: StepContext) -> None:
    """Attach a pragma/annotation to a loop or a block (give exactly one of them).

    Rewrite:
        for i in range(64):       ->    for i in T.serial(64,
            ...                               annotations={"pragma_auto_unroll_max_step": 16}):
        annotate(loop="i", key="pragma_auto_unroll_max_step", value=16)
    """
    has_loop, has_block = ctx.args["loop"] is not None, ctx.args["block"] is not None
    if has_loop == has_block:
        raise ctx.fail("loop", "give exactly one of loop or block to annotate")
    target = ctx.loop("loop") if has_loop else ctx.block("block")
    ctx.sch.annotate(target, ctx.args["key"], ctx.args["value"])


def _storage_align(ctx: StepContext) -> None:
    """Pad a buffer's stride on ``axis`` so that ``stride % factor == offset``.

    Padding avoids cache-set (or shared-memory bank) conflicts. The buffer must be allocated in
    the function, e.g. by ``cache_read``/``cache_write``; ``buffer_index`` counts the block's
    written buffers.

    Rewrite:
        A_shared = alloc((64, 64))    ->    A_shared = alloc((64, 64), strides=(65, 1))
        storage_align(block="A_shared", buffer_index=0, axis=0, factor=64, offset=1)
    """
    _check_index(ctx, "buffer_index", ctx.block_info("block").writes, "writes")
    if ctx.args["offset"] >= ctx.args["factor"]:
        raise ctx.fail("offset", f"must be smaller than factor ({ctx.args['factor']})")
    ctx.sch.storage_align(
        ctx.block("block"),
        ctx.args["buffer_index"],
        ctx.args["axis"],
        ctx.args["factor"],
        ctx.args["offset"],
    )


def _bind(ctx: StepContext) -> None:
    """Bind a loop to a GPU thread axis (CUDA targets only).

    Rewrite:
        for i in range(1024):     ->    for i in T.thread_binding(1024, thread="threadIdx.x"):
            C[i] = ...                      C[i] = ...
        bind(loop="i", thread_axis="threadIdx.x")
    """
    if ctx.target.kind != "cuda":
        raise ctx.fail(
            "thread_axis",
            f"thread binding needs a CUDA target; this session's target is {ctx.target.kind} "
            "(tvm.compile would fail with 'not implemented')",
        )
    ctx.sch.bind(ctx.loop("loop"), ctx.args["thread_axis"])


# -- the registry -------------------------------------------------------------------------------

_LOOP = ParamSpec("loop", "loop", help="a loop name from session.loops()")
_BLOCK = ParamSpec("block", "block", help="a block name from session.blocks()")
_PRESERVE = ParamSpec(
    "preserve_unit_loops", "bool", default=False, help="keep loops of extent 1 around the block"
)
_SCOPE = ParamSpec(
    "storage_scope", "choice", default="global", choices=STORAGE_SCOPES, help="memory of the copy"
)


def _make(name: str, apply: ApplyFn, *params: ParamSpec) -> Primitive:
    return Primitive(name=name, params=params, apply=apply, doc=inspect.getdoc(apply) or "")


PRIMITIVES: dict[str, Primitive] = {
    p.name: p
    for p in (
        _make(
            "split",
            _split,
            _LOOP,
            ParamSpec("factors", "factors", help="trip counts, outer first; one may be None"),
        ),
        _make("fuse", _fuse, ParamSpec("loops", "loops", min=2, help="nested loops, outer first")),
        _make("reorder", _reorder, ParamSpec("loops", "loops", help="the new order, outer first")),
        _make("parallel", _parallel, _LOOP),
        _make("vectorize", _vectorize, _LOOP),
        _make("unroll", _unroll, _LOOP),
        _make(
            "cache_read",
            _cache_read,
            _BLOCK,
            ParamSpec("read_index", "int", default=0, min=0, help="which buffer the block reads"),
            _SCOPE,
        ),
        _make(
            "transform_layout",
            _transform_layout,
            _BLOCK,
            ParamSpec("read_index", "int", default=0, min=0, help="which buffer the block reads"),
            ParamSpec("axis", "int", min=0, help="the dimension to split into panels"),
            ParamSpec(
                "factor", "int", min=1, help="the panel width; it must divide the dimension"
            ),
        ),
        _make(
            "cache_write",
            _cache_write,
            _BLOCK,
            ParamSpec("write_index", "int", default=0, min=0, help="which buffer it writes"),
            _SCOPE,
        ),
        _make("compute_at", _compute_at, _BLOCK, _LOOP, _PRESERVE),
        _make("reverse_compute_at", _reverse_compute_at, _BLOCK, _LOOP, _PRESERVE),
        _make("compute_inline", _compute_inline, _BLOCK),
        _make("reverse_compute_inline", _reverse_compute_inline, _BLOCK),
        _make("decompose_reduction", _decompose_reduction, _BLOCK, _LOOP),
        _make(
            "rfactor",
            _rfactor,
            _LOOP,
            ParamSpec("factor_axis", "int", default=0, help="where the new axis goes"),
        ),
        _make(
            "annotate",
            _annotate,
            ParamSpec("loop", "loop", default=None, help="the loop to annotate (or a block)"),
            ParamSpec("block", "block", default=None, help="the block to annotate (or a loop)"),
            ParamSpec("key", "choice", choices=ANNOTATION_KEYS, help="annotation key"),
            ParamSpec("value", "int", min=0, help="annotation value"),
        ),
        _make(
            "storage_align",
            _storage_align,
            _BLOCK,
            ParamSpec("buffer_index", "int", default=0, min=0, help="which buffer it writes"),
            ParamSpec("axis", "int", help="the dimension whose stride is padded"),
            ParamSpec("factor", "int", min=1, help="stride % factor == offset"),
            ParamSpec("offset", "int", default=0, min=0, help="stride % factor == offset"),
        ),
        _make(
            "bind",
            _bind,
            _LOOP,
            ParamSpec("thread_axis", "choice", choices=THREAD_AXES, help="GPU thread axis"),
        ),
    )
}
"""Every primitive a session can apply, by name, in menu order."""
