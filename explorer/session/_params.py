"""Declared primitive parameters (Exo style): what a UI form needs, and plain-language checks.

A ``ParamSpec`` says what kind of value a primitive argument takes. ``ParamSpec.coerce`` checks
the *shape* of a value (types, ranges, choices) before any TVM call and normalises it to an
immutable, JSON-friendly form; whether a named loop or block exists is checked later, against the
schedule of the step (see ``_names``).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from explorer.errors import PrimitiveError

INT32_MAX = 2**31 - 1
"""Loop extents, factors and indices are int32 in TVM's IR."""

ParamKind = Literal["block", "loop", "loops", "factors", "int", "choice", "bool", "str"]
PARAM_KINDS: tuple[str, ...] = (
    "block",
    "loop",
    "loops",
    "factors",
    "int",
    "choice",
    "bool",
    "str",
)


class _Required:
    """Sentinel default of a parameter that must be given."""

    _instance: _Required | None = None

    def __new__(cls) -> _Required:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REQUIRED"

    def __reduce__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""The ``default`` of a parameter that has none (the UI marks it mandatory)."""


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One argument of a schedule primitive, declared so a UI can build a form field from it.

    Attributes:
        name: The keyword the primitive takes (``"loop"``, ``"factors"``...).
        kind: ``"block"`` / ``"loop"`` (a name picked from ``session.blocks()`` /
            ``session.loops()``), ``"loops"`` (several loop names), ``"factors"`` (a list of
            positive ints with at most one ``None``), ``"int"``, ``"choice"``, ``"bool"``,
            ``"str"``.
        default: The value used when the argument is omitted; ``REQUIRED`` when it must be
            given; ``None`` for an optional loop/block.
        choices: The allowed values of a ``"choice"``.
        min: Smallest allowed ``"int"``, or fewest items of ``"loops"``/``"factors"``.
        max: Largest allowed ``"int"``, or most items of ``"loops"``/``"factors"``.
        help: One line for a tooltip.
    """

    name: str
    kind: ParamKind
    default: Any = REQUIRED
    choices: tuple[Any, ...] = ()
    min: int | None = None
    max: int | None = None
    help: str = ""

    def __post_init__(self) -> None:
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"ParamSpec.kind must be one of {PARAM_KINDS} (got {self.kind!r})")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"ParamSpec {self.name!r}: a choice needs choices")

    @property
    def required(self) -> bool:
        """Whether the argument must be given (it has no default)."""
        return self.default is REQUIRED

    def coerce(self, primitive: str, value: Any) -> Any:
        """Check ``value`` against this spec and return it normalised.

        Lists become tuples, numpy integers become ``int``. ``None`` is accepted (and returned)
        for an optional parameter whose default is ``None``.

        Raises:
            PrimitiveError: naming the argument, the constraint and the value received.
        """
        if value is None and self.default is None:
            return None

        def fail(reason: str) -> PrimitiveError:
            return PrimitiveError(primitive, self.name, reason, value=shown(value))

        if self.kind in ("block", "loop", "str"):
            if not isinstance(value, str) or (self.kind != "str" and not value):
                what = {"block": "a block name", "loop": "a loop name", "str": "a string"}
                raise fail(f"must be {what[self.kind]} (a str)")
            return str(value)
        if self.kind == "loops":
            return self._coerce_loops(fail, value)
        if self.kind == "factors":
            return self._coerce_factors(fail, value)
        if self.kind == "int":
            number = _as_int(value)
            if number is None:
                raise fail("must be an integer")
            if self.min is not None and number < self.min:
                raise fail(f"must be at least {self.min}")
            if self.max is not None and number > self.max:
                raise fail(f"must be at most {self.max}")
            if abs(number) > INT32_MAX:
                raise fail(f"must be between -{INT32_MAX} and {INT32_MAX} (TVM's int32)")
            return number
        if self.kind == "bool":
            if isinstance(value, bool) or type(value).__name__ == "bool_":
                return bool(value)
            raise fail("must be True or False")
        # choice
        if isinstance(value, list) or value not in self.choices:
            raise fail(f"must be one of {', '.join(map(repr, self.choices))}")
        return value

    def _coerce_loops(self, fail: Any, value: Any) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise fail("must be a list of loop names")
        names = tuple(value)
        if not all(isinstance(n, str) and n for n in names):
            raise fail("must be a list of loop names (non-empty str)")
        fewest = self.min if self.min is not None else 1
        if len(names) < fewest:
            raise fail(f"needs at least {fewest} loop(s) (got {len(names)})")
        if self.max is not None and len(names) > self.max:
            raise fail(f"takes at most {self.max} loops (got {len(names)})")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise fail(f"names each loop once; repeated: {', '.join(repeated)}")
        return names

    def _coerce_factors(self, fail: Any, value: Any) -> tuple[int | None, ...]:
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise fail("must be a list of positive integers, at most one of them None")
        factors: list[int | None] = []
        for item in value:
            if item is None:
                factors.append(None)
                continue
            number = _as_int(item)
            if number is None or number < 1:
                raise fail("every factor must be a positive integer or None")
            if number > INT32_MAX:
                raise fail(f"every factor must be at most {INT32_MAX} (TVM's loops are int32)")
            factors.append(number)
        fewest = self.min if self.min is not None else 2
        if len(factors) < fewest:
            raise fail(f"needs at least {fewest} factors (got {len(factors)})")
        if self.max is not None and len(factors) > self.max:
            raise fail(f"takes at most {self.max} factors (got {len(factors)})")
        if factors.count(None) > 1:
            raise fail("at most one factor may be None (it is inferred from the extent)")
        return tuple(factors)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def shown(value: Any) -> Any:
    """A value as the user would have written it (tuples back to lists) for error messages."""
    if isinstance(value, tuple):
        return [shown(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """Normalised argument values (tuples) as JSON values (lists)."""
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value
