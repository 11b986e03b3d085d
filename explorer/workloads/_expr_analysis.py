"""The ``expr`` family's checking: a parsed statement against its tensor shapes (``analyze``).

What it checks and how extents are found is in ``explorer.workloads._expr``'s rules.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer.errors import WorkloadError
from explorer.workloads._expr_parser import (
    Access,
    Affine,
    BinOp,
    Call,
    Expr,
    Neg,
    Num,
    Statement,
    parse,
    walk,
)

RESERVED_NAMES = ("root",)  # the PrimFunc's root block is called "root"

Shapes = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class Analysis:
    """A checked statement: names, extents and iteration space, ready to lower or evaluate."""

    statement: Statement
    output: str
    out_vars: tuple[str, ...]
    reduce_vars: tuple[str, ...]
    extents: tuple[tuple[str, int], ...]
    inputs: tuple[tuple[str, tuple[int, ...]], ...]  # in order of first use
    ops_per_point: int

    @property
    def out_shape(self) -> tuple[int, ...]:
        ext = dict(self.extents)
        return tuple(ext[v] for v in self.out_vars)

    @property
    def space(self) -> tuple[int, ...]:
        ext = dict(self.extents)
        return tuple(ext[v] for v in (*self.out_vars, *self.reduce_vars))

    @property
    def flops(self) -> int:
        return self.ops_per_point * math.prod(self.space)


# -- checking ----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def analyze(text: str, shapes: Shapes) -> Analysis:
    """Parse ``text`` and check it against ``shapes``; raises ``WorkloadError`` on any problem."""
    stmt = parse(text)
    return _Checker(text, stmt, dict(shapes)).run()


class _Checker:
    def __init__(self, text: str, stmt: Statement, shapes: dict[str, tuple[int, ...]]):
        self.text = text
        self.stmt = stmt
        self.shapes = shapes
        self.accesses = [n for n in walk(stmt.rhs) if isinstance(n, Access)]
        self.extents: dict[str, int] = {}
        self.sources: dict[str, str] = {}

    def error(self, message: str, pos: int | None) -> WorkloadError:
        return WorkloadError(message, position=pos, text=self.text if pos is not None else None)

    def quote(self, idx: Affine) -> str:
        return self.text[idx.pos : idx.end]

    def run(self) -> Analysis:
        out = self.stmt.output
        # Step 1. Names: output, inputs, variables, shapes.
        out_vars = self._check_output(out)
        right_vars: list[str] = []
        for acc in self.accesses:
            self._check_input(acc)
            for idx in acc.indices:
                right_vars += [v for v in idx.variables if v not in right_vars]
        tensors = {out.name, *(a.name for a in self.accesses)}
        for acc in (out, *self.accesses):
            for idx in acc.indices:
                clash = next((v for v in idx.variables if v in tensors), None)
                if clash is not None:
                    raise self.error(
                        f"{clash!r} is used both as a tensor and as an index variable", idx.pos
                    )
        unused = sorted(set(self.shapes) - tensors)
        if unused:
            raise self.error(
                f"shapes gives {', '.join(map(repr, unused))}, which the expression does not use",
                None,
            )
        self._check_divisions()
        # Step 2. Reduction variables.
        reduce_vars = tuple(v for v in right_vars if v not in out_vars)
        if self.stmt.op == "=" and reduce_vars:
            raise self.error(
                f"index variable {reduce_vars[0]!r} appears only on the right of '='; use '+=' "
                "(sum), 'max=' or 'min=' to reduce over it",
                self._first_use(reduce_vars[0]),
            )
        if self.stmt.op != "=" and not reduce_vars:
            raise self.error(
                f"'{self.stmt.op}' reduces over index variables that appear only on the right, "
                "and there are none; use '='",
                self.stmt.op_pos,
            )
        # Step 3. Extents, then bounds.
        self._infer_extents(out_vars)
        for v in (*out_vars, *reduce_vars):
            if v not in self.extents:
                raise self.error(
                    f"cannot infer the extent of index variable {v!r}: it never appears alone in "
                    f"a dimension of an input (give the shape of output {out.name!r} in shapes)",
                    self._first_use(v),
                )
        for acc in self.accesses:
            self._check_bounds(acc)
        ops = sum(isinstance(n, (BinOp, Neg, Call)) for n in walk(self.stmt.rhs))
        inputs: dict[str, tuple[int, ...]] = {}
        for acc in self.accesses:
            inputs.setdefault(acc.name, self.shapes[acc.name])
        return Analysis(
            statement=self.stmt,
            output=out.name,
            out_vars=out_vars,
            reduce_vars=reduce_vars,
            extents=tuple((v, self.extents[v]) for v in (*out_vars, *reduce_vars)),
            inputs=tuple(inputs.items()),
            ops_per_point=ops + (self.stmt.op != "="),
        )

    def _check_output(self, out: Access) -> tuple[str, ...]:
        if out.name in RESERVED_NAMES:
            raise self.error(f"{out.name!r} is reserved; choose another tensor name", out.pos)
        names: list[str] = []
        for idx in out.indices:
            if idx.const != 0 or len(idx.terms) != 1 or idx.terms[0][1] != 1:
                raise self.error(
                    f"output indices must be plain index variables (got {self.quote(idx)!r})",
                    idx.pos,
                )
            var = idx.terms[0][0]
            if var in names:
                raise self.error(f"index variable {var!r} appears twice in the output", idx.pos)
            names.append(var)
        if out.name in self.shapes and len(self.shapes[out.name]) != len(names):
            raise self.error(
                f"output {out.name!r} has shape {self.shapes[out.name]} in shapes but is indexed "
                f"with {len(names)} variable{'s' if len(names) != 1 else ''}",
                out.pos,
            )
        return tuple(names)

    def _check_input(self, acc: Access) -> None:
        if acc.name == self.stmt.output.name:
            raise self.error(
                f"the output {acc.name!r} cannot also be read on the right-hand side", acc.pos
            )
        if acc.name in RESERVED_NAMES:
            raise self.error(f"{acc.name!r} is reserved; choose another tensor name", acc.pos)
        if acc.name not in self.shapes:
            known = ", ".join(sorted(self.shapes)) or "nothing"
            raise self.error(
                f"no shape given for tensor {acc.name!r} (shapes has {known})", acc.pos
            )
        shape = self.shapes[acc.name]
        if len(shape) != len(acc.indices):
            raise self.error(
                f"{acc.name!r} has {len(shape)} dimension{'s' if len(shape) != 1 else ''} "
                f"(shape {shape}) but is indexed with {len(acc.indices)}",
                acc.pos,
            )

    def _set_extent(self, var: str, n: int, where: str, pos: int) -> None:
        if var in self.extents and self.extents[var] != n:
            raise self.error(
                f"index variable {var!r} has extent {self.extents[var]} from "
                f"{self.sources[var]} but {n} from {where}",
                pos,
            )
        self.extents[var] = n
        self.sources.setdefault(var, where)

    def _infer_extents(self, out_vars: tuple[str, ...]) -> None:
        out = self.stmt.output
        if out.name in self.shapes:
            for d, (var, n) in enumerate(zip(out_vars, self.shapes[out.name], strict=True)):
                self._set_extent(var, n, f"{out.name} dimension {d}", out.indices[d].pos)
        for acc in self.accesses:
            for d, (idx, n) in enumerate(zip(acc.indices, self.shapes[acc.name], strict=True)):
                if idx.const == 0 and len(idx.terms) == 1 and idx.terms[0][1] == 1:
                    self._set_extent(idx.terms[0][0], n, f"{acc.name} dimension {d}", idx.pos)
        # A variable left unknown in exactly one term of a compound index gets the largest extent
        # that keeps that access in bounds (the minimum over all such accesses); repeat until no
        # more can be inferred, since one inference can unlock another.
        while True:
            found: dict[str, tuple[int, int]] = {}
            for acc in self.accesses:
                for idx, n in zip(acc.indices, self.shapes[acc.name], strict=True):
                    unknown = [(v, c) for v, c in idx.terms if v not in self.extents]
                    if len(unknown) != 1:
                        continue
                    var, coeff = unknown[0]
                    lo, hi = self._range(idx, skip=var)
                    ext = (n - 1 - hi) // coeff + 1 if coeff > 0 else lo // -coeff + 1
                    if var not in found or ext < found[var][0]:
                        found[var] = (ext, idx.pos)
            if not found:
                return
            for var, (ext, pos) in found.items():
                if ext < 1:
                    raise self.error(
                        f"no extent of index variable {var!r} keeps this access in bounds", pos
                    )
                self._set_extent(var, ext, "the bounds of its compound indices", pos)

    def _range(self, idx: Affine, skip: str | None = None) -> tuple[int, int]:
        lo = hi = idx.const
        for v, c in idx.terms:
            if v != skip:
                span = c * (self.extents[v] - 1)
                lo, hi = lo + min(0, span), hi + max(0, span)
        return lo, hi

    def _check_bounds(self, acc: Access) -> None:
        for d, (idx, n) in enumerate(zip(acc.indices, self.shapes[acc.name], strict=True)):
            lo, hi = self._range(idx)
            if lo < 0 or hi > n - 1:
                raise self.error(
                    f"{acc.name} index {d} ({self.quote(idx)}) ranges over [{lo}, {hi}] but "
                    f"dimension {d} of {acc.name!r} has extent {n} (valid 0..{n - 1}); accesses "
                    "must stay in bounds (there is no implicit padding)",
                    idx.pos,
                )

    def _check_divisions(self) -> None:
        # TVM folds constants while building the TE (including 0 * x and x - x) and aborts on a
        # zero divisor with a raw "Divide by zero" check failure; refuse it here, in words.
        for node in walk(self.stmt.rhs):
            if isinstance(node, BinOp) and node.op == "/" and _is_zero(node.rhs):
                raise self.error(
                    "division by zero: the right-hand side of this '/' is always 0", node.pos
                )

    def _first_use(self, var: str) -> int | None:
        for acc in (self.stmt.output, *self.accesses):
            for idx in acc.indices:
                if var in idx.variables:
                    return idx.pos
        return None


# Python's operators on TVM PrimExprs build the TIR nodes; on NumPy arrays they compute.
_BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}


def _constant(node: Expr) -> float | None:
    """The value of a subexpression that reads no tensor, else ``None``."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Access):
        return None
    children = [node.operand] if isinstance(node, Neg) else walk_children(node)
    values = [v for c in children if (v := _constant(c)) is not None]
    if len(values) < len(children):
        return None
    with np.errstate(all="ignore"):  # 0/0, log(0): NaN or inf, never an exception
        if isinstance(node, Neg):
            return -float(values[0])
        if isinstance(node, BinOp):
            return float(_BINARY[node.op](np.float64(values[0]), np.float64(values[1])))
        return float(_NP_FUNCS[node.fn](*map(np.float64, values)))


def _is_zero(node: Expr) -> bool:
    """Whether ``node`` is 0 for every input: a zero constant, or what TVM simplifies to one."""
    if _constant(node) == 0:
        return True
    if isinstance(node, Neg):
        return _is_zero(node.operand)
    if isinstance(node, BinOp):
        if node.op == "*":
            return _is_zero(node.lhs) or _is_zero(node.rhs)
        if node.op == "/":
            return _is_zero(node.lhs)
        if node.op == "-" and _same(node.lhs, node.rhs):
            return True
        return _is_zero(node.lhs) and _is_zero(node.rhs)
    return False


def _same(a: Expr, b: Expr) -> bool:
    """Structural equality, ignoring where in the text each node was written."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Num) and isinstance(b, Num):
        return a.value == b.value
    if isinstance(a, Access) and isinstance(b, Access):
        return a.name == b.name and [(i.terms, i.const) for i in a.indices] == [
            (i.terms, i.const) for i in b.indices
        ]
    if isinstance(a, Neg) and isinstance(b, Neg):
        return _same(a.operand, b.operand)
    if isinstance(a, BinOp) and isinstance(b, BinOp) and a.op != b.op:
        return False
    if isinstance(a, Call) and isinstance(b, Call) and a.fn != b.fn:
        return False
    ca, cb = walk_children(a), walk_children(b)
    return len(ca) == len(cb) and all(_same(x, y) for x, y in zip(ca, cb, strict=True))


def walk_children(node: Expr) -> list[Expr]:
    if isinstance(node, BinOp):
        return [node.lhs, node.rhs]
    if isinstance(node, Neg):
        return [node.operand]
    if isinstance(node, Call):
        return list(node.args)
    return []


# NumPy's functions, for constant folding here and the family's NumPy reference.
def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


_NP_FUNCS: dict[str, Callable[..., Any]] = {
    "max": np.maximum,
    "min": np.minimum,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0.0),
    "abs": np.abs,
}
