"""Whole numbers typed into ``Text`` boxes.

ipywidgets' ``IntText`` cannot refuse a decimal: its front end drops a typed ``.`` (``2.5``
reached the kernel as 25), and ``BoundedIntText`` moves a number outside its range to the
nearest bound. Both change what the user typed without a word. So every whole-number box of
the explorer is a ``WholeText`` box, read here and refused in one sentence when it is not a
whole number (or, for the core's own parameters, refused by the core, which names the range).
"""

from __future__ import annotations

import numbers
import re

import ipywidgets as w
import traitlets

_WHOLE = re.compile(r"[+-]?[0-9]+(\.0*)?")


class WholeText(w.Text):  # type: ignore[misc]  # ipywidgets has no type hints
    """A ``Text`` box for a whole number. Code may still set a number (``panel.trials.value =
    16``, as notebooks written for ``IntText`` do): it is shown as its text; reading
    ``value`` gives the text, to be read with ``whole_number`` or ``parse_whole``."""

    value = traitlets.CUnicode(help="the box's text").tag(sync=True)


def whole_number(text: object) -> int | None:
    """``text`` as a whole number, or ``None``: ``6``, `` 6 `` and ``6.0`` are 6; ``2.5``,
    ``1e3``, ``six`` and an empty box are not whole numbers.

    Example:
        >>> whole_number(" -3 "), whole_number("6.0"), whole_number("2.5")
        (-3, 6, None)
    """
    if isinstance(text, bool):
        return None
    if isinstance(text, numbers.Integral):
        return int(text)
    shown = str(text).strip()
    return int(shown.split(".")[0]) if _WHOLE.fullmatch(shown) else None


def parse_whole(field: str, text: object, least: int, at_least: str) -> int | str:
    """``text`` (what a box holds) as a whole number of at least ``least``, or why not: one
    sentence naming ``field``. Never rounded.

    Example:
        >>> parse_whole("Samples", " 6 ", 1, "at least 1 candidate")
        6
        >>> parse_whole("Samples", "2.5", 1, "at least 1 candidate")
        'Samples must be a whole number (got 2.5).'
        >>> parse_whole("Seed", "-1", 0, "a whole number >= 0")
        'Seed must be a whole number >= 0 (got -1).'
    """
    n = whole_number(text)
    if n is None:
        shown = str(text).strip()
        return f"{field} must be a whole number (got {shown or 'an empty box'})."
    if n < least:
        return f"{field} must be {at_least} (got {n})."
    return n
