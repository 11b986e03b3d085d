"""The command line's side of a run's lifecycle: SIGTERM, ``--resume RUN`` and its conflicts.

Kept apart from the commands so that they stay about their work.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from explorer._urls import redact
from explorer.cli._args import shown
from explorer.errors import ExplorerError

TUNE_DEFAULTS = {"strategy": "random", "trials": 64, "seconds": None, "seed": 0, "batch": 8}
"""`explorer tune`'s defaults. The parser's own defaults are ``None`` so that an option given
explicitly can be told from a default: with ``--resume`` only explicit options are compared with
the run's own."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, so a run ends like on Ctrl-C: interrupted,
    its stored trials kept, its lease released, its worker processes stopped."""


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM raises ``Terminated`` in the main thread (elsewhere: no change)."""

    def on_sigterm(signum: int, frame: Any) -> None:
        _terminate_requested.set()  # raised where TVM may swallow it, as Ctrl-C can be
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread: signals cannot be handled here
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def deliver_swallowed_interrupts() -> None:
    """Make a Ctrl-C (or SIGTERM) that Python swallowed take effect: for the whole process.

    Python raises KeyboardInterrupt wherever the main thread is, and where that is a weakref
    callback (importlib's module locks have one: any import), the exception is printed as
    "Exception ignored in ..." and dropped; the command went on and exited 0 (1 run in ~400 of
    test_cli_interrupt, Ctrl-C while TVM loaded). Such an interrupt is sent again as its signal
    from another thread, so that Python delivers it after the hook, in ordinary code (sent from
    the hook itself, it was raised in the hook, and swallowed again; a callback that swallows it
    again sends it again)."""
    previous = sys.unraisablehook
    main = threading.main_thread().ident

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and main is not None:
            terminated = isinstance(unraisable.exc_value, Terminated)
            again = signal.SIGTERM if terminated else signal.SIGINT
            threading.Thread(target=_send_soon, args=(main, again), daemon=True).start()
            return
        previous(unraisable)

    sys.unraisablehook = hook


_interrupt_requested = threading.Event()
_terminate_requested = threading.Event()


def remember_interrupts() -> None:
    """Ctrl-C raises ``KeyboardInterrupt`` as before, and the process remembers it was pressed.

    Python raises it wherever the main thread is; where that is Python code called back from
    TVM's C++ (a TVM FFI callback), TVM handed it back to its caller as a ``RuntimeError``, which
    code that treats TVM's failures as data catches: the tune went on and exited 0 (CI, Ctrl-C
    1.5 s into a tune on a loaded machine). The TVM shim has TVM hand a ``KeyboardInterrupt``
    back as itself, but not SIGTERM's ``Terminated``, nor one a library catches whole:
    ``raise_unanswered_interrupt`` answers those.
    Nothing changes where SIGINT is ignored (a background job) or handled by someone else."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return

    def on_sigint(signum: int, frame: Any) -> None:
        _interrupt_requested.set()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)


def raise_unanswered_interrupt() -> None:
    """Raise ``Terminated`` if SIGTERM came (``sigterm_interrupts``), else ``KeyboardInterrupt``
    if Ctrl-C was pressed (``remember_interrupts``): called where a command would go on, so an
    interrupt swallowed on its way still ends it."""
    if _terminate_requested.is_set():
        raise Terminated
    if _interrupt_requested.is_set():
        raise KeyboardInterrupt


def forget_interrupts() -> None:
    """A new command starts: no Ctrl-C pressed, no SIGTERM received yet."""
    _interrupt_requested.clear()
    _terminate_requested.clear()


def _send_soon(thread: int, signum: int) -> None:
    time.sleep(0.05)  # the hook has long returned (while it waits to start this thread, too)
    signal.pthread_kill(thread, signum)


def resume_command(run_id: int, db: str | None) -> str:
    """The exact command that resumes run ``run_id``; a database URL's password shows as
    ``***`` (``~/.pgpass`` or ``$PGPASSWORD`` can hold it)."""
    command = f"explorer tune --resume {run_id}"
    return command + (f" --db {shlex.quote(redact(db))}" if db else "")


def apply_tune_defaults(args: argparse.Namespace) -> None:
    """Fill in the defaults of the options not given (a new run)."""
    for name, value in TUNE_DEFAULTS.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)


# How a run's setting that is not set reads in a conflict ("--seconds 1 (the run has no time
# budget)", never "(the run has None)").
_NOT_SET = {
    "--strategy": "no strategy",
    "--trials": "no trial budget",
    "--seconds": "no time budget",
    "--seed": "no seed",
    "--batch": "no batch size",
    "--threads": "no thread count",
}


def check_resume_options(args: argparse.Namespace, run: Any, workload: Any | None) -> None:
    """Refuse explicit options that differ from the run's own (a run resumes on its terms).

    Args:
        args: the parsed `explorer tune` arguments.
        run: the stored ``RunInfo``.
        workload: the workload the arguments name, or ``None`` when none was given.
    """
    settings = run.settings
    given = {
        "--strategy": (args.strategy, run.strategy),
        "--trials": (args.trials, settings.get("max_trials")),
        "--seconds": (args.seconds, settings.get("max_secs")),
        "--seed": (args.seed, settings.get("seed")),
        "--batch": (args.batch, settings.get("batch_size")),
        "--threads": (getattr(args, "threads", None), run.target.num_cores),
    }
    conflicts = [
        f"{option} {shown(mine)} (the run has {_NOT_SET[option] if theirs is None else theirs})"
        for option, (mine, theirs) in given.items()
        if mine is not None and mine != theirs
    ]
    if workload is not None and workload != run.workload:
        conflicts.insert(0, f"workload {workload.key()} (the run tunes {run.workload.key()})")
    if getattr(args, "start", None):
        conflicts.append("--start (a run keeps the start point it began with)")
    if getattr(args, "cost_model", None):
        conflicts.append("--cost-model (a run keeps the cost model it began with)")
    if getattr(args, "transfer", False) and settings.get("transfer_from") != "auto":
        conflicts.append("--transfer (the run began without it)")
    if conflicts:
        raise ExplorerError(
            f"run {run.id} resumes with its own settings; these differ: {'; '.join(conflicts)}. "
            f"Resume with `{resume_command(run.id, getattr(args, 'db', None))}` alone, or start "
            "a new run"
        )
