"""Custom operators written as one einsum-like statement: the ``expr`` family.

Examples::

    C[i, j] += A[i, k] * B[k, j]                          # matmul: sum over k
    Y[n, c, h, w] = max(X[n, c, h, w], 0)                 # elementwise
    Y[i] max= X[i, j]                                     # row maximum (also min=)
    O[n, f, y, x] += I[n, c, y + ry, x + rx] * W[f, c, ry, rx]   # valid convolution
    Z[i, j] = exp(X[i, j] - 1.5) / (1 + abs(Y[j]))

The text is parsed (``_expr_parser``), checked against the tensor shapes, and lowered to TE; it is
never evaluated as Python.

Rules:

* ``=`` assigns; every index variable on the right must appear on the left. ``+=``, ``max=`` and
  ``min=`` reduce (sum, max, min) over the variables that appear only on the right, and need at
  least one. The left side is the output: distinct plain variables, e.g. ``C[i, j]``.
* Shapes are given for the inputs (``shapes={"A": (64, 32), ...}``); the output's shape may be
  given too (it must then agree), which is the only way to give an extent to a left-hand variable
  that no input fixes (a broadcast such as ``C[i, j] = A[i]``).
* Extents: a variable that appears *alone* in a dimension (``A[i, k]``) takes that dimension's
  extent, and all such appearances must agree. A variable that only appears inside a compound index
  (``y`` in ``I[.., y + ry, ..]``, once ``ry`` is known from ``W``) gets the largest extent that
  keeps every such access in bounds: ``H - R + 1`` for ``y + ry``, ``(H - R) // s + 1`` for
  ``s*y + ry``, as for a convolution without padding.
* Every access must then be in bounds over the whole iteration space; an access that is not (for
  example ``A[i + 1]`` with ``i`` spanning ``A``) is refused with the range it would cover. There
  is no implicit padding: pad the input shape yourself.
* FLOPs are counted as written: each ``+ - * /``, unary minus and function call (``exp`` and
  ``sigmoid`` count one each) is one operation, plus one per point for the reduction's
  accumulate, times the size of the iteration space (all index variables). So ``C[i, j] +=
  A[i, k] * B[k, j]`` gives ``2*M*N*K``, matching ``matmul``.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.errors import WorkloadError
from explorer.workloads._base import (
    OperatorFamily,
    Params,
    ShapeParam,
    Workload,
    check_elements,
    dtype_param,
    make_workload,
)
from explorer.workloads._dims import MAX_DIM
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

te, tirx = _tvm.te, _tvm.tirx

RESERVED_NAMES = ("root",)  # the PrimFunc's root block is called "root"
CHUNK_ELEMENTS = 1 << 22  # NumPy reference: largest iteration-space chunk held at once

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


# -- lowering to TE ----------------------------------------------------------------------------
_TE_UNARY = {
    "exp": lambda x: te.exp(x),
    "log": lambda x: te.log(x),
    "sqrt": lambda x: te.sqrt(x),
    "tanh": lambda x: te.tanh(x),
    "sigmoid": lambda x: te.sigmoid(x),
    "abs": lambda x: te.abs(x),
}
_TE_REDUCERS = {"+=": te.sum, "max=": te.max, "min=": te.min}


def lower(an: Analysis, dtype: str) -> list[Any]:
    """TE tensors for ``an``: one placeholder per input (named after it), then the output."""
    placeholders = {name: te.placeholder(shape, dtype, name=name) for name, shape in an.inputs}
    ext = dict(an.extents)
    raxes = [te.reduce_axis((0, ext[v]), name=v) for v in an.reduce_vars]

    def index(idx: Affine, env: Mapping[str, Any]) -> Any:
        expr: Any = None
        for v, c in idx.terms:
            term = env[v] if c == 1 else env[v] * c
            expr = term if expr is None else expr + term
        if expr is None:
            return tirx.const(idx.const, "int32")
        return expr + idx.const if idx.const else expr

    def value(node: Expr, env: Mapping[str, Any]) -> Any:
        if isinstance(node, Num):
            return tirx.const(node.value, dtype)
        if isinstance(node, Access):
            return placeholders[node.name][tuple(index(i, env) for i in node.indices)]
        if isinstance(node, Neg):
            return -value(node.operand, env)
        if isinstance(node, BinOp):
            return _BINARY[node.op](value(node.lhs, env), value(node.rhs, env))
        args = [value(a, env) for a in node.args]
        if node.fn in ("max", "min"):
            return (te.max if node.fn == "max" else te.min)(args[0], args[1])
        if node.fn == "relu":
            return te.max(args[0], tirx.const(0, dtype))
        return _TE_UNARY[node.fn](args[0])

    def body(*axes: Any) -> Any:
        env = dict(zip(an.out_vars, axes, strict=True))
        env.update((v, r.var) for v, r in zip(an.reduce_vars, raxes, strict=True))
        rhs = value(an.statement.rhs, env)
        if not raxes:
            return rhs
        return _TE_REDUCERS[an.statement.op](rhs, axis=raxes)

    out = te.compute(an.out_shape, body, name=an.output, varargs_names=list(an.out_vars))
    return [*placeholders.values(), out]


# -- NumPy reference ---------------------------------------------------------------------------
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
_NP_COMBINE = {"+=": np.add, "max=": np.maximum, "min=": np.minimum}
_NP_REDUCE: dict[str, Callable[..., Any]] = {"+=": np.sum, "max=": np.max, "min=": np.min}


def evaluate(an: Analysis, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """The statement evaluated by NumPy broadcasting over the iteration space.

    The space (output axes, then reduction axes) is split into chunks of at most
    ``CHUNK_ELEMENTS`` points, so memory stays bounded (a 512^3 matmul is 32 chunks).
    """
    arrays = {name: np.asarray(a) for (name, _), a in zip(an.inputs, inputs, strict=True)}
    ranges = [(0, n) for n in an.space]
    with np.errstate(all="ignore"):  # log of a negative etc. gives NaN/inf, as TVM would
        return _evaluate_chunked(an, arrays, ranges)


def _evaluate_chunked(
    an: Analysis, arrays: dict[str, np.ndarray], ranges: list[tuple[int, int]]
) -> np.ndarray:
    sizes = [stop - start for start, stop in ranges]
    total = math.prod(sizes)
    if total <= CHUNK_ELEMENTS:
        return _evaluate_block(an, arrays, ranges)
    axis = next(a for a, n in enumerate(sizes) if n > 1)
    step = max(1, CHUNK_ELEMENTS // (total // sizes[axis]))
    start, stop = ranges[axis]
    parts = [
        _evaluate_chunked(
            an, arrays, [*ranges[:axis], (s, min(s + step, stop)), *ranges[axis + 1 :]]
        )
        for s in range(start, stop, step)
    ]
    if axis < len(an.out_vars):
        return np.concatenate(parts, axis=axis)
    return functools.reduce(_NP_COMBINE[an.statement.op], parts)


def _evaluate_block(
    an: Analysis, arrays: dict[str, np.ndarray], ranges: list[tuple[int, int]]
) -> np.ndarray:
    variables = (*an.out_vars, *an.reduce_vars)
    nd = len(variables)
    grid = {}
    for axis, (v, (start, stop)) in enumerate(zip(variables, ranges, strict=True)):
        shape = [1] * nd
        shape[axis] = stop - start
        grid[v] = np.arange(start, stop).reshape(shape)

    def index(idx: Affine) -> Any:
        return sum((grid[v] * c for v, c in idx.terms), start=idx.const)

    def value(node: Expr) -> Any:
        if isinstance(node, Num):
            return node.value
        if isinstance(node, Access):
            return arrays[node.name][tuple(index(i) for i in node.indices)]
        if isinstance(node, Neg):
            return -value(node.operand)
        if isinstance(node, BinOp):
            return _BINARY[node.op](value(node.lhs), value(node.rhs))
        return _NP_FUNCS[node.fn](*(value(a) for a in node.args))

    full = np.broadcast_to(
        np.asarray(value(an.statement.rhs), dtype=np.float64),
        [stop - start for start, stop in ranges],
    )
    if not an.reduce_vars:
        return np.array(full)
    return np.asarray(_NP_REDUCE[an.statement.op](full, axis=tuple(range(len(an.out_vars), nd))))


# -- the family --------------------------------------------------------------------------------
def _analysis(p: Params) -> Analysis:
    return analyze(p["text"], p["shapes"])


def _validate(p: Params) -> None:
    an = _analysis(p)
    for name, shape in an.inputs:
        check_elements("expr", name, shape)
    check_elements("expr", f"{an.output} (the output)", an.out_shape)
    limit = float(np.finfo(p["dtype"]).max)
    for node in walk(an.statement.rhs):
        if isinstance(node, Num) and abs(node.value) > limit:
            raise WorkloadError(
                f"expr: constant {node.value:g} does not fit in {p['dtype']}",
                position=node.pos,
                text=p["text"],
            )


def _build(p: Params) -> list[Any]:
    try:
        return lower(_analysis(p), p["dtype"])
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
        raise WorkloadError(f"expr: TVM cannot build this expression ({first.strip()})") from exc


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    return evaluate(_analysis(p), inputs)


EXPR = OperatorFamily(
    name="expr",
    description="a custom operator written as one einsum-like statement, e.g. "
    "C[i, j] += A[i, k] * B[k, j]",
    params=(
        ShapeParam("text", "C[i, j] += A[i, k] * B[k, j]", kind="str", help="the statement"),
        ShapeParam(
            "shapes",
            (("A", (256, 256)), ("B", (256, 256))),
            kind="shapes",
            max=MAX_DIM,
            help="tensor name -> shape, for every input (and optionally the output)",
        ),
        dtype_param(),
    ),
    build=_build,
    flops=lambda p: _analysis(p).flops,
    reference=_reference,
    validate=_validate,
)


def parse_expression(
    text: str, shapes: Mapping[str, Sequence[int]], dtype: str = "float32"
) -> Workload:
    """A workload of the ``expr`` family from einsum-like text (see the module docstring).

    Args:
        text: one statement, e.g. ``"C[i, j] += A[i, k] * B[k, j]"``.
        shapes: the shape of every input tensor by name (the output's is optional).
        dtype: element type of every tensor.

    Returns:
        The validated workload; its ``params`` hold ``text`` and ``shapes`` in canonical form.

    Raises:
        WorkloadError: malformed text (``position`` points at the offending character) or text
            that does not fit ``shapes``.

    Example:
        >>> w = parse_expression("C[i, j] += A[i, k] * B[k, j]", {"A": (4, 3), "B": (3, 2)})
        >>> w.output_spec()
        ((4, 2), 'float32')
        >>> w.flops()
        48
    """
    return make_workload(EXPR, {"text": text, "shapes": shapes, "dtype": dtype})
