"""Whole-number boxes: what was typed is read exactly, or refused; never rounded or clamped."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from widgets._whole import WholeText, parse_whole, whole_number


@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(["", " ", "\t"]))
def test_a_whole_number_reads_as_itself(n: int, pad: str) -> None:
    assert whole_number(f"{pad}{n}{pad}") == n
    assert whole_number(f"{n}.0") == n and whole_number(n) == n


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_number_with_a_fraction_is_refused_never_rounded(x: float) -> None:
    text = repr(x)
    read = whole_number(text)
    if math.isfinite(x) and x == int(x) and "e" not in text:
        assert read == int(x)
    else:
        assert read is None
        assert parse_whole("Seed", text, 0, "x") == f"Seed must be a whole number (got {text})."


@given(st.text(max_size=200))
def test_any_text_is_read_or_refused_in_one_sentence(text: str) -> None:
    """One sentence on one line, however long or many-lined the text pasted into the box."""
    said = parse_whole("Max trials", text, 1, "at least 1")
    assert (
        isinstance(said, int)
        and said >= 1
        or (
            isinstance(said, str)
            and said.startswith("Max trials must be ")
            and said.endswith(".")
            and len(said.splitlines()) == 1
            and len(said) <= 100
        )
    )


def test_code_may_set_a_number_and_the_box_shows_it() -> None:
    box = WholeText(value=64, description="Max trials")
    assert box.value == "64"
    box.value = 16  # notebooks written for IntText do this
    assert box.value == "16" and parse_whole("Max trials", box.value, 1, "x") == 16
    box.value = 2.5
    assert parse_whole("Max trials", box.value, 1, "x") == (
        "Max trials must be a whole number (got 2.5)."
    )
