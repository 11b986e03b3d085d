"""Whole numbers typed into ``Text`` boxes.

ipywidgets' ``IntText`` cannot refuse a decimal: its front end drops a typed ``.`` (``2.5``
reached the kernel as 25), and ``BoundedIntText`` moves a number outside its range to the
nearest bound. Both change what the user typed without a word. So every whole-number box of
the explorer is a ``WholeText`` box, read here and refused in one sentence when it is not a
whole number (or, for the core's own parameters, refused by the core, which names the range).
"""

from __future__ import annotations

import ipywidgets as w
import traitlets

from explorer.text import parse_whole, whole_number


class WholeText(w.Text):  # type: ignore[misc]  # ipywidgets has no type hints
    """A ``Text`` box for a whole number. Code may still set a number (``panel.trials.value =
    16``, as notebooks written for ``IntText`` do): it is shown as its text; reading
    ``value`` gives the text, to be read with ``whole_number`` or ``parse_whole``
    (``explorer.text``)."""

    value = traitlets.CUnicode(help="the box's text").tag(sync=True)


__all__ = ["WholeText", "parse_whole", "whole_number"]
