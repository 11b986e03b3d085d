"""Whole-number boxes: what was typed is read exactly, or refused; never rounded or clamped."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from explorer.types import MAX_INT
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


@given(st.integers(min_value=-(2**80), max_value=2**80))
def test_a_number_the_database_cannot_hold_is_refused(n: int) -> None:
    """A seed of 10^23 once started a search from the Search tab and was stored; the command
    line refused it. Every box now reads at most the databases' largest integer."""
    said = parse_whole("Seed", str(n), 0, "a whole number >= 0")
    if 0 <= n <= MAX_INT:
        assert said == n
    elif n > MAX_INT:
        assert said == f"Seed must be at most {MAX_INT} (got {n})."
    else:
        assert said == f"Seed must be a whole number >= 0 (got {n})."


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
