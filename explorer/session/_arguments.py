"""A primitive's arguments from what a user typed into its form: text fields parsed, never
evaluated (the schedule editor's form; the session then checks them against the loop nest)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from explorer.errors import PrimitiveError
from explorer.session._params import ParamSpec
from explorer.session._primitives import PRIMITIVES
from explorer.text import whole_number

_NONE_TOKENS = {"none", "-1", "?", "_", "*"}  # what users write for "infer this factor"


def parse_arguments(primitive: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """``apply`` keyword arguments of ``primitive`` from its form's ``values`` by parameter
    name: factor and loop lists and whole numbers parsed from their text, an unpicked optional
    loop or block left out.

    Raises:
        PrimitiveError: a value does not parse, or a required loop or block is not picked;
            names the parameter.
    """
    prim = PRIMITIVES[primitive]
    args: dict[str, Any] = {}
    for spec in prim.params:
        value = values.get(spec.name)
        if spec.kind == "factors":
            value = parse_factors(prim.name, spec, value)
        elif spec.kind == "loops":
            value = parse_loops(prim.name, spec, value)
        elif spec.kind == "int":
            value = parse_int(prim.name, spec, value)
        elif spec.kind in ("loop", "block") and value is None:
            if spec.required:
                what = "loop" if spec.kind == "loop" else "block"
                raise PrimitiveError(prim.name, spec.name, f"pick a {what}")
            continue
        args[spec.name] = value
    return args


def _tokens(text: str) -> list[str]:
    inner = text.strip().strip("[]()").strip()
    return [t.strip().strip("'\"") for t in re.split(r"[,\s]+", inner) if t.strip()]


def parse_factors(primitive: str, spec: ParamSpec, text: Any) -> list[int | None]:
    """``"None, 16"`` / ``"-1, 16"`` / ``"[4, 16]"`` as a factor list (``None`` = inferred).

    Raises:
        PrimitiveError: naming the parameter and the token that is not a factor.
    """
    if not isinstance(text, str):
        return list(text)
    tokens = _tokens(text)
    if not tokens:
        raise PrimitiveError(
            primitive, spec.name, "is required: write trip counts, outer first, e.g. None, 16"
        )
    factors: list[int | None] = []
    for token in tokens:
        if token.lower() in _NONE_TOKENS:
            factors.append(None)
        elif token.isdigit() and int(token) > 0:
            factors.append(int(token))
        else:
            raise PrimitiveError(
                primitive,
                spec.name,
                f"{token!r} is not a positive integer or None (write e.g. None, 16)",
                value=text,
            )
    return factors


def parse_int(primitive: str, spec: ParamSpec, text: Any) -> int:
    """A whole-number field's text as an int (its range is the session's to check).

    Raises:
        PrimitiveError: the text is not a whole number (``2.5`` is refused, never rounded).
    """
    number = whole_number(text)
    if number is None:
        raise PrimitiveError(primitive, spec.name, "must be a whole number", value=text)
    return number


def parse_loops(primitive: str, spec: ParamSpec, text: Any) -> list[str]:
    """``"i_0, j"`` as a list of loop names (checked against the nest by the session)."""
    if not isinstance(text, str):
        return list(text)
    names = _tokens(text)
    if not names:
        raise PrimitiveError(
            primitive, spec.name, "is required: write loop names, outer first, e.g. i_0, j"
        )
    return names
