"""Checks and formatting for the ``explorer`` command, kept out of ``cli`` so it stays readable.

Everything here runs before any work starts (no TVM, no database): an option that cannot be
honoured is refused up front with one sentence, never discovered after a search or resolved
silently. Misuse raises ``UsageError``; ``cli.main`` turns it into ``error: ...`` and exit 2.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import math
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from explorer.errors import ExplorerError, UnknownPluginError

# The registered strategies, for `tune --help` without importing the search package (and TVM)
# whenever the parser is built; tests/explorer/test_cli_errors.py keeps it equal to STRATEGIES.
STRATEGY_NAMES = (
    "random",
    "autotvm",
    "evolutionary",
    "droplet",
    "evolutionary+droplet",
    "static",
    "value",
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_TERMINATED = 143  # SIGTERM (128 + 15): handled like Ctrl-C, the run is kept, resumable
EXIT_CODES = (
    EXIT_OK,
    EXIT_FAILED,
    EXIT_USAGE,
    EXIT_ENVIRONMENT,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
)


class UsageError(ExplorerError, ValueError):
    """The command line asks for something impossible or contradictory."""


# -- argparse types: a bad value becomes argparse's own one-line error, exit 2 -----------------
def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more (got {value})")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:  # nan compares false to everything: test it
        raise argparse.ArgumentTypeError(f"must be a positive, finite number (got {text})")
    return value


# -- workload arguments ------------------------------------------------------------------------
def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``-p KEY=VALUE`` options as a dict; a key given twice is refused, not overwritten."""
    params: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise UsageError(f"-p/--param expects KEY=VALUE (got {item!r})")
        if key in texts:
            raise UsageError(f"-p {key} is given twice ({key}={texts[key]} and {key}={value})")
        texts[key] = value
        try:  # "512" is a size; anything else is left to the family's own check ("--5" included)
            params[key] = int(value)
        except ValueError:
            params[key] = value
    return params


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME=DxD`` options as a dict; a name given twice is refused."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        name = name.strip()
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            sep = ""
        if not sep or not name:
            raise UsageError(f"--shape expects NAME=DxD, e.g. A=64x32 (got {item!r})")
        if name in shapes:
            first = "x".join(map(str, shapes[name]))
            raise UsageError(f"--shape {name} is given twice ({name}={first} and {item.strip()})")
        shapes[name] = shape
    return shapes


def did_you_mean(exc: UnknownPluginError) -> str:
    """The message of an unknown-name error, with the closest valid names first."""
    close = difflib.get_close_matches(str(exc.name), exc.valid, n=3, cutoff=0.6)
    if not close:
        return str(exc)
    return f"{exc.kind} {exc.name!r} is not known; did you mean {' or '.join(map(repr, close))}?"


def check_tune_options(args: argparse.Namespace) -> None:
    """What `explorer tune` can refuse before building, measuring or storing anything."""
    from explorer.search import STRATEGIES

    if args.strategy not in STRATEGIES:
        raise UnknownPluginError("strategy", args.strategy, STRATEGIES)
    # Each strategy declares whether it takes a start (SearchStrategy.accepts_start).
    if getattr(args, "start", None) and not STRATEGIES[args.strategy].accepts_start:
        able = [n for n, c in STRATEGIES.items() if c.accepts_start]
        raise UsageError(
            f"strategy {args.strategy!r} cannot start from a given schedule (--start); "
            f"these can: {', '.join(able) or 'none'}"
        )
    if getattr(args, "save_trace", None):
        check_writable_file(args.save_trace, "--save-trace")


# -- files -------------------------------------------------------------------------------------
def check_writable_file(path: str, option: str) -> None:
    """Refuse now an output file that could not be written after a long search."""
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{option} {path}: is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable (permission denied)")


# -- errors -> exit codes ----------------------------------------------------------------------
_ENVIRONMENT_ERRNOS = {
    errno.EACCES,
    errno.EPERM,
    errno.ENOSPC,
    errno.EROFS,
    errno.EDQUOT,
    errno.EIO,
    errno.EMFILE,
    errno.ENFILE,
    errno.ENOMEM,
}
_ENVIRONMENT_SQLITE = (
    "locked",  # database is locked / database table is locked
    "readonly",  # attempt to write a readonly database
    "read-only",
    "disk is full",
    "disk i/o error",
    "unable to open database file",
    "out of memory",
    "permission",
)


def is_environment_problem(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) is the machine's fault, not the command line's:
    a locked or read-only database, a full disk, a permission denied."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _ENVIRONMENT_ERRNOS:
            return True
        if isinstance(current, sqlite3.OperationalError) and any(
            word in str(current).lower() for word in _ENVIRONMENT_SQLITE
        ):
            return True
        current = current.__cause__ or current.__context__
    return False


def describe(exc: BaseException) -> str:
    """One line for the user: no errno numbers, no Python type names when there is a message."""
    if isinstance(exc, UnknownPluginError):
        return did_you_mean(exc)
    if isinstance(exc, OSError) and exc.strerror:
        name = exc.filename if exc.filename is not None else ""
        return f"{name}: {exc.strerror}" if name else exc.strerror
    text = str(exc).strip()
    return text or type(exc).__name__


# -- output ------------------------------------------------------------------------------------
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
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
