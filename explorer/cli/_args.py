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
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from explorer._urls import redact
from explorer.errors import ExplorerError, UnknownPluginError, WorkloadError
from explorer.types import MAX_INT, MAX_SECS, MAX_TRIALS, TOO_LONG, TOO_MANY_TRIALS

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


# -- the parser: every mistake is one `error:` line, no option is silently overwritten --------
class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors are one ``error: ...`` line (no usage block),
    exit 2, and which refuses a single-value option given twice (``--trials 2 --trials 3``)
    instead of keeping the last. Subparsers are made of this class too (``add_subparsers``
    uses the parent's class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)
        self._given: dict[str, Any] = {}

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._given = {}  # what this parse has stored so far, by option
        return super().parse_known_args(args, namespace)

    def add_subparsers(self, **kwargs: Any) -> Any:
        kwargs.setdefault("parser_class", _CommandParser)
        return super().add_subparsers(**kwargs)

    def error(self, message: str) -> NoReturn:
        message = re.sub(r"^argument COMMAND: invalid choice: ", "unknown command ", message)
        # "argument --trials: must be ..." -> "--trials: must be ..."
        message = re.sub(r"^argument ([^:]+): ", r"\1: ", message)
        self.exit(EXIT_USAGE, f"error: {message}; see `{self.prog} --help`\n")


class _CommandParser(Parser):
    """A subcommand's parser: it refuses the arguments it does not know itself, so that the
    error names the subcommand (``explorer runs --help``), not only ``explorer``."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


class _StoreOnce(argparse._StoreAction):  # the default action ("store"), once per option
    def __call__(
        self, parser: Any, namespace: Any, values: Any, option_string: Any = None
    ) -> None:
        if option_string is not None and isinstance(parser, Parser):
            name = max(self.option_strings, key=len)  # "--param", not "-p"
            if self.dest in parser._given:
                first = shown(parser._given[self.dest])
                parser.error(f"{name} is given twice ({first} and {shown(values)})")
            parser._given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


# -- argparse types: a bad value becomes one `error:` line naming the option, exit 2 -----------
_PLAIN_INT = re.compile(r"-?[0-9]+")  # int() also takes " 3", "1_000" and "٣": not here
_PLAIN_NUMBER = re.compile(
    r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?(nan|inf)", re.I
)
MAX_REPEAT = 100
"""``measure --repeat`` at most: each repeat lasts at least ``min_repeat_secs`` (20 ms), so more
would run into the measurer's kernel timeout and store a junk run."""


def _int(text: str, *, minimum: int, maximum: int = MAX_INT, why: str = "") -> int:
    if not _PLAIN_INT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected an integer (digits 0-9), got {text!r}")
    value = int(text)
    if value < minimum:
        at_least = "be 0 or more" if minimum == 0 else f"be at least {minimum}"
        raise argparse.ArgumentTypeError(f"must {at_least} (got {value})")
    if value > maximum:
        raise argparse.ArgumentTypeError(f"must be at most {maximum} (got {value}){why}")
    return value


def positive_int(text: str) -> int:
    return _int(text, minimum=1)


def non_negative_int(text: str) -> int:
    return _int(text, minimum=0)


def repeat_count(text: str) -> int:
    return _int(text, minimum=1, maximum=MAX_REPEAT)


def trial_count(text: str) -> int:
    """A trial budget: at most ``MAX_TRIALS`` (``explorer.types``)."""
    return _int(text, minimum=1, maximum=MAX_TRIALS, why=TOO_MANY_TRIALS)


def batch_count(text: str) -> int:
    return _int(text, minimum=1, maximum=MAX_TRIALS)


def port_number(text: str) -> int:
    return _int(text, minimum=1, maximum=65535)


def plain_number(text: str) -> float:
    """A number as written on a command line: digits, a point, an exponent (no "1_000")."""
    if not _PLAIN_NUMBER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    return float(text)


def positive_seconds(text: str) -> float:
    if not _PLAIN_NUMBER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}")
    value = float(text)
    if not math.isfinite(value) or value <= 0:  # nan compares false to everything: test it
        raise argparse.ArgumentTypeError(f"must be a positive, finite number (got {text})")
    if value > MAX_SECS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SECS:.0f} (got {text}){TOO_LONG}")
    return value


def file_name(text: str) -> str:
    """A path option: an empty one would silently mean "none" (or the default)."""
    if not text:
        raise argparse.ArgumentTypeError("expected a file name, got an empty one")
    return text


def only_with(args: argparse.Namespace, option: str, needed: str) -> None:
    """Refuse ``option`` (a flag) when ``needed`` was not given: it would do nothing."""
    if getattr(args, option.lstrip("-").replace("-", "_"), None) and not getattr(
        args, needed.lstrip("-").replace("-", "_"), None
    ):
        raise UsageError(f"{option} only applies with {needed}")


# -- workload arguments ------------------------------------------------------------------------
def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``-p KEY=VALUE`` options as a dict; a key given twice is refused, not overwritten. Nothing
    is stripped or reinterpreted: a number is written with the digits 0-9 and no spaces."""
    params: dict[str, Any] = {}
    texts: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"-p/--param expects KEY=VALUE (got {item!r})")
        if key != key.strip() or value != value.strip():
            raise UsageError(f"-p {item!r}: remove the spaces around {key.strip()} or its value")
        if key in texts:
            raise UsageError(f"-p {key} is given twice ({key}={texts[key]} and {key}={value})")
        texts[key] = value
        _refuse_disguised_number(f"-p {key}={value}", value)
        # "512" is a size; anything else is left to the family's own check ("--5" included)
        params[key] = int(value) if _PLAIN_INT.fullmatch(value) else value
    return params


def _refuse_disguised_number(where: str, text: str) -> None:
    """Python's int() and float() read "٣٢" (non-ASCII digits), "1_000" and "+5" as numbers;
    a command line means what it shows, so these are refused, not converted."""
    if _PLAIN_INT.fullmatch(text):
        return
    unusual = not text.isascii() and any(c.isdecimal() for c in text)
    try:
        int(text)
    except ValueError:
        pass
    else:
        unusual = True
    if unusual:
        raise UsageError(f"{where}: write the number with the plain digits 0-9 only")


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``--shape NAME=DxD`` options as a dict (each in the expression builder's grammar,
    ``explorer.workloads.parse_shapes``); a name given twice is refused."""
    from explorer import workloads  # here: the parser and --help must not load TVM

    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        try:
            entry = workloads.parse_shapes(item)
        except WorkloadError:
            entry = {}
        if len(entry) != 1:
            raise UsageError(f"--shape expects NAME=DxD, e.g. A=64x32 (got {item!r})")
        ((name, dims),) = entry.items()
        if name in shapes:
            first = "x".join(map(str, shapes[name]))
            raise UsageError(f"--shape {name} is given twice ({name}={first} and {item})")
        shapes[name] = dims
    return shapes


def did_you_mean(exc: UnknownPluginError) -> str:
    """The message of an unknown-name error, with the closest valid names first."""
    close = difflib.get_close_matches(str(exc.name), exc.valid, n=3, cutoff=0.6)
    if not close:
        return str(exc)
    return f"{exc.kind} {exc.name!r} is not known; did you mean {' or '.join(map(repr, close))}?"


def check_tune_options(args: argparse.Namespace) -> None:
    """What `explorer tune` can refuse before building, measuring or storing anything."""
    from explorer.search import check_capabilities

    # Each strategy declares what it takes (explorer.search.capabilities); an unknown name, or
    # a --start, --cost-model or --transfer it cannot take, is one sentence naming what it does
    # take.
    check_capabilities(
        args.strategy,
        start=bool(getattr(args, "start", None)),
        cost_model=getattr(args, "cost_model", None),
        transfer=bool(getattr(args, "transfer", False)),
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
    a locked or read-only database, a full disk, a permission denied, a database server that
    cannot be reached."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _ENVIRONMENT_ERRNOS:
            return True
        if getattr(current, "environment_problem", False):  # a database server's (ServerError)
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
def shown(value: object) -> str:
    """An option's parsed value as the user wrote it: ``--seconds 1`` is 1, not 1.0 (and a
    database URL without its password)."""
    return f"{value:g}" if isinstance(value, float) else redact(str(value))
