"""How numbers read in sentences, the same in the CLI, the widgets, the report and a run's
verdicts."""

from __future__ import annotations

import math

from explorer.errors import ExplorerError

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
    """``"1 trial"``, ``"3 trials"``, ``"2 processes"``."""
    suffix = "es" if word.endswith(("s", "x", "sh", "ch")) else "s"
    return f"{n} {word}" if n == 1 else f"{n} {word}{suffix}"


def error_text(exc: BaseException | None) -> str:
    """What ``exc`` says, on one line and without its final period: its message alone for the
    errors written for users (``USER_ERRORS``), else after its type ("KeyError: 'x'")."""
    if exc is None:
        return "unknown problem"
    text = " ".join(str(exc).split()).rstrip(".") or "no message"
    return text if isinstance(exc, USER_ERRORS) else f"{type(exc).__name__}: {text}"
