"""The one grammar of input shapes, shared by the expression builder and ``--shape``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.cli._args import UsageError
from explorer.cli._args import parse_shapes as parse_shape_options
from explorer.errors import WorkloadError
from explorer.workloads import format_shapes, parse_shapes

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True)
DIMS = st.lists(st.integers(1, 10**6), min_size=1, max_size=4).map(tuple)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A: 64x32, B: 32x16", {"A": (64, 32), "B": (32, 16)}),
        ("A=(64, 32); B=[32, 16]", {"A": (64, 32), "B": (32, 16)}),
        ("A: 64, 32, B: 32, 16", {"A": (64, 32), "B": (32, 16)}),
        ("A[4,3]\nB[3,2]", {"A": (4, 3), "B": (3, 2)}),
        ("X: 7", {"X": (7,)}),
    ],
)
def test_parse_shapes(text: str, expected: dict[str, tuple[int, ...]]) -> None:
    assert parse_shapes(text) == expected
    assert parse_shapes(format_shapes(expected)) == expected


@pytest.mark.parametrize(
    ("text", "position"),
    [("", 0), ("3x2", 0), ("A: x3", 3), ("A: 4x3 B 3x2 ?", 13), ("A: 4x3, A: 2", 8)],
)
def test_parse_shapes_errors_point_at_the_problem(text: str, position: int) -> None:
    with pytest.raises(WorkloadError) as info:
        parse_shapes(text)
    assert info.value.position == position and info.value.text == text


# How one entry can be written, in the builder's field and after --shape alike.
STYLES = [
    lambda n, d: f"{n}={'x'.join(map(str, d))}",
    lambda n, d: f"{n}: {'x'.join(map(str, d))}",
    lambda n, d: f"{n} = ({', '.join(map(str, d))})",
    lambda n, d: f"{n}=[{','.join(map(str, d))}]",
    lambda n, d: f"{n}={'X'.join(map(str, d))}",
    lambda n, d: f"{n}: {' * '.join(map(str, d))}",
]


@given(st.dictionaries(NAMES, DIMS, min_size=1, max_size=4), st.sampled_from(range(len(STYLES))))
def test_the_builder_and_the_command_line_read_every_entry_alike(shapes, style) -> None:
    entries = [STYLES[style](name, dims) for name, dims in shapes.items()]
    assert parse_shapes(", ".join(entries)) == shapes  # the builder's field
    assert parse_shape_options(entries) == shapes  # one --shape per entry
    assert parse_shapes(format_shapes(shapes)) == shapes


@given(st.text(max_size=30))
def test_any_text_is_read_or_refused_in_one_sentence(text: str) -> None:
    try:
        shapes = parse_shapes(text)
    except WorkloadError as exc:
        assert exc.position is not None and str(exc).startswith("shapes: ")
    else:
        assert shapes and all(all(d >= 0 for d in dims) for dims in shapes.values())
    try:
        options = parse_shape_options([text])
    except UsageError as exc:
        assert "--shape" in str(exc) and "\n" not in str(exc)
    else:
        assert len(options) == 1 and options == parse_shapes(text)


@pytest.mark.parametrize("entry", ["A=\u0664", "A=4 5", "A=4x", "A", "=4", "A=4, B=5"])
def test_an_entry_that_is_not_one_shape_is_refused(entry: str) -> None:
    with pytest.raises(UsageError, match="--shape expects NAME=DxD"):
        parse_shape_options([entry])
