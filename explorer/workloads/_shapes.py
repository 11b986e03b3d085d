"""The one grammar of input shapes: the expression builder's field (``"A: 64x32, B: 32x16"``)
and the command line's ``--shape A=64x32`` (an entry each) read the same text the same way.

A name, an optional ``:`` or ``=``, then dimensions joined by ``x`` (or ``X``), ``\u00d7``,
``*`` or ``,`` (optionally in brackets: ``A=(64, 32)``); entries are separated by ``,`` or
``;``. Dimensions are plain digits 0-9.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from explorer.errors import WorkloadError

_ENTRY = re.compile(
    r"\s*(?P<name>[A-Za-z_]\w*)\s*(?:[:=]\s*)?(?P<open>[\(\[]?)\s*"
    r"(?P<dims>[0-9]+(?:\s*[xX\u00d7,*]\s*[0-9]+)*)\s*(?P<close>[\)\]]?)\s*[,;]?\s*(?=[A-Za-z_]|$)"
)
_NAME_PART = re.compile(r"\s*[A-Za-z_]\w*\s*(?:[:=]\s*)?[\(\[]?\s*")


def parse_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """``"A: 64x32, B: 32x16"`` (also ``A=(64, 32); B=[32, 16]``) as ``{"A": (64, 32), ...}``.

    Raises:
        WorkloadError: with ``position``/``text`` at the first character that does not fit.
    """
    out: dict[str, tuple[int, ...]] = {}
    pos = 0
    while pos < len(text) and text[pos:].strip():
        m = _ENTRY.match(text, pos)
        if m is None or m.end() == pos:
            # Point at the first character that does not fit: after a name, at its dims.
            head = _NAME_PART.match(text, pos)
            start = head.end() if head else pos + len(text[pos:]) - len(text[pos:].lstrip())
            raise WorkloadError(
                "shapes: expected NAME: dims, e.g. 'A: 64x32, B: 32x16'", position=start, text=text
            )
        name = m["name"]
        if name in out:
            raise WorkloadError(
                f"shapes: tensor {name!r} is given twice", position=m.start("name"), text=text
            )
        out[name] = tuple(int(d) for d in re.split(r"\s*[xX\u00d7,*]\s*", m["dims"]))
        pos = m.end()
    if not out:
        raise WorkloadError(
            "shapes: give the shape of every input, e.g. 'A: 64x32, B: 32x16'",
            position=0,
            text=text,
        )
    return out


def format_shapes(shapes: Any) -> str:
    """The inverse of ``parse_shapes`` for a mapping or ``(name, dims)`` pairs."""
    pairs = shapes.items() if isinstance(shapes, Mapping) else shapes
    return ", ".join(f"{name}: {'x'.join(str(d) for d in dims)}" for name, dims in pairs)
