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
from collections.abc import Callable, Mapping, Sequence
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
from explorer.workloads._expr_analysis import (
    _BINARY,
    _NP_FUNCS,
    Analysis,
    analyze,
)
from explorer.workloads._expr_parser import (
    Access,
    Affine,
    BinOp,
    Expr,
    Neg,
    Num,
    walk,
)

te, tirx = _tvm.te, _tvm.tirx

CHUNK_ELEMENTS = 1 << 22  # NumPy reference: largest iteration-space chunk held at once

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
