"""The `explorer` process: parsing, dispatch, exit codes and signals (see the package)."""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence

from explorer.cli import (
    _catalog,
    _db,
    _fleet,
    _lab,
    _measure,
    _model,
    _nas,
    _pretrain,
    _race,
    _report,
    _tune,
)
from explorer.cli._args import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    Parser,
    UsageError,
    describe,
    file_name,
    is_environment_problem,
    shown,
)
from explorer.cli._lifecycle import (
    Terminated,
    deliver_swallowed_interrupts,
    forget_interrupts,
    raise_unanswered_interrupt,
    remember_interrupts,
    sigterm_interrupts,
)
from explorer.errors import ExplorerError

COMMAND_FAMILIES = (
    _catalog.add_parsers,
    _measure.add_parsers,
    _tune.add_parsers,
    _pretrain.add_parsers,
    _race.add_parsers,
    _db.add_parsers,
    _fleet.add_fleet_parser,
    _report.add_report_parser,
    _lab.add_lab_parser,
    _nas.add_nas_parser,
    _model.add_model_parser,
)
"""Each command family adds its own subcommands, in the order `explorer --help` lists them."""


def main(argv: Sequence[str] | None = None) -> int:
    forget_interrupts()
    try:
        code = _main(argv)
        if code not in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            raise_unanswered_interrupt()  # a Ctrl-C swallowed on its way (see there)
        return code
    except KeyboardInterrupt as exc:  # before a command started (TVM still loading, say)
        _ignore_further_interrupts()
        print("interrupted before anything was stored", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED


def console() -> int:
    """``main()`` as a process runs it (``explorer``, ``python -m explorer``).

    After a Ctrl-C (or SIGTERM) the process leaves at once with ``os._exit``, its output
    flushed: every command has already closed what it opened (its ``with`` blocks ran while the
    interrupt unwound), and interpreter shutdown is where a clean exit 130 still died by SIGINT
    (1 run in 10-20 of test_cli_interrupt, also with SIGINT ignored: shutdown code outside ours,
    TVM's included, may put SIGINT back to its default action). Other exits go through the
    normal shutdown.
    """
    # A command that seems stuck says where each of its threads is: `kill -USR1 PID`.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    deliver_swallowed_interrupts()
    remember_interrupts()
    code = main()
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # only here: nothing starts after this
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more can be said
                pass
        os._exit(code)
    return code


def _ignore_further_interrupts() -> None:
    """The user asked to stop and the command has stopped: a Ctrl-C still pending (delivered
    twice while TVM was loading, say) must not turn the clean exit 130 into a death by SIGINT
    at interpreter shutdown (1 run in 5 of the 0.8 s case in test_cli_interrupt).

    A handler that does nothing, not ``SIG_IGN``: an ignored signal is inherited by every
    process started afterwards (``main`` also runs inside test processes and notebooks), a
    Python handler is not."""
    signal.signal(signal.SIGINT, _do_nothing)


def _do_nothing(signum: int, frame: object) -> None:
    return None


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    given = sys.argv[1:] if argv is None else list(argv)
    for position, arg in enumerate(given, start=1):
        # A process cannot receive one (argv holds C strings), but main() is also called from
        # Python, and OS paths refuse it deep inside (ValueError: embedded null byte).
        if isinstance(arg, str) and "\x00" in arg:
            print(f"error: argument {position} ({arg!r}) holds a NUL character", file=sys.stderr)
            return EXIT_USAGE
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or Parser's one-line usage error (2): returned
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not hasattr(args, "func"):
        parser.print_help()
        return EXIT_USAGE
    try:
        _take_db_before_command(args)
        with sigterm_interrupts():
            return int(args.func(args))
    except KeyboardInterrupt as exc:
        _ignore_further_interrupts()
        print("interrupted; every stored trial is kept", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    except BrokenPipeError:
        if _stdout_closed():
            return EXIT_OK  # `explorer runs | head -1`: the reader has all it wanted
        return _fail(sys.exc_info()[1])
    except (ExplorerError, OSError, json.JSONDecodeError, sqlite3.Error) as exc:
        return _fail(exc)
    except Exception as exc:
        if os.environ.get("EXPLORER_DEBUG"):
            raise
        print(
            f"error: internal error ({type(exc).__name__}: {describe(exc)}); please report it "
            "(EXPLORER_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return EXIT_FAILED


def _take_db_before_command(args: argparse.Namespace) -> None:
    """``explorer --db X runs`` means ``explorer runs --db X`` (it read as a command "X")."""
    db = args.db_before_command
    del args.db_before_command
    if db is None:
        return
    if not hasattr(args, "db"):
        raise UsageError(f"{args.command_name} uses no database: remove --db")
    if args.db is not None:
        raise UsageError(
            f"--db is given twice ({shown(db)} before the command, {shown(args.db)} after it)"
        )
    args.db = db


def _fail(exc: BaseException | None) -> int:
    """One ``error:`` line; exit 3 when the environment is at fault, else 2 (bad input)."""
    assert exc is not None
    print(f"error: {describe(exc)}", file=sys.stderr)
    return EXIT_ENVIRONMENT if is_environment_problem(exc) else EXIT_USAGE


def _stdout_closed() -> bool:
    """After a broken pipe: whether it was stdout's; if so, silence it for interpreter exit."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        # The write end of a pipe whose reader has gone polls as POLLERR (a socket: POLLHUP).
        if not any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0)):
            return False
        # Python flushes stdout again at exit and would print "Exception ignored ... EPIPE".
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (e.g. pytest's capture)
        return False
    return True


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="explorer",
        description="Schedule Explorer: build, schedule, measure and tune tensor programs.",
    )
    parser.add_argument(
        "--db",
        dest="db_before_command",
        type=file_name,
        metavar="DB",
        help="the record database of the command (as its own --db)",
    )
    sub = parser.add_subparsers(metavar="COMMAND", dest="command_name")
    for add_parsers in COMMAND_FAMILIES:
        add_parsers(sub)
    return parser
