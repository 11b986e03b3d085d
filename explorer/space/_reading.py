"""A schedule's IR read back as loops per block: how it tiles each block iterator, how much it
unrolls, which loops it parallelized or vectorized. Read from the IR the schedule produces, not
from the order of its steps, so any sequence of split/reorder/fuse reads the same."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from explorer import _tvm

_FOR_UNROLLED = 3


@dataclass(frozen=True)
class Tiling:
    """How the user's schedule iterates one block iterator."""

    name: str  # the block iterator's name ("i" for v_i)
    factors: tuple[int, ...]  # outer stride first
    extent: int
    pure: bool  # the factors multiply to the extent with consistent strides (no predicate)
    placed: bool  # under another block's loops (compute-at): its outer factors are theirs


def realizes(func: Any) -> list[tuple[Any, list[Any]]]:
    """Every block realize of ``func`` with the loops between it and its enclosing block."""
    out: list[tuple[Any, list[Any]]] = []
    tirx, realize_t = _tvm.tirx, _tvm.tvm.s_tir.SBlockRealize

    def walk(stmt: Any, loops: list[Any]) -> None:
        if isinstance(stmt, tirx.For):
            walk(stmt.body, [*loops, stmt])
        elif isinstance(stmt, realize_t):
            out.append((stmt, loops))
            walk(stmt.block.body, [])
        elif isinstance(stmt, tirx.SeqStmt):
            for child in stmt.seq:
                walk(child, loops)
        else:
            for attr in ("body", "then_case", "else_case", "block"):
                child = getattr(stmt, attr, None)
                if isinstance(child, (tirx.Stmt, realize_t)):
                    walk(child, loops)

    walk(func.body, [])
    return out


def iter_sums(realize: Any, loops: list[Any]) -> list[Any]:
    """Each block iterator's binding as a sum of ``loops``' variables times strides."""
    dom = {lp.loop_var: _tvm.tvm.ir.Range.from_min_extent(lp.min, lp.extent) for lp in loops}
    return [_tvm.tvm.sym.normalize_to_iter_sum(v, dom) for v in realize.iter_values]


def user_tilings(func: Any) -> dict[tuple[str, int], Tiling]:
    """Per ``(block name, iterator index)``: how the schedule tiles that block iterator."""
    out = {}
    every = realizes(func)
    # A loop is one Python object in every list of the walk below it: ids count its blocks.
    enclosing = Counter(id(lp) for _, loops in every for lp in loops)
    for realize, loops in every:
        placed = any(enclosing[id(lp)] > 1 for lp in loops)
        block = realize.block
        for it, (iv, total) in enumerate(
            zip(block.iter_vars, iter_sums(realize, loops), strict=True)
        ):
            extent = as_int(iv.dom.extent)
            args = list(total.args)
            factors = tuple(as_int(a.extent) for a in args)
            strides = [as_int(a.scale) for a in args]
            # A split that does not divide leaves a predicate and factors whose product
            # exceeds the extent: not a perfect tiling.
            pure = (
                as_int(total.base) == 0
                and math.prod(factors) == extent
                and all(strides[k] == math.prod(factors[k + 1 :]) for k in range(len(factors)))
            )
            name = str(iv.var.name).removeprefix("v_")
            out[(str(block.name_hint), it)] = Tiling(
                name, factors or (extent,), extent, pure, placed
            )
    return out


def user_unroll(func: Any) -> int:
    """The most loop iterations unrolled around one block (a pragma counts as its max step)."""
    most = 0
    for _, loops in realizes(func):
        steps = math.prod(as_int(lp.extent) for lp in loops if int(lp.kind) == _FOR_UNROLLED)
        if any(int(lp.kind) == _FOR_UNROLLED for lp in loops):
            most = max(most, steps)
        for lp in loops:
            value = lp.annotations.get("pragma_auto_unroll_max_step")
            if value is not None:
                most = max(most, as_int(value))
    return most


def loop_kinds(func: Any) -> dict[str, list[str]]:
    """The names of the parallel and the vectorized loops, in the order of the IR."""
    out: dict[str, list[str]] = {"parallel": [], "vectorized": []}
    for _, loops in realizes(func):
        for lp in loops:
            kind = {1: "parallel", 2: "vectorized"}.get(int(lp.kind))
            name = str(lp.loop_var.name)
            if kind and name not in out[kind]:
                out[kind].append(name)
    return out


def as_int(x: Any) -> int:
    return int(x.value) if hasattr(x, "value") else int(x)
