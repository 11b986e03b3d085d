"""Custom expressions: parsing, checking, lowering to TE (run with real TVM) and the NumPy
reference, error positions, and a fuzz test that only ``WorkloadError`` ever escapes."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from explorer import _tvm
from explorer.errors import WorkloadError
from explorer.workloads import Workload, get_workload, parse_expression
from explorer.workloads import _expr as expr_mod
from explorer.workloads._expr_parser import (
    MAX_DEPTH,
    Access,
    Affine,
    BinOp,
    Call,
    Neg,
    Num,
    parse,
    tokenize,
)


def run_tvm(w: Workload, target, inputs) -> np.ndarray:
    ex = _tvm.compile_mod(w.mod(), target.to_tvm())
    dev = _tvm.tvm.cpu()
    out = _tvm.tvm.runtime.empty(*w.output_spec(), dev)
    ex["main"](*[_tvm.tvm.runtime.tensor(a, dev) for a in inputs], out)
    return out.numpy()


# -- parsing -----------------------------------------------------------------------------------
def test_tokenize() -> None:
    toks = tokenize("Y[i] max= X[i, 2*j] + 1.5e-3")
    assert [t.text for t in toks] == [
        "Y", "[", "i", "]", "max", "=", "X", "[", "i", ",", "2", "*", "j", "]", "+", "1.5e-3", "",
    ]  # fmt: skip
    assert [t.pos for t in toks][:6] == [0, 1, 2, 3, 5, 8]
    assert toks[-1].kind == "end"


def test_parse_matmul_ast() -> None:
    stmt = parse("C[i, j] += A[i, k] * B[k, j]")
    assert stmt.op == "+=" and stmt.op_pos == 8
    assert stmt.output.name == "C"
    assert [i.terms for i in stmt.output.indices] == [(("i", 1),), (("j", 1),)]
    rhs = stmt.rhs
    assert isinstance(rhs, BinOp) and rhs.op == "*" and rhs.pos == 19
    assert isinstance(rhs.lhs, Access) and rhs.lhs.name == "A" and rhs.lhs.pos == 11
    assert isinstance(rhs.rhs, Access) and rhs.rhs.name == "B"
    assert [i.variables for i in rhs.rhs.indices] == [("k",), ("j",)]


def test_parse_precedence_and_functions() -> None:
    rhs = parse("Z[i, j] = exp(X[i, j] - 1.5) / (1 + abs(Y[j]))").rhs
    assert isinstance(rhs, BinOp) and rhs.op == "/"
    assert isinstance(rhs.lhs, Call) and rhs.lhs.fn == "exp"
    inner = rhs.lhs.args[0]
    assert isinstance(inner, BinOp) and inner.op == "-" and inner.rhs == Num(1.5, 24)
    assert isinstance(rhs.rhs, BinOp) and rhs.rhs.op == "+"
    assert isinstance(rhs.rhs.rhs, Call) and rhs.rhs.rhs.fn == "abs"
    # * binds tighter than +, and - is left associative.
    rhs = parse("C[i] = A[i] - A[i] - A[i] * 2").rhs
    assert rhs.op == "-" and rhs.lhs.op == "-" and rhs.rhs.op == "*"
    # Unary minus folds into constants and stays a node otherwise.
    assert parse("C[i] = -2").rhs == Num(-2.0, 7)
    assert isinstance(parse("C[i] = -A[i]").rhs, Neg)
    assert parse("Y[i] max= X[i, j]").op == "max="
    assert parse("Y[i] min = X[i, j]").op == "min="


@pytest.mark.parametrize(
    ("index", "terms", "const"),
    [
        ("y + ry", (("y", 1), ("ry", 1)), 0),
        ("2*y - r + 1", (("y", 2), ("r", -1)), 1),
        ("y * 3", (("y", 3),), 0),
        ("-(i - 4)", (("i", -1),), 4),
        ("(i + 1) * 2 + i", (("i", 3),), 2),
        ("i - i + 5", (), 5),
        ("7", (), 7),
    ],
)
def test_affine_indices(index: str, terms, const: int) -> None:
    idx = parse(f"C[a] = A[{index}]").rhs.indices[0]
    assert isinstance(idx, Affine)
    assert (idx.terms, idx.const) == (terms, const)
    assert idx.pos == 9 and idx.end == 9 + len(index)


def test_ast_is_frozen_and_hashable() -> None:
    stmt = parse("C[i] = A[i]")
    with pytest.raises(dataclasses.FrozenInstanceError):
        stmt.op = "+="  # type: ignore[misc]
    assert hash(stmt) == hash(parse("C[i] = A[i]"))


# -- the examples, against TVM and against independent NumPy ----------------------------------
EXAMPLES = [
    (
        "C[i, j] += A[i, k] * B[k, j]",
        {"A": (13, 7), "B": (7, 5)},
        lambda A, B: A @ B,
        2 * 13 * 5 * 7,
    ),
    (
        "Y[n, c, h, w] = max(X[n, c, h, w], 0)",
        {"X": (2, 3, 4, 5)},
        lambda X: np.maximum(X, 0),
        120,
    ),
    ("Y[i] max= X[i, j]", {"X": (6, 9)}, lambda X: X.max(axis=1), 54),
    ("Y[j] min= X[i, j]", {"X": (6, 9)}, lambda X: X.min(axis=0), 54),
    (
        "O[n, f, y, x] += I[n, c, y + ry, x + rx] * W[f, c, ry, rx]",
        {"I": (2, 3, 8, 9), "W": (4, 3, 3, 2)},
        lambda X, W: np.einsum(
            "ncyxrs,fcrs->nfyx",
            np.lib.stride_tricks.sliding_window_view(X, (3, 2), axis=(2, 3)),
            W,
        ),
        2 * (2 * 4 * 6 * 8) * (3 * 3 * 2),
    ),
    (
        "Z[i, j] = exp(X[i, j] - 1.5) / (1 + abs(Y[j]))",
        {"X": (3, 4), "Y": (4,)},
        lambda X, Y: np.exp(X - 1.5) / (1 + np.abs(Y)),
        5 * 12,
    ),
    (
        "Z[i] = -sigmoid(X[i]) * tanh(X[i]) + sqrt(X[i]) - log(X[i]) + relu(X[i] - 1)"
        " + min(X[i], 1)",
        {"X": (11,)},
        lambda X: (
            -1 / (1 + np.exp(-X)) * np.tanh(X)
            + np.sqrt(X)
            - np.log(X)
            + np.maximum(X - 1, 0)
            + np.minimum(X, 1)
        ),
        13 * 11,
    ),
    ("O[y] += I[2*y + r] * W[r]", {"I": (11,), "W": (3,)}, None, 2 * 5 * 3),
    ("C[i, j] = A[i]", {"A": (3,), "C": (3, 4)}, lambda A: np.repeat(A[:, None], 4, 1), 0),
    ("S[] += A[i, j]", {"A": (3, 4)}, lambda A: np.array(A.sum()), 12),
    ("T[j, i] = A[i, j]", {"A": (3, 5)}, lambda A: A.T, 0),
    ("D[i] = A[i, i] + A[i, 0]", {"A": (4, 4)}, lambda A: np.diag(A) + A[:, 0], 4),
    ("R[i] = A[3 - i]", {"A": (4,)}, lambda A: A[::-1], 0),
]


# ids by text: str() of a lambda names its address, which differs between processes (pytest-xdist
# refuses workers that collected different tests)
@pytest.mark.parametrize(
    ("text", "shapes", "numpy_fn", "flops"), EXAMPLES, ids=[text for text, *_ in EXAMPLES]
)
def test_examples_lower_and_match(text, shapes, numpy_fn, flops, cpu_target) -> None:
    w = parse_expression(text, shapes)
    inputs = w.random_inputs()
    expected = w.reference(inputs)
    if numpy_fn is not None:
        independent = numpy_fn(*[a.astype(np.float64) for a in inputs])
        np.testing.assert_allclose(expected, independent.astype(np.float32), rtol=1e-6)
    got = run_tvm(w, cpu_target, inputs)
    assert w.check_output(got, expected) is None
    assert w.flops() == flops


def test_strided_window_extent() -> None:
    # (H - R) // s + 1, as a convolution without padding.
    w = parse_expression("O[y] += I[2*y + r] * W[r]", {"I": (11,), "W": (3,)})
    assert w.output_spec()[0] == (5,)
    w = parse_expression("O[y] += I[3*y + r] * W[r]", {"I": (12,), "W": (4,)})
    assert w.output_spec()[0] == (3,)


def test_expression_conv_equals_conv2d_family(cpu_target) -> None:
    text = "O[n, f, y, x] += I[n, c, y + ry, x + rx] * W[f, c, ry, rx]"
    w = parse_expression(text, {"I": (1, 3, 7, 6), "W": (2, 3, 3, 3)})
    conv = get_workload("conv2d", N=1, CI=3, H=7, W=6, CO=2, KH=3, KW=3, padding=0)
    assert w.output_spec() == conv.output_spec()
    assert w.flops() == conv.flops()
    inputs = conv.random_inputs()
    np.testing.assert_allclose(w.reference(inputs), conv.reference(inputs), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_other_dtypes(dtype: str, cpu_target) -> None:
    w = parse_expression(
        "Z[i, j] += exp(X[i, k] - 1.5) * Y[k, j]", {"X": (5, 6), "Y": (6, 3)}, dtype=dtype
    )
    assert w.output_spec() == ((5, 3), dtype)
    inputs = w.random_inputs()
    assert w.check_output(run_tvm(w, cpu_target, inputs), w.reference(inputs)) is None


def test_names_in_the_lowered_module() -> None:
    w = parse_expression(
        "Out[row, col] += Lhs[row, k] * Rhs[k, col]", {"Lhs": (4, 3), "Rhs": (3, 2)}
    )
    assert [t.name for t in w.tensors()] == ["Lhs", "Rhs", "Out"]
    sch = _tvm.Schedule(w.mod())
    block = sch.get_sblock("Out")
    assert [sch.get(loop).loop_var.name for loop in sch.get_loops(block)] == ["row", "col", "k"]


@pytest.mark.parametrize("example", EXAMPLES[:6], ids=lambda e: e[0])
def test_tvmscript_round_trip(example) -> None:
    # Other packages print and re-parse modules; every name must survive TVMScript.
    w = parse_expression(example[0], example[1])
    again = _tvm.tvm.script.from_source(w.mod().script())
    assert _tvm.tvm_ffi.structural_equal(again, w.mod())


def test_constant_statement() -> None:
    w = parse_expression("C[i, j] = 1.5", {"C": (2, 3)})
    assert w.input_specs() == [] and w.flops() == 0
    np.testing.assert_array_equal(w.reference([]), np.full((2, 3), 1.5, np.float32))


def test_inputs_in_order_of_first_use() -> None:
    w = parse_expression("C[i] = B[i] * A[i] + B[i]", {"A": (3,), "B": (3,)})
    assert [t.name for t in w.tensors()] == ["B", "A", "C"]


def test_matmul_512_reference_is_chunked() -> None:
    # 512^3 points: evaluated in chunks, so memory stays small and the result is exact.
    w = parse_expression("C[i, j] += A[i, k] * B[k, j]", {"A": (512, 512), "B": (512, 512)})
    a, b = w.random_inputs()
    np.testing.assert_allclose(
        w.reference([a, b]), (a.astype(np.float64) @ b).astype(np.float32), rtol=1e-6
    )


@pytest.mark.parametrize(
    ("text", "shapes"),
    [
        ("C[i, j] += A[i, k] * B[k, j]", {"A": (9, 7), "B": (7, 5)}),
        ("Y[i] max= X[i, j]", {"X": (6, 9)}),
        ("Y[j] min= X[i, j] * 2", {"X": (6, 9)}),
        ("S[] += A[i, j]", {"A": (5, 4)}),
        ("C[i, j] = A[i] + B[j]", {"A": (7,), "B": (5,)}),
        (
            "O[n, f, y, x] += I[n, c, y + ry, x + rx] * W[f, c, ry, rx]",
            {"I": (2, 3, 6, 5), "W": (4, 3, 2, 2)},
        ),
    ],
)
def test_chunking_gives_the_same_result(text, shapes, monkeypatch) -> None:
    w = parse_expression(text, shapes)
    inputs = w.random_inputs()
    whole = w.reference(inputs)
    monkeypatch.setattr(expr_mod, "CHUNK_ELEMENTS", 7)  # force chunks along every kind of axis
    np.testing.assert_allclose(w.reference(inputs), whole, rtol=1e-6)


# -- identity ----------------------------------------------------------------------------------
def test_params_are_canonical_and_round_trip() -> None:
    text = "C[i, j] += A[i, k] * B[k, j]"
    w = parse_expression(text, {"B": [3, 2], "A": (4, 3)})
    assert w.family == "expr"
    assert w.param_dict["shapes"] == (("A", (4, 3)), ("B", (3, 2)))
    assert w.param_dict["text"] == text
    hash(w)
    assert Workload.from_json(w.to_json()) == w
    assert Workload.from_json(json.loads(json.dumps(w.to_json()))) == w
    assert get_workload("expr", text=text, shapes={"A": (4, 3), "B": (3, 2)}) == w
    assert get_workload("expr", text=text, shapes=[["B", [3, 2]], ["A", [4, 3]]]) == w
    assert w.key().startswith("expr(")
    assert parse_expression(text, {"A": (4, 3), "B": (3, 2)}, dtype="float64") != w


def test_default_expr_is_matmul() -> None:
    w = get_workload("expr")
    assert w.flops() == get_workload("matmul").flops()


# -- errors: malformed text --------------------------------------------------------------------
SHAPES = {"A": (4, 4), "B": (4, 4)}
SYNTAX = [
    # (text, offending substring (its last occurrence) or None for the end, message fragment)
    ("C[i, j] += A[i, k] * ", None, "end of expression"),
    ("C[i,j] = A[i,,k]", ",k", "expected an index"),
    ("C[i, j] = foo(A[i, j])", "foo", "unknown function 'foo'"),
    ("C[i] = A[i] $ 2", "$", "unexpected character '$'"),
    ("C[i] = A[i", None, "expected ']'"),
    ("C[i] = (A[i, 0] + 1", None, "expected ')'"),
    ("C[i] == A[i, 0]", "= A", "expected a number"),
    ("C[i] -= A[i, 0]", "-=", "expected '=', '+=', 'max=' or 'min='"),
    ("C = A[i, 0]", "= A", "expected '['"),
    ("= A[i, 0]", "=", "expected the output tensor"),
    ("C[i] = A[i, 0] A[i, 0]", "A[i, 0]", "unexpected 'A'"),
    ("C[i] = A[i, 0] * i", "i", "index variables may only appear inside"),
    ("C[i] = A[i * i, 0]", "* i", "affine"),
    ("C[i] = A[1.5, 0]", "1.5", "integers"),
    ("C[i] = A[B[i, 0], 0]", "B[", "cannot be indexed"),
    ("C[i] = max(A[i, 0])", "max", "takes 2 arguments (got 1)"),
    ("C[i] = exp(A[i, 0], 1)", "exp", "takes 1 argument (got 2)"),
    ("C[i] = A[i, 0] + 1e999", "1e999", "too large"),
    ("C[i] = A[i, 99999999]", "99999999", "too large"),
    ("C[i] = A[i, 0] / ", None, "end of expression"),
    ("C[i] max A[i, j]", "max", "expected '='"),
    ("   ", None, "empty"),
    ("C[lambda] = A[lambda, 0]", "lambda] =", "Python keyword"),
    ("C[i] = A[\u0663, 0]", "\u0663", "unexpected character"),
]


@pytest.mark.parametrize(("text", "at", "fragment"), SYNTAX, ids=[t for t, _, _ in SYNTAX])
def test_syntax_error_positions(text: str, at: str | None, fragment: str) -> None:
    with pytest.raises(WorkloadError) as info:
        parse_expression(text, SHAPES)
    err = info.value
    expected_pos = len(text) if at is None else text.rindex(at)
    if text.strip() == "":
        expected_pos = 0
    assert err.position == expected_pos, str(err)
    assert err.text == text
    assert fragment in str(err)
    # The rendered message puts a caret under the offending character.
    lines = str(err).splitlines()
    assert lines[-1] == "  " + " " * expected_pos + "^"


def test_nesting_limit() -> None:
    text = "C[i] = " + "(" * (MAX_DEPTH + 5) + "A[i, 0]" + ")" * (MAX_DEPTH + 5)
    with pytest.raises(WorkloadError, match="nested") as info:
        parse_expression(text, SHAPES)
    assert 7 < info.value.position < 7 + MAX_DEPTH + 5
    ok = "C[i] = " + "(" * 20 + "A[i, 0]" + ")" * 20
    parse_expression(ok, {"A": (4, 4)})


def test_long_chains_are_refused_not_crashed() -> None:
    with pytest.raises(WorkloadError, match="operators"):
        parse_expression("C[i] = A[i, 0]" + " + 1" * 400, SHAPES)
    with pytest.raises(WorkloadError, match="characters long"):
        parse_expression("C[i] = A[i, 0]" + " " * 5000, SHAPES)


# -- errors: text that does not fit the shapes --------------------------------------------------
SEMANTIC = [
    ("C[i] = Q[i]", {"A": (3,)}, "Q", ["no shape given for tensor 'Q'", "A"]),
    ("C[i] = A[i]", {"A": (3, 4)}, "A", ["'A' has 2 dimensions", "(3, 4)", "indexed with 1"]),
    ("C[i] = C[i] + A[i]", {"A": (3,)}, "C[i] +", ["output 'C' cannot also be read"]),
    ("C[i] = A[i] + B[i]", {"A": (3,), "B": (4,)}, "i]", ["'i' has extent 3", "4"]),
    ("C[i, j] = A[i]", {"A": (3,)}, "j]", ["cannot infer the extent", "'j'"]),
    ("C[i] = A[i, k]", {"A": (3, 4)}, "k]", ["'k' appears only on the right", "+="]),
    ("C[i] += A[i]", {"A": (3,)}, "+=", ["reduces over index variables", "use '='"]),
    ("C[i] = A[i] + A[i + 1]", {"A": (4,)}, "i + 1", ["ranges over [1, 4]", "extent 4"]),
    ("C[i] = A[i - 1]", {"A": (4,), "C": (4,)}, "i - 1", ["ranges over [-1, 2]"]),
    ("C[i, i] = A[i]", {"A": (3,)}, "i] =", ["'i' appears twice in the output"]),
    ("C[i + 1] = A[i]", {"A": (3,)}, "i + 1", ["output indices must be plain"]),
    ("C[A] = A[A]", {"A": (3,)}, "A] =", ["'A' is used both as a tensor and as an index"]),
    ("root[i] = A[i]", {"A": (3,)}, "root", ["'root' is reserved"]),
    ("C[i] = A[i]", {"A": (3,), "C": (3, 3)}, "C", ["has shape (3, 3) in shapes"]),
    ("C[i] = A[i]", {"A": (3,), "C": (4,)}, "i]", ["'i' has extent 4 from C", "3 from A"]),
    ("O[y] += I[y + r] * W[r]", {"I": (2,), "W": (3,)}, "y + r", ["no extent of index"]),
]


@pytest.mark.parametrize(
    ("text", "shapes", "at", "fragments"), SEMANTIC, ids=[f"{t} {s}" for t, s, _, _ in SEMANTIC]
)
def test_semantic_errors_point_at_the_culprit(text, shapes, at, fragments) -> None:
    with pytest.raises(WorkloadError) as info:
        parse_expression(text, shapes)
    err = info.value
    assert err.position == text.rindex(at), str(err)
    for fragment in fragments:
        assert fragment in str(err), str(err)


@pytest.mark.parametrize(
    ("text", "shapes", "fragment"),
    [
        ("C[i] = A[i]", {"A": (3,), "Q": (2,)}, "shapes gives 'Q', which the expression does not"),
        ("C[i] = A[i]", {"A": (0,)}, "every dimension of 'A' must be in"),
        ("C[i] = A[i]", {"A": (-3,)}, "every dimension of 'A'"),
        ("C[i] = A[i]", {"A": (2.5,)}, "tuple of ints"),
        ("C[i] = A[i]", {"A": "3"}, "tuple of ints"),
        ("C[i] = A[i]", {"A": (1 << 29,)}, "every dimension of 'A'"),
        ("C[i, j, k] = A[i, j, k]", {"A": (1 << 14, 1 << 14, 4)}, "tensor A of shape"),
        ("C[i] = A[i]", [1, 2], "must map tensor names to shapes"),
        ("C[i] = A[i]", {3: (2,)}, "non-empty strings"),
    ],
)
def test_bad_shapes(text: str, shapes, fragment: str) -> None:
    with pytest.raises(WorkloadError) as info:
        parse_expression(text, shapes)
    assert (
        "'shapes'" in str(info.value)
        or "tensor A" in str(info.value)
        or "shapes gives" in str(info.value)
    )
    assert fragment in str(info.value), str(info.value)


def test_bad_dtype_and_params() -> None:
    with pytest.raises(WorkloadError, match="'dtype'"):
        parse_expression("C[i] = A[i]", {"A": (3,)}, dtype="int32")
    with pytest.raises(WorkloadError, match="'text' must be a string"):
        get_workload("expr", text=42, shapes={"A": (3,)})
    with pytest.raises(WorkloadError, match="does not fit in float16"):
        parse_expression("C[i] = A[i] * 100000", {"A": (3,)}, dtype="float16")
    with pytest.raises(WorkloadError, match="unknown parameter"):
        get_workload("expr", text="C[i] = A[i]", shapes={"A": (3,)}, axis=1)


def test_too_many_flops() -> None:
    shapes = {"A": (1 << 14, 1 << 14), "B": (1 << 14, 1 << 14)}
    with pytest.raises(WorkloadError, match="FLOPs"):
        parse_expression("C[i, j] += exp(A[i, k]) * exp(B[k, j]) * 2", shapes)


# -- fuzzing -----------------------------------------------------------------------------------
FUZZ_SHAPES = {"A": (3, 4), "B": (4, 2)}
TOKENS = [
    "C", "A", "B", "[", "]", "(", ")", ",", "i", "j", "k", "+", "-", "*", "/", "=", "+=",
    "max", "min", "exp", "relu", "1", "2", "0.5", " ", "i + 1", "A[i, k]", "B[k, j]", "C[i, j]",
]  # fmt: skip
HEADS = ["C[i, j] = ", "C[i, j] += ", "C[i] max= ", "C[j] min= ", "C[k] += ", "C[i, k] = "]
TERMS = [
    "A[i, k]", "B[k, j]", "exp(A[i, k])", "1.5", "relu(B[k, j])", "-A[i, k]", "A[i, 3 - k]",
    "max(A[i, k], B[k, j])", "sqrt(B[k, j])", "A[i + 1, k]", "(A[i, k] + 2)", "B[k, j] * 0.5",
    "tanh(A[i, 2*k])", "A[0, k]", "sigmoid(-B[k, 1])",
]  # fmt: skip


def check_only_workload_errors(text: str) -> Workload | None:
    try:
        w = parse_expression(text, FUZZ_SHAPES)
    except WorkloadError as err:
        if err.position is not None:
            assert 0 <= err.position <= len(text)
        return None
    # Whatever parses must also lower and evaluate.
    assert w.mod() is not None
    assert w.reference(w.random_inputs()).shape == w.output_spec()[0]
    return w


@pytest.mark.timeout(120)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60))
def test_garbage_text_only_raises_workload_error(text: str) -> None:
    check_only_workload_errors(text)


@pytest.mark.timeout(120)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["", *HEADS]), st.lists(st.sampled_from(TOKENS), max_size=20))
def test_token_soup_only_raises_workload_error(head: str, tokens: list[str]) -> None:
    check_only_workload_errors(head + "".join(tokens))


terms_and_ops = st.lists(
    st.tuples(st.sampled_from(["+", "-", "*", "/"]), st.sampled_from(TERMS)), max_size=3
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(HEADS), st.sampled_from(TERMS), terms_and_ops)
def test_well_formed_statements(head: str, first: str, rest: list[tuple[str, str]]) -> None:
    check_only_workload_errors(head + first + "".join(f" {op} {t}" for op, t in rest))


SAFE_TERMS = [t for t in TERMS if t not in ("A[i + 1, k]", "tanh(A[i, 2*k])")]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["C[i, j] += ", "C[i] max= ", "C[j] min= ", "C[i, j] max= "]),
    st.sampled_from(SAFE_TERMS),
    st.lists(st.tuples(st.sampled_from(["+", "-", "*"]), st.sampled_from(SAFE_TERMS)), max_size=3),
)
@example(  # terms that cancel exactly where max(A, B) is A (found by a CI run, 2026-12-05)
    head="C[j] min= ",
    first="A[i, k]",
    rest=[("*", "max(A[i, k], B[k, j])"), ("-", "A[i, k]"), ("*", "A[i, k]")],
)
def test_random_statements_compile_and_match(cpu_target, head, first, rest) -> None:
    # No division here: a random denominator near zero would only test float32 rounding.
    w = check_only_workload_errors(head + first + "".join(f" {op} {t}" for op, t in rest))
    assume(w is not None)  # e.g. "C[i, j] += A[i, k]" leaves j without an extent
    inputs = w.random_inputs()
    got, expected = run_tvm(w, cpu_target, inputs), w.reference(inputs)
    # LLVM may contract ``a * b - c * d`` into a fused multiply-add: where the terms cancel,
    # NumPy's exact 0 reads -5e-8 from the kernel, a rounding of the terms (of order 1 with
    # these inputs), which a tolerance scaled by the result (0) would call a mismatch.
    assert np.allclose(got, expected, rtol=1e-5, atol=1e-5), w.check_output(got, expected)
