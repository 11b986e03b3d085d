"""How numbers read in sentences, the same in the CLI, the widgets, the report and a run's
verdicts; and whole numbers read from what a user typed (never rounded)."""

from __future__ import annotations

import math
import numbers
import re

from explorer.errors import ExplorerError
from explorer.types import MAX_INT

_WHOLE = re.compile(r"[+-]?[0-9]+(\.0*)?")

# Errors whose message is written for the user: shown alone, without the exception's type.
USER_ERRORS = (ExplorerError, ValueError, OSError, ImportError)


def format_secs(secs: float | None) -> str:
    """A duration in a unit that keeps 3 significant digits: 812 ns, 3.41 µs, 12.3 ms, 1.52 s."""
    if secs is None or not math.isfinite(secs):
        return "-"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")):
        if abs(secs) >= scale * 0.9995 or unit == "ns":  # 0.9996 ms rounds to 1.00 ms
            value = secs / scale
            digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
            return f"{value:.{digits}f} {unit}"
    raise AssertionError("unreachable")


def plural(n: int, word: str) -> str:
    """``"1 trial"``, ``"3 trials"``, ``"2 processes"``, ``"5 strategies"``."""
    if n == 1:
        return f"{n} {word}"
    if len(word) > 1 and word.endswith("y") and word[-2] not in "aeiou":
        return f"{n} {word[:-1]}ies"
    suffix = "es" if word.endswith(("s", "x", "sh", "ch")) else "s"
    return f"{n} {word}{suffix}"


def share(fraction: float) -> str:
    """A share as a percentage with the digits it needs: ``"100%"``, ``"42%"``, ``"0.04%"``.

    >>> share(1.0), share(0.0004), share(0.053), share(1e-7)
    ('100%', '0.04%', '5.3%', '< 0.01%')
    """
    if fraction >= 0.1 or fraction == 0:
        return f"{fraction:.0%}"
    if fraction < 1e-4:
        return "< 0.01%"
    return f"{fraction * 100:.2g}%"


def error_text(exc: BaseException | None) -> str:
    """What ``exc`` says, on one line and without its final period: its message alone for the
    errors written for users (``USER_ERRORS``), else after its type ("KeyError: 'x'")."""
    if exc is None:
        return "unknown problem"
    text = " ".join(str(exc).split()).rstrip(".") or "no message"
    return text if isinstance(exc, USER_ERRORS) else f"{type(exc).__name__}: {text}"


def last_line(exc: BaseException) -> str:
    """The last non-empty line of what ``exc`` says, or its type's name: TVM's errors put
    their message after a C++ traceback."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else type(exc).__name__


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


def as_typed(text: object, limit: int = 40) -> str:
    r"""What a user typed, as one line of a message: spaces and line breaks collapsed, cut to
    ``limit`` characters.

    Example:
        >>> as_typed("  six\n seven "), as_typed("x" * 50, limit=10)
        ('six seven', 'xxxxxxx...')
    """
    shown = " ".join(str(text).split())
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def parse_whole(
    field: str, text: object, least: int, at_least: str, most: int | None = None, why: str = ""
) -> int | str:
    """``text`` (what a box holds) as a whole number of at least ``least`` and at most
    ``most`` (``why`` says why, after the limit; without it, ``MAX_INT``, the databases'
    largest integer), or why not: one sentence naming ``field``. Never rounded, never clipped.

    Example:
        >>> parse_whole("Samples", " 6 ", 1, "at least 1 candidate")
        6
        >>> parse_whole("Samples", "2.5", 1, "at least 1 candidate")
        'Samples must be a whole number (got 2.5).'
        >>> parse_whole("Seed", "-1", 0, "a whole number >= 0")
        'Seed must be a whole number >= 0 (got -1).'
        >>> parse_whole("Trials", "1000000000", 1, "at least 1", 10**6, ": that takes days")
        'Trials must be at most 1000000: that takes days (got 1000000000).'
        >>> parse_whole("Seed", "99999999999999999999", 0, "a whole number >= 0")
        'Seed must be at most 9223372036854775807 (got 99999999999999999999).'
    """
    n = whole_number(text)
    if n is None:
        shown = as_typed(text)
        return f"{field} must be a whole number (got {shown or 'an empty box'})."
    if n < least:
        return f"{field} must be {at_least} (got {n})."
    limit = MAX_INT if most is None else most
    if n > limit:
        return f"{field} must be at most {limit}{why} (got {n})."
    return n
