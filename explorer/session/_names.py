"""Readable names for loops and blocks, and the loop-nest summary a UI renders.

Sessions never keep TVM random variables (RVs) between steps: every step re-reads the current IR
and resolves names afresh, so an RV can never go stale. Reading the IR (not calling
``sch.get_loops``) keeps inspection out of the trace.

Naming rules:
    * a block is named by its block name (``"C"``, ``"C_global"``);
    * a loop is named by its loop-variable name (``"i_0"``) when no other loop in the function
      has that name, else as ``"block.var"`` where ``block`` is the first block nested under the
      loop. ``"block.var"`` is always accepted, for any block under the loop;
    * two loops that would still share a name (a block with the user's own ``i_0`` and the
      ``i_0`` a split made) are numbered outer first: ``"C.i_0#1"``, ``"C.i_0#2"``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from explorer import _tvm

_FOR_KINDS = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread_binding"}
_ITER_TYPES = {0: "S", 2: "R"}  # tirx IterVar: DataPar=0, CommReduce=2; the rest print as "O"


@dataclass(frozen=True, slots=True)
class LoopInfo:
    """One loop of the nest.

    Attributes:
        name: The name ``apply()`` accepts (the variable, or ``"block.var"`` when ambiguous).
        var: The loop variable's name.
        extent: The trip count (``None`` when not a constant).
        kind: ``"serial"``, ``"parallel"``, ``"vectorized"``, ``"unrolled"`` or
            ``"thread_binding"``.
        thread: The bound thread axis (``"threadIdx.x"``...) for ``thread_binding`` loops.
        annotations: ``(key, value)`` pairs set by ``annotate`` (pragmas) or by TVM.
        block: The first block nested under the loop (its qualifying block).
        depth: Nesting depth within its block scope (0 = outermost).
        blocks: Every block nested under the loop, in program order.
    """

    name: str
    var: str
    extent: int | None
    kind: str
    thread: str | None
    annotations: tuple[tuple[str, Any], ...]
    block: str
    depth: int
    blocks: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``"i_0 (32, parallel)"``: the name with extent and non-serial kind."""
        extras = [str(self.extent) if self.extent is not None else "?"]
        if self.kind != "serial":
            extras.append(self.thread or self.kind)
        extras += [f"{k}={v}" for k, v in self.annotations]
        return f"{self.name} ({', '.join(extras)})"


@dataclass(frozen=True, slots=True)
class BlockInfo:
    """One block and the loops around it, outer to inner (as ``sch.get_loops`` returns them).

    Attributes:
        name: The block name.
        loops: Enclosing loops up to the nearest enclosing block, outer to inner.
        iter_kinds: One letter per block iterator: ``S`` (spatial), ``R`` (reduction), ``O``.
        reads: Names of the buffers read, in read-region order (``read_index`` counts these).
        writes: Names of the buffers written, in order (``write_index`` counts these).
        allocs: Buffers the block allocates (``storage_align``'s candidates live here).
        parent: The enclosing block (``"root"`` for a top-level block).
        has_init: Whether the block has an init statement (a reduction not yet decomposed).
        annotations: The block's annotations as ``(key, value)`` pairs.
    """

    name: str
    loops: tuple[LoopInfo, ...]
    iter_kinds: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    allocs: tuple[str, ...]
    parent: str
    has_init: bool
    annotations: tuple[tuple[str, Any], ...] = ()

    @property
    def is_reduction(self) -> bool:
        return "R" in self.iter_kinds


@dataclass
class _LoopRec:
    var: str
    extent: int | None
    kind: str
    thread: str | None
    annotations: tuple[tuple[str, Any], ...]
    depth: int
    blocks: list[str] = field(default_factory=list)  # every block nested under it, in order


@dataclass(frozen=True)
class NestIndex:
    """Every block and loop of one schedule's ``main``, with the names the user may use."""

    blocks: tuple[BlockInfo, ...]
    loops: tuple[LoopInfo, ...]  # every loop once, in program order (pre-order)

    def block_names(self) -> list[str]:
        return [b.name for b in self.blocks]

    def loop_names(self) -> list[str]:
        return [lp.name for lp in self.loops]

    def block(self, name: str) -> BlockInfo | None:
        for b in self.blocks:
            if b.name == name:
                return b
        return None

    def position(self, block: str) -> int:
        """The block's index in program order."""
        return self.block_names().index(block)

    def enclosing(self, loop: LoopInfo) -> list[LoopInfo]:
        """The loops around ``loop`` in its block scope, outer to inner."""
        owner = self.block(loop.block)
        return [lp for lp in owner.loops if lp.depth < loop.depth] if owner else []

    def enclosed(self, loop: LoopInfo) -> list[LoopInfo]:
        """The loops inside ``loop`` (every block under it), each once."""
        out: dict[str, LoopInfo] = {}
        for name in loop.blocks:
            block = self.block(name)
            for lp in block.loops if block else ():
                if lp.depth > loop.depth and lp.block in loop.blocks:
                    out.setdefault(lp.name, lp)
        return list(out.values())

    def producers(self, block: str) -> list[str]:
        """Other blocks that write a buffer ``block`` reads."""
        reads = set(self.block(block).reads)  # type: ignore[union-attr]  # ``block`` names a block of this nest
        return [b.name for b in self.blocks if b.name != block and reads & set(b.writes)]

    def consumers(self, block: str) -> list[str]:
        """Other blocks that read a buffer ``block`` writes."""
        writes = set(self.block(block).writes)  # type: ignore[union-attr]  # ``block`` names a block of this nest
        return [b.name for b in self.blocks if b.name != block and writes & set(b.reads)]

    def find_loop(self, name: str) -> tuple[LoopInfo, str, int] | str:
        """Resolve a loop name to ``(info, block, index in get_loops(block))``.

        Returns a plain-language reason (a ``str``) when the name does not denote one loop.
        """
        exact = [lp for lp in self.loops if lp.name == name]
        if len(exact) == 1:
            return exact[0], exact[0].block, exact[0].depth
        matches = [lp for lp in self.loops if lp.var == name]
        if len(matches) == 1:
            lp = matches[0]
            return lp, lp.block, lp.depth
        if len(matches) > 1:
            options = ", ".join(lp.name for lp in matches)
            return f"loop name {name!r} is ambiguous; qualify it as one of: {options}"
        block_name, dot, var = name.partition(".")
        if dot:
            block = self.block(block_name)
            if block is None:
                return (
                    f"no block named {block_name!r} (in {name!r}); "
                    f"blocks: {', '.join(self.block_names()) or '(none)'}"
                )
            found = [(i, lp) for i, lp in enumerate(block.loops) if lp.var == var]
            if len(found) == 1:
                index, lp = found[0]
                return lp, block.name, index
            if not found:
                return (
                    f"block {block.name} has no loop {var!r} around it; its loops: "
                    f"{', '.join(lp.var for lp in block.loops) or '(none)'}"
                )
            return f"block {block.name} has several loops named {var!r}"
        return f"no loop named {name!r}; loops: {', '.join(self.loop_names()) or '(none)'}"


def index_schedule(sch: Any) -> NestIndex:
    """Read the loop nest of ``sch.mod["main"]`` without touching the schedule or its trace."""
    func = sch.mod["main"]
    block_recs: list[tuple[Any, list[_LoopRec], str]] = []
    all_loops: list[_LoopRec] = []
    _walk(func.body, [], "", block_recs, all_loops)

    counts = Counter(rec.var for rec in all_loops)
    names = []
    for rec in all_loops:
        owner = rec.blocks[0] if rec.blocks else ""
        names.append(rec.var if counts[rec.var] == 1 or not owner else f"{owner}.{rec.var}")
    # A block can still hold two loops of one name (the user's own i_0 and the i_0 that
    # splitting i makes): number them, outer first, so every loop stays addressable.
    repeated, seen = Counter(names), Counter[str]()
    for k, name in enumerate(names):
        if repeated[name] > 1:
            seen[name] += 1
            names[k] = f"{name}#{seen[name]}"
    infos: dict[int, LoopInfo] = {}
    for rec, name in zip(all_loops, names, strict=True):
        owner = rec.blocks[0] if rec.blocks else ""
        infos[id(rec)] = LoopInfo(
            name=name,
            var=rec.var,
            extent=rec.extent,
            kind=rec.kind,
            thread=rec.thread,
            annotations=rec.annotations,
            block=owner,
            depth=rec.depth,
            blocks=tuple(rec.blocks),
        )
    blocks = []
    for blk, loops, parent in block_recs:
        blocks.append(
            BlockInfo(
                name=str(blk.name_hint),
                loops=tuple(infos[id(r)] for r in loops),
                iter_kinds="".join(
                    _ITER_TYPES.get(int(iv.iter_type), "O") for iv in blk.iter_vars
                ),
                reads=tuple(str(r.source.name) for r in blk.reads),
                writes=tuple(str(w.source.name) for w in blk.writes),
                allocs=tuple(str(b.name) for b in blk.alloc_buffers),
                parent=parent,
                has_init=blk.init is not None,
                annotations=_plain_annotations(blk.annotations),
            )
        )
    return NestIndex(blocks=tuple(blocks), loops=tuple(infos[id(r)] for r in all_loops))


def _walk(
    stmt: Any,
    stack: list[_LoopRec],
    parent: str,
    out_blocks: list[tuple[Any, list[_LoopRec], str]],
    out_loops: list[_LoopRec],
) -> None:
    tirx = _tvm.tirx
    if stmt is None:
        return
    if isinstance(stmt, tirx.For):
        extent = stmt.extent
        binding = stmt.thread_binding
        rec = _LoopRec(
            var=str(stmt.loop_var.name),
            extent=int(extent.value) if isinstance(extent, tirx.IntImm) else None,
            kind=_FOR_KINDS.get(int(stmt.kind), str(stmt.kind)),
            thread=str(binding.thread_tag) if binding is not None else None,
            annotations=_plain_annotations(stmt.annotations),
            depth=len(stack),
        )
        out_loops.append(rec)
        _walk(stmt.body, [*stack, rec], parent, out_blocks, out_loops)
        return
    if isinstance(stmt, _tvm.tvm.s_tir.SBlockRealize):
        blk = stmt.block
        name = str(blk.name_hint)
        if name != "root":
            out_blocks.append((blk, list(stack), parent or "root"))
            for rec in stack:
                rec.blocks.append(name)
        # a block opens a new scope: get_loops() of inner blocks stops here
        _walk(blk.body, [], name, out_blocks, out_loops)
        return
    if isinstance(stmt, tirx.SeqStmt):
        for child in stmt.seq:
            _walk(child, stack, parent, out_blocks, out_loops)
        return
    for attr in ("body", "then_case", "else_case", "block"):
        child = getattr(stmt, attr, None)
        if child is not None and isinstance(child, (tirx.Stmt, _tvm.tvm.s_tir.SBlockRealize)):
            _walk(child, stack, parent, out_blocks, out_loops)


def _plain_annotations(annotations: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((str(k), _plain(v)) for k, v in annotations.items()))


def _plain(value: Any) -> Any:
    tirx = _tvm.tirx
    if isinstance(value, (tirx.IntImm, tirx.FloatImm)):
        return value.value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (int, float, bool)):
        return value
    return str(value)
