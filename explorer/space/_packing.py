"""Packed sketches: the layout change fast CPU GEMM kernels make, as a MetaSchedule rule.

MetaSchedule's own CPU rules tile loops but never change a buffer's layout, so a matmul reads B
one row of N floats apart for every k, and the prefetcher and the TLB pay for the stride. The
classic fix ("How to optimize GEMM on CPU" in TVM's tutorials, and every BLAS) copies B once into
panels ``B_pack[j // bn, k, j % bn]``: the inner loop then streams ``bn`` contiguous floats per k
into vector registers, ``bn`` a multiple of the vector width.

:class:`PackedTiling` does that for every block that reduces a product over an operand indexed
by a dimension of its output (matmul, dense, batch matmul, an NCHW convolution's weights by
output channel): it copies that operand into panels of width ``bn`` (``cache_read`` +
``transform_layout``, one sketch per width), tiles the block around a register tile of
``rows x bn`` (perfect-tile knobs for every other loop), and accumulates the tile in a local
copy (``cache_write``; blocked NCHWc when the channel is not the output's last dimension). The
parallel, vectorize and unroll annotations come from MetaSchedule's usual rule, so every
strategy searches these sketches with the same kinds of knobs as the others, and the traces
replay without this module. A postprocessor (:func:`register_tile_check`) refuses the tiles
whose accumulators cannot keep the FMA units busy or do not fit the vector registers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from explorer import _tvm
from explorer.text import plural

PANEL_VECTORS = (2, 1)
"""Panel widths tried, in vectors of the target's float32 lanes: 2 vectors (32 floats with
AVX-512) fills more FMA ports per load; 1 keeps more rows in the register tile."""

MAX_TILE_ROWS = 16
"""The register tile's extent in each other dimension at most."""

MIN_ACCUMULATORS = 8
"""Vector accumulators a register tile keeps at least, where its shape allows: an FMA waits
about 4 cycles for the previous one into the same register, and a core issues up to 2 a cycle,
so fewer than 8 independent accumulators leave the FMA units idle. ResNet-18's 7x7 layers
show it (one search on a 2-core Zen 4): a 1 x 32 tile (2 accumulators) ran at 47-92 GFLOPS, 7 x 16
(7) at 133-159 and 7 x 32 (14) at up to 205. Without this bound a search at a small budget
could spend every trial on 1-row tiles, since only ``rows`` in {1, 7, 49} divide 7 x 7."""

_ROW_LEVELS = 3
"""The packed tiling splits each row dimension in three (outer, middle, register tile);
MetaSchedule's CPU tiling splits spatial loops in four and reductions in two, so a three-way
``SamplePerfectTile`` in a trace is one of ours."""


@dataclass(frozen=True)
class PackPlan:
    """What a block's packed sketch copies and tiles."""

    vector_var: int  # index of the block var vectorized: a dimension of the output
    extent: int  # that var's extent
    reads: tuple[int, ...]  # the read buffers indexed by it and by a reduction var
    layouts: tuple[tuple[int, ...], ...]  # per read: its dims in packed order (see _new_order)
    output_dim: int  # the output dimension it indexes
    output_ndim: int  # when not the last, the tile's copy is blocked too (NCHW -> NCHWc)


def plan_packing(sch: Any, block: Any) -> PackPlan | None:
    """How ``block`` would be packed, or ``None`` when it is not a product reduced over a panel.

    Eligible: a reduction block, still one loop per block var, that reduces over two or more
    buffers (a product), one of which is indexed by a reduction var and by a spatial var ``v``
    that indexes the output, every index a plain block var: ``B[k, j]`` of a matmul, ``W[n, k]``
    of a dense layer, ``B[b, k, j]``, or a convolution's weights ``W[co, ci, kh, kw]``. ``v`` is
    the innermost such dimension of the output: ``j``, or ``co`` of an NCHW output. A ``v`` that
    another operand reads with a computed index, or not as its last dimension (an NCHW
    depthwise convolution's input, ``X[n, c, h + kh, w + kw]``), is not vectorized: its loads
    would be gathers. An operand that reads ``v`` contiguously, as its last dimension, and
    other dimensions computed (an NHWC depthwise input, ``X[n, h + kh, w + kw, c]``) is read
    as it is, a vector per row of the tile: such a convolution packs its weights alone.
    """
    node = sch.get(block)
    iters = list(node.iter_vars)
    if len(sch.get_loops(block)) != len(iters) or len(node.writes) != 1:
        return None

    def var_at(expr: Any) -> int | None:
        # TVM's ``==`` on expressions builds an expression: compare handles instead.
        if isinstance(expr, _tvm.tirx.Var):
            return next((n for n, iv in enumerate(iters) if iv.var.same_as(expr)), None)
        return None

    def position(expr: Any) -> int | None:
        """The var an index is, also ``v + r`` with ``r`` a reduction of extent 1 (the ``c +
        rc`` of a depthwise convolution's input: one input channel per group)."""
        if isinstance(expr, _tvm.tirx.Add):
            for v, r in ((var_at(expr.a), var_at(expr.b)), (var_at(expr.b), var_at(expr.a))):
                if v is not None and r is not None and int(iters[r].dom.extent) == 1:
                    return v
        return var_at(expr)

    def uses(region: Any) -> set[int]:
        """The vars a read's indices use, also inside sums (``h + kh``)."""

        def of(expr: Any) -> set[int]:
            if isinstance(expr, _tvm.tirx.Add):
                return of(expr.a) | of(expr.b)
            return {n for n in (var_at(expr),) if n is not None}

        return set().union(*(of(r.min) for r in region.region))

    reduction = {n for n, iv in enumerate(iters) if iv.iter_type == 2}
    if not reduction or any(iv.iter_type not in (0, 2) for iv in iters):
        return None
    products = [r for r in node.reads if reduction & uses(r)]
    if len(products) < 2:  # a sum or a max over one buffer, not a product
        return None
    output = [position(r.min) for r in node.writes[0].region]
    for output_dim in reversed(range(len(output))):
        v = output[output_dim]
        if v is None or v in reduction:
            continue
        reads, layouts, gathered = [], [], False
        for index, region in enumerate(node.reads):
            dims, used = [position(r.min) for r in region.region], uses(region)
            if v not in used or not reduction & used:
                continue
            if None in dims:
                if dims[-1] == v and dims.count(v) == 1:
                    continue  # contiguous along v (an NHWC depthwise input): read as it is
                gathered = True  # along v with a computed index: vector loads would gather
                break
            reads.append(index)
            layouts.append(_new_order(dims, v, reduction))  # type: ignore[arg-type]  # no None
        if reads and not gathered:
            extent = int(iters[v].dom.extent)
            return PackPlan(v, extent, tuple(reads), tuple(layouts), output_dim, len(output))
    return None


def _new_order(dims: list[int], v: int, reduction: set[int]) -> tuple[int, ...]:
    """The packed buffer's dimensions as positions of the old ones; ``-1`` is ``v // bn``.

    Dims of other spatial vars first (a batch), then the panel index ``v // bn``, then the
    reduction dims, then ``v % bn`` (the position of ``v`` itself): ``B[k, j]`` becomes
    ``[j // bn, k, j % bn]``, ``W[n, k]`` becomes ``[n // bn, k, n % bn]``.
    """
    at_v = dims.index(v)
    batch = [p for p, d in enumerate(dims) if d not in reduction and d != v]
    reduced = [p for p, d in enumerate(dims) if d in reduction]
    return (*batch, -1, *reduced, at_v)


def panel_widths(extent: int, lanes: int) -> tuple[int, ...]:
    """The panel widths for a vector dimension of ``extent``: multiples of the vector width
    that divide it (a panel that does not divide the extent would pad the copy)."""
    widths = [lanes * n for n in PANEL_VECTORS]
    return tuple(w for w in widths if w > 0 and extent % w == 0)


def pack_and_tile(sch: Any, block: Any, plan: PackPlan, bn: int) -> None:
    """Copy the plan's buffers into panels of ``bn`` and tile ``block`` around them, in place.

    A buffer the function lists as layout-free (a network's weight) is not copied here:
    MetaSchedule's ``RewriteLayout`` postprocessor gives it the layout the tiled loops read,
    which is these panels, in a copy a network runs once, at build time."""
    free = _layout_free(sch)
    for index, order in zip(plan.reads, plan.layouts, strict=True):
        if any(sch.get(block).reads[index].source.same_as(b) for b in free):
            continue
        copy = sch.cache_read(block, index, "global")
        sch.transform_layout(block, ("read", index), _index_map(order, bn))
        _copy_in_packed_order(sch, copy, order, bn)
    iters = list(sch.get(block).iter_vars)
    outer, middle, reduce_outer, reduce_inner, inner = [], [], [], [], []
    vector_loop = None
    for n, loop in enumerate(sch.get_loops(block)):
        if n == plan.vector_var:
            panels, vector_loop = sch.split(loop, [None, bn])
            a, b = sch.split(panels, sch.sample_perfect_tile(panels, n=2))
            outer.append(a)
            middle.append(b)
        elif iters[n].iter_type == 2:
            a, b = sch.split(loop, sch.sample_perfect_tile(loop, n=2, max_innermost_factor=64))
            reduce_outer.append(a)
            reduce_inner.append(b)
        else:
            tiles = sch.sample_perfect_tile(
                loop, n=_ROW_LEVELS, max_innermost_factor=MAX_TILE_ROWS
            )
            a, b, c = sch.split(loop, tiles)
            outer.append(a)
            middle.append(b)
            inner.append(c)
    sch.reorder(*outer, *middle, *reduce_outer, *reduce_inner, *inner, vector_loop)
    # The register tile (inner rows x bn) accumulates in a copy written back once per tile.
    write_back = sch.cache_write(block, 0, "global")
    sch.reverse_compute_at(write_back, middle[-1])
    if plan.output_dim != plan.output_ndim - 1:
        # A channel that is not the output's last dimension: block the copy's layout so the
        # panel's bn values are its last, contiguous, dimension (NCHW -> NCHWc).
        blocked = (*range(plan.output_dim), -1, *range(plan.output_dim + 1, plan.output_ndim))
        sch.transform_layout(block, ("write", 0), _index_map((*blocked, plan.output_dim), bn))
    _fuse_epilogue(sch, write_back)


def _fuse_epilogue(sch: Any, write_back: Any) -> None:
    """Inline into the tile's write-back the elementwise blocks that follow it (a fused
    network task's bias, residual add and ReLU), so that it writes their result while the tile
    is in registers. Left apart, they ran as one more pass over the whole output after the
    convolution: for ResNet-18's 7x7 stem, 3.2 MB read and written again."""
    while len(consumers := sch.get_consumers(write_back)) == 1:
        try:
            sch.reverse_compute_inline(consumers[0])
        except _tvm.ScheduleError:
            return  # not elementwise (a reduction, a pooling window): it stays apart


def vector_registers(lanes: int) -> int:
    """The float vector registers of a CPU with ``lanes`` float32 lanes: 32 with AVX-512, 16
    with AVX2 or SSE (an AArch64 core has 32 of 4 lanes: 16 is the cautious side there)."""
    return 32 if lanes >= 16 else 16


@dataclass(frozen=True)
class RegisterTile:
    """A packed schedule's register tile, read off its trace's decisions."""

    rows: int  # the product of the row dimensions' innermost tiles
    vectors: int  # the panel's width in vectors: each row accumulates this many
    choices: tuple[int, ...]  # every ``rows`` the row dimensions' extents allow

    @property
    def accumulators(self) -> int:
        return self.rows * self.vectors

    def bounds(self, registers: int) -> tuple[int, int]:
        """The fewest and most accumulators a tile of this shape may keep: enough to keep the
        FMA units busy (or as many as the shape allows), and what fits ``registers`` beside
        the panel's own vectors."""
        most = registers - self.vectors
        allowed = [r * self.vectors for r in self.choices if r * self.vectors <= most]
        return min(MIN_ACCUMULATORS, max(allowed, default=self.vectors)), most

    def fits(self, registers: int) -> bool:
        """Whether the tile's accumulators are within ``bounds``."""
        least, most = self.bounds(registers)
        return least <= self.accumulators <= most


def register_tile(trace: Any, lanes: int) -> RegisterTile | None:
    """The register tile of a schedule of a packed sketch, or ``None`` for any other schedule.

    The panel width is the one ``Split`` by a literal factor; the rows come from the three-way
    tiles (``_ROW_LEVELS``), each a factorisation of its loop's extent.
    """
    rows, bn, choices = 1, None, {1}
    for inst in trace.insts:
        kind = inst.kind.name
        if kind == "Split" and isinstance(inst.inputs[-1], _tvm.tirx.IntImm):
            bn = int(inst.inputs[-1])
        elif kind == "SamplePerfectTile" and int(inst.attrs[0]) == _ROW_LEVELS:
            tile = [int(x) for x in trace.get_decision(inst)]
            extent, most = math.prod(tile), int(inst.attrs[1])
            divisors = [d for d in range(1, min(extent, most) + 1) if extent % d == 0]
            choices = {c * d for c in choices for d in divisors}
            rows *= tile[-1]
    if bn is None or bn % lanes:
        return None
    return RegisterTile(rows, bn // lanes, tuple(sorted(choices)))


def tile_refusal(trace: Any, lanes: int) -> str | None:
    """Why the register-tile check refuses a schedule (a clause of a sentence), or ``None``
    when it does not."""
    tile = register_tile(trace, lanes)
    if tile is None or tile.fits(vector_registers(lanes)):
        return None
    least, most = tile.bounds(vector_registers(lanes))
    return (
        f"its register tile of {plural(tile.rows, 'row')} x {plural(tile.vectors, 'vector')} "
        f"keeps {plural(tile.accumulators, 'accumulator')}, where the sketch takes {least} to "
        f"{most}"
    )


def register_tile_share(mod: Any, sketch: Any, lanes: int, draws: int = 64) -> float:
    """The share of random replays of the packed ``sketch`` (a trace) whose register tile fits:
    the postprocessor refuses the others, so a sampler that picks a sketch, then draws its
    decisions, gets this share of its draws of the sketch back."""
    # fixed seeds: the same share every time
    fit = sum(_fits(_redraw(mod, sketch, seed).trace, lanes) for seed in range(1, draws + 1))
    return fit / draws


def register_tile_check(lanes: int) -> Any:
    """A MetaSchedule postprocessor that refuses a packed schedule whose register tile does not
    fit (``RegisterTile.fits``). Every sampling of the space runs the postprocessors, so no
    strategy, MetaSchedule's evolution included, spends a trial on such a tile."""

    @_tvm.derived_object
    class RegisterTileFits(_tvm.ms.postproc.PyPostproc):  # type: ignore[misc]  # TVM's base class is Any
        def _initialize_with_tune_context(self, context: Any) -> None:
            pass

        def apply(self, sch: Any) -> bool:
            return _fits(sch.trace, lanes)

        def clone(self) -> Any:
            return register_tile_check(lanes)

    return RegisterTileFits()


def _layout_free(sch: Any) -> list[Any]:
    """The parameters ``main`` lists in its ``layout_free_buffers`` attribute."""
    func = sch.mod["main"]
    listed = func.attrs.get("layout_free_buffers", ()) if func.attrs is not None else ()
    return [func.params[int(i)] for i in listed]


def _copy_in_packed_order(sch: Any, copy: Any, order: tuple[int, ...], bn: int) -> None:
    """Loop over the copy ``copy`` in the packed buffer's order, so that it writes each panel
    row whole (vectorized) and reads each source line while it is in the cache.

    In the source's order, a convolution's ``W[co, ci, kh, kw]`` copy wrote one float per
    cache line of ``W_global[co // bn, ci, kh, kw, co % bn]`` and revisited every line ``bn``
    times: for ResNet-18's 512-channel layers (9.4 MB of weights) each revisit missed the
    caches, and the copy cost about as much as the convolution's arithmetic.
    """
    at_v = order[-1]
    loops = list(sch.get_loops(copy))
    panel, lane = sch.split(loops[at_v], [None, bn])
    sch.reorder(*[panel if p == -1 else lane if p == at_v else loops[p] for p in order])


def _index_map(order: tuple[int, ...], bn: int) -> Any:
    at_v = order[-1]

    def packed(*axes: Any) -> list[Any]:
        return [
            axes[at_v] // bn if p == -1 else axes[p] % bn if p == at_v else axes[p] for p in order
        ]

    return packed  # a callable: TVM builds the map with the block's index type


def packed_sketches(mod: Any, target: Any, lanes: int, num_threads: int) -> list[Any]:
    """The packed sketches of ``mod`` (none when no block is eligible), without postprocessors:
    the design space runs MetaSchedule's own on every sketch. A packed sketch is one that
    writes its register tile through a ``cache_write`` (a layout-free weight leaves it no
    copy of its own to tell it by); the MetaSchedule rules kept beside it never do."""
    ms = _tvm.ms
    context = ms.TuneContext(
        mod=mod,
        target=target,
        space_generator=ms.space_generator.PostOrderApply(
            sch_rules=packing_rules(lanes), postprocs=[], mutator_probs={}
        ),
        task_name="packed",
        rand_state=1,
        num_threads=num_threads,
    )
    return [
        _with_a_fitting_tile(mod, sketch, lanes)
        for sketch in context.generate_design_space()
        if any(inst.kind.name == "CacheWrite" for inst in sketch.trace.insts)
    ]


def _with_a_fitting_tile(mod: Any, sketch: Any, lanes: int) -> Any:
    """``sketch``, its own decisions redrawn (fixed seeds) until its register tile fits: a
    search that starts from a sketch's own decisions (Droplet's origin, the knob space's
    index 0) must not start from a schedule the postprocessor refuses."""
    trace = sketch.trace
    for seed in range(1, 257):
        if _fits(sketch.trace, lanes):
            return sketch
        sketch = _redraw(mod, trace, seed)
    return sketch  # no fitting draw: the postprocessor refuses its schedules too


def _redraw(mod: Any, sketch: Any, seed: int) -> Any:
    """The sketch's instructions (a trace) replayed on ``mod`` with every decision drawn anew."""
    sch = _tvm.Schedule(mod, seed=seed)
    _tvm.Trace(list(sketch.insts), {}).apply_to_schedule(sch, remove_postproc=True)
    return sch


def _fits(trace: Any, lanes: int) -> bool:
    tile = register_tile(trace, lanes)
    return tile is None or tile.fits(vector_registers(lanes))


def packing_rules(lanes: int) -> list[Any]:
    """MetaSchedule's CPU rules with :class:`PackedTiling` in place of its multi-level tiling
    (and without its rfactor and random compute-location rules, which would unpick the panels)."""
    ms = _tvm.ms
    keep = (ms.schedule_rule.ApplyCustomRule, ms.schedule_rule.InlineConstantScalars,
            ms.schedule_rule.AutoInline, ms.schedule_rule.ParallelizeVectorizeUnroll)  # fmt: skip
    rules = []
    for rule in ms.ScheduleRule.create("llvm"):
        if isinstance(rule, ms.schedule_rule.MultiLevelTiling):
            rules.append(_packed_tiling(lanes))
        elif isinstance(rule, keep):
            rules.append(rule)
    return rules


def _packed_tiling(lanes: int) -> Any:
    # TVM is untyped: its classes are Any to mypy, which refuses subclassing them.
    @_tvm.derived_object
    class PackedTiling(_tvm.ms.schedule_rule.PyScheduleRule):  # type: ignore[misc]  # TVM's base class is Any
        """One sketch per panel width for every eligible block; other blocks pass unchanged."""

        def _initialize_with_tune_context(self, context: Any) -> None:
            pass

        def apply(self, sch: Any, block: Any) -> list[Any]:
            plan = plan_packing(sch, block)
            widths = panel_widths(plan.extent, lanes) if plan else ()
            if plan is None or not widths:
                return [sch]
            sketches = []
            for bn in widths:
                packed = sch.copy()
                try:
                    pack_and_tile(packed, block, plan, bn)
                except (_tvm.ScheduleError, ValueError, RuntimeError):
                    continue  # a block TVM will not pack this way: MetaSchedule's sketches remain
                sketches.append(packed)
            return sketches or [sch]

        def clone(self) -> Any:
            return _packed_tiling(lanes)

    return PackedTiling()
