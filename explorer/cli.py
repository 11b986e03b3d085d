"""``explorer`` / ``python -m explorer``: the command line.

Exit codes: 0 success; 1 the work ran but failed (a measurement that did not succeed, a run with
no successful trial); 2 bad usage or bad input (unknown workload, bad shape, unreadable file,
conflicting options: nothing is stored); 3 a problem of the environment, not of the command (the
database is locked or read-only, the disk is full, permission denied): the same command may work
once it is fixed; 130 interrupted by Ctrl-C and 143 by SIGTERM (stored trials are kept, the run
is ``interrupted``; ``explorer tune --resume RUN`` continues it). Every error is one
``error: ...`` line on stderr, never a traceback (set ``EXPLORER_DEBUG=1`` to see one). A closed
output pipe (``explorer runs | head -1``) ends quietly.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from explorer._cli_args import (
    EXIT_CODES,
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    STRATEGY_NAMES,
    Parser,
    UsageError,
    batch_count,
    check_tune_options,
    describe,
    file_name,
    format_secs,
    is_environment_problem,
    non_negative_int,
    only_with,
    parse_params,
    parse_shapes,
    plural,
    positive_int,
    positive_seconds,
    repeat_count,
    shown,
    trial_count,
)
from explorer._cli_db import cmd_backup, cmd_check, cmd_export, cmd_import, cmd_runs
from explorer._cli_fleet import add_fleet_parser, add_tracker_args, fleet_target, measurer_for
from explorer._cli_lab import add_lab_parser
from explorer._cli_nas import add_nas_parser
from explorer._cli_report import add_report_parser
from explorer._cli_runs import (
    Terminated,
    apply_tune_defaults,
    check_resume_options,
    resume_command,
    sigterm_interrupts,
)
from explorer.errors import ExplorerError
from explorer.types import MAX_TRIALS

# The exit codes are part of the command's interface (scripts and tests read them here).
__all__ = [
    "EXIT_CODES",
    "EXIT_ENVIRONMENT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "main",
]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # pressed before a command started (TVM still loading, say)
        _ignore_further_interrupts()
        print("interrupted before anything was stored", file=sys.stderr)
        return EXIT_INTERRUPTED


def console() -> int:
    """``main()`` as a process runs it (``explorer``, ``python -m explorer``).

    After a Ctrl-C (or SIGTERM) the process leaves at once with ``os._exit``, its output
    flushed: every command has already closed what it opened (its ``with`` blocks ran while the
    interrupt unwound), and interpreter shutdown is where a clean exit 130 still died by SIGINT
    (1 run in 10-20 of test_cli_interrupt, also with SIGINT ignored: shutdown code outside ours,
    TVM's included, may put SIGINT back to its default action). Other exits go through the
    normal shutdown.
    """
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
    parser = _parser()
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
    except Exception as exc:  # noqa: BLE001 - a bug; the user still gets one line, not a traceback
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


# -- workload arguments ------------------------------------------------------------------------
def _add_workload_args(p: argparse.ArgumentParser, *, optional: bool = False) -> None:
    p.add_argument(
        "workload",
        nargs="?" if optional else None,
        help="family or preset name (see `explorer workloads`), or `expr` with --expr/--shape"
        + (" (optional with --resume)" if optional else ""),
    )
    p.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a shape parameter, e.g. -p M=512 (repeatable)",
    )
    p.add_argument("--expr", help="a custom expression, e.g. 'C[i, j] += A[i, k] * B[k, j]'")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=DxD",
        help="shape of an input of --expr, e.g. --shape A=64x32 (repeatable)",
    )


def _workload(args: argparse.Namespace) -> Any:
    from explorer.workloads import get_workload, parse_expression

    params = parse_params(args.param)
    if args.expr is not None or args.workload == "expr":
        if args.workload not in ("expr", None):
            raise UsageError(
                f"give either a workload name ({args.workload!r}) or --expr, not both "
                "(a custom expression is the workload `expr`)"
            )
        if args.expr is None:
            raise UsageError("the expr workload needs --expr TEXT and --shape NAME=DxD")
        given = sorted(set(params) - {"dtype"})
        if given:  # text and shapes come from --expr and --shape, nothing else is a parameter
            raise UsageError(
                f"-p {given[0]} does not apply to an expression: its text is --expr, its input "
                "shapes are --shape NAME=DxD, and -p dtype=... is its only parameter"
            )
        return parse_expression(args.expr, shapes=parse_shapes(args.shape), **params)
    if args.shape:
        raise UsageError(f"--shape applies to --expr only; {args.workload} takes -p KEY=VALUE")
    return get_workload(args.workload, **params)


def _target(args: argparse.Namespace) -> Any:
    from explorer.target import Target

    if args.target != "cpu":
        return Target.cuda()
    cpu = Target.local_cpu()
    if args.threads is not None and args.threads > cpu.num_cores:
        # More threads than cores would be timed on fewer cores yet recorded as this many.
        raise UsageError(
            f"--threads {args.threads}: this machine has {cpu.num_cores} cores available "
            f"(use at most {cpu.num_cores})"
        )
    return Target.local_cpu(num_cores=args.threads)


def _add_common(p: argparse.ArgumentParser, *, target: bool = True) -> None:
    p.add_argument(
        "--db",
        type=file_name,
        help="record database: a file, or a postgresql://user@host/dbname URL "
        "(default: $EXPLORER_DB or ~/.explorer/records.db)",
    )
    if target:
        p.add_argument("--target", choices=("cpu", "cuda"), default="cpu")
        p.add_argument(
            "--threads",
            type=positive_int,
            default=None,
            help="threads per kernel, at most the cores available (default: all of them)",
        )


# -- commands ----------------------------------------------------------------------------------
def cmd_workloads(args: argparse.Namespace) -> int:
    from explorer.workloads import FAMILIES, presets

    for family in FAMILIES.values():
        shape = ", ".join(f"{p.name}={p.default}" for p in family.params)
        print(f"{family.name:18s} {family.description}\n{'':18s} defaults: {shape}")
    print("\npresets:")
    for name, (family_name, params) in presets().items():
        print(f"  {name:22s} {family_name}({', '.join(f'{k}={v}' for k, v in params.items())})")
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    from explorer.session import ScheduleSession

    workload = _workload(args)
    session = ScheduleSession(workload, target=_target(args))
    print(f"workload: {workload.key()}")
    print(f"FLOPs:    {workload.flops():,}")
    print(f"bytes:    {workload.bytes_moved():,}")
    for (shape, dtype), tensor in zip(workload.input_specs(), workload.tensors(), strict=False):
        print(f"input:    {tensor.name} {list(shape)} {dtype}")
    shape, dtype = workload.output_spec()
    print(f"output:   {workload.tensors()[-1].name} {list(shape)} {dtype}")
    print("\nloop nest:")
    for block in session.snapshot.blocks:
        loops = " > ".join(
            f"{lp.name}({lp.extent}{', ' + lp.kind if lp.kind != 'serial' else ''})"
            for lp in block.loops
        )
        print(f"  {block.name}: {loops or '(no loops)'}")
    if args.script:
        print("\n" + session.snapshot.script)
    return EXIT_OK


def cmd_measure(args: argparse.Namespace) -> int:
    from explorer.measure import Candidate, MeasureConfig  # no TVM import yet

    only_with(args, "--refit", "--trace")
    with measurer_for(args, MeasureConfig(repeat=args.repeat)) as measurer:
        # Workers first: they import TVM while this process does the same (storage, workload).
        measurer.start_workers(num_candidates=1, num_threads=args.threads)
        from explorer.storage import MANUAL, NewTrial, environment, get_store

        workload = _workload(args)
        target = _target(args) if args.tracker is None else fleet_target(args, measurer)
        trace = (
            _read_trace(Path(args.trace), workload, target, refit=args.refit)
            if args.trace
            else _empty_trace(workload)
        )
        candidate = Candidate(workload, target, trace)
        store = get_store(args.db)  # a database that cannot be used is found before measuring
        (result,) = measurer.measure([candidate])
        where = {**environment(), **measurer.run_environment(target)}
    run = store.create_run(
        workload, target, MANUAL, settings={"trace_file": args.trace}, environment=where
    )
    try:
        store.add_trials(run.id, [NewTrial(candidate, result)])
    finally:  # a manual run is never left running, even when storing failed
        store.finish_run(run.id)
    if result.is_ok:
        gflops = f", {result.gflops:.2f} GFLOPS" if result.gflops is not None else ""
        device = f" on {result.device}" if result.device else ""
        print(
            f"ok: median {format_secs(result.median_secs)} over "
            f"{plural(len(result.run_secs), 'repeat')}{gflops}, "
            f"{plural(result.num_threads or 1, 'thread')}{device}; matches NumPy"
        )
        if result.is_noisy:  # information, not a failure: the kernel is correct and stored
            print(f"note: {result.noise_note}")
        return EXIT_OK
    print(f"{result.status.value}: {result.error_msg}")
    return EXIT_FAILED


def cmd_tune(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from explorer.search import make_strategy
    from explorer.storage import default_store, get_store, is_postgres_url, trial_name
    from explorer.tuner import RunBudget, Tuner, strategy_of

    only_with(args, "--refit", "--start")
    if args.resume is None:
        if args.workload is None and args.expr is None:
            raise ExplorerError("tune needs a workload (or --resume RUN to continue a run)")
        apply_tune_defaults(args)
        check_tune_options(args)  # before anything is built, measured or stored
        measurer = measurer_for(args)
        workload = _workload(args)
        target = _target(args) if args.tracker is None else fleet_target(args, measurer)
        options = {}
        if args.start:
            # "Start from what I have": a saved session, a record's JSON, or a bare trace.
            options["start"] = _start_candidate(args, workload, target)
        strategy = make_strategy(args.strategy, cost_model=args.cost_model, **options)
        store = get_store(args.db)
        total, batch_size, done = args.trials, args.batch, 0
    else:
        # Everything comes from the stored run; explicit options may only repeat its own.
        where = args.db or default_store()
        if is_postgres_url(where):  # a database without the tables has no run: create nothing
            get_store(where, read_only=True).close()
        elif not Path(where).is_file():  # a missing database has no run to resume
            raise ExplorerError(f"there is no run {args.resume}: {where} does not exist")
        store = get_store(where)
        try:
            run = store.get_run(args.resume)
        except KeyError:
            raise ExplorerError(f"there is no run {args.resume} (see `explorer runs`)") from None
        given = _workload(args) if args.workload is not None or args.expr else None
        budget = RunBudget.of(run)  # a run no search made cannot be resumed: say so first
        check_resume_options(args, run, given)
        args.strategy = run.strategy
        check_tune_options(args)
        total, batch_size = budget.max_trials, budget.batch_size
        done = store.count_trials(run_id=run.id, remeasures=False)  # the bar starts there
        strategy = strategy_of(run, store.trials(run_id=run.id))  # the run's own, as resume does
        measurer = measurer_for(args)
    tuner: Tuner | None = None
    try:
        with (
            measurer,
            tqdm(
                total=total, initial=done, unit="trial", disable=args.quiet, file=sys.stderr
            ) as bar,
        ):
            tuner = Tuner(measurer=measurer, store=store, batch_size=batch_size)

            def progress(p: Any) -> None:
                bar.n = p.num_trials
                bar.set_description_str("", refresh=False)  # measuring now
                if p.best_secs:
                    bar.set_postfix_str(f"best {format_secs(p.best_secs)}")
                bar.refresh()

            # A strategy that works long before it measures says what it does on the bar.
            strategy.on_working = bar.set_description_str
            if args.resume is not None:
                result = tuner.resume(args.resume, strategy=strategy, on_progress=progress)
            else:
                result = tuner.run(
                    workload,
                    target,
                    strategy,
                    max_trials=args.trials,
                    max_secs=args.seconds,
                    seed=args.seed,
                    on_progress=progress,
                )
    except KeyboardInterrupt as exc:
        if tuner is None or tuner.run_id is None:  # stopped before any run existed
            raise
        print(
            f"interrupted; run {tuner.run_id} keeps every stored trial. Resume it with:\n"
            f"  {resume_command(tuner.run_id, args.db)}",
            file=sys.stderr,
        )
        return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    except ExplorerError as exc:
        if tuner is None or tuner.run_id is None:  # refused before any run existed
            raise
        # The run failed midway (a fleet whose devices went away): it is kept, resumable.
        print(
            f"error: {describe(exc)}; run {tuner.run_id} keeps every stored trial "
            f"(`{resume_command(tuner.run_id, args.db)}` goes on)",
            file=sys.stderr,
        )
        return EXIT_ENVIRONMENT if is_environment_problem(exc) else EXIT_FAILED
    print(
        f"run {result.run.id}: {plural(result.num_trials, 'trial')} ({result.why_stopped})"
        f"{_failures(store, result)}"
    )
    if result.best is None:
        print("no successful trial")
        return EXIT_FAILED
    gflops = f", {result.best_gflops:.2f} GFLOPS" if result.best_gflops is not None else ""
    # Trials are named in their run ("trial 12 of run 5"), never by their database-wide id.
    rows = store.trial_rows(run_id=result.run.id)

    def name(trial_id: int) -> str:
        return trial_name(rows, trial_id)

    how = (
        "re-timed side by side"
        if result.is_confirmed
        else "not confirmed: re-timing it failed, this is the search's own timing"
    )
    print(f"best: {name(result.best.id)}, median {format_secs(result.best_secs)} ({how}){gflops}")
    for line in result.verdicts(name):
        print(line)
    if args.save_trace:
        Path(args.save_trace).write_text(json.dumps(result.best.candidate.trace))
        print(f"trace written to {args.save_trace}")
    return EXIT_OK


def _start_candidate(args: argparse.Namespace, workload: Any, target: Any) -> Any:
    """``--start FILE`` as a candidate (``check_tune_options`` refused it already when the
    strategy does not take a start), refused before anything is stored when the schedule does
    not apply; prints what mapping it onto the knob space approximated."""
    from explorer.measure import Candidate
    from explorer.space import start_mapping

    trace = _read_trace(Path(args.start), workload, target, refit=args.refit)
    candidate = Candidate(workload, target, trace)
    print(f"start: {args.start}, {start_mapping(candidate).describe()}")
    return candidate


def _failures(store: Any, result: Any) -> str:
    """``", 16 of them failed (16 run_error)"``, or nothing when every trial gave a timing."""
    from explorer.storage._counting import remeasurements

    if not result.num_failed:
        return ""
    rows = store.trial_rows(run_id=result.run.id)
    counts = collections.Counter(
        row.status.value
        for row, again in zip(rows, remeasurements(rows), strict=True)
        if not again and not row.is_ok and not row.status.is_inconclusive
    )
    kinds = ", ".join(f"{n} {status}" for status, n in counts.most_common())
    return f", {result.num_failed} of them failed ({kinds})"


def _read_trace(path: Path, workload: Any, target: Any, *, refit: bool = False) -> Any:
    """The file's trace, checked: bad input never reaches TVM or the database. ``--refit``
    re-fits a trace of another shape, and what it changed is printed; a file saved for another
    target (a session, a record) is measured for ``target``, and that is said too."""
    from explorer.session import read_trace_file

    checked = read_trace_file(path, workload, refit=refit)
    for note in checked.notes:
        print(f"refit: {note}")
    saved = checked.target
    if saved is not None and saved.kind != target.kind:
        raise UsageError(
            f"{path} was saved for the {saved.kind} target {saved.key()}: a schedule for one "
            f"kind of device does not run on another (--target "
            f"{'cuda' if saved.kind == 'cuda' else 'cpu'} measures it)"
        )
    if saved is not None and saved.key() != target.key():
        print(f"note: {path} was saved for {saved.key()}; measuring it for {target.key()}")
    return checked.trace


def _empty_trace(workload: Any) -> Any:
    from explorer import _tvm

    return _tvm.trace_to_json(_tvm.Schedule(workload.mod()).trace)


REFIT_HELP = (
    "re-fit a trace recorded for another shape of this operator: each tile that no longer "
    "fits becomes the nearest one that does, and each change is printed"
)


def cmd_peak(args: argparse.Namespace) -> int:
    import datetime

    from explorer.machine import cache_path, cached_peak, measured_peak

    if args.tracker is not None:
        if args.threads is not None:
            raise UsageError(
                "--threads with --tracker: a device's peak is measured with the threads its "
                "server runs (`explorer fleet up --threads`)"
            )
        from explorer.measure._remote import TargetNotReported

        with measurer_for(args) as measurer:
            try:
                target = measurer.device_target()
            except TargetNotReported as exc:
                raise UsageError(
                    f"{exc}: its peak cannot be measured from the command line (in Python: "
                    "explorer.machine.measured_peak(target, device=FleetDevice(tracker, key, "
                    "cpu_model)))"
                ) from None
            where = f"key {measurer.key}'s devices at {measurer.tracker}, "
            if args.remeasure or measurer.cached_device_peak() is None:
                print(f"measuring {where}{target.key()} (a few seconds)...", flush=True)
            peak = measurer.device_peak(remeasure=args.remeasure)
    else:
        if args.key is not None:
            raise UsageError("--key needs --tracker HOST:PORT")
        target, where = _target(args), ""
        if args.remeasure or cached_peak(target) is None:
            print(f"measuring {target.key()} (a few seconds)...", flush=True)
        peak = measured_peak(target, remeasure=args.remeasure)
    when = datetime.datetime.fromtimestamp(peak.measured_at).strftime("%Y-%m-%d %H:%M")
    print(
        f"{where}{peak.cpu_model} ({target.key()}): fp32 peak {peak.gflops_f32:.1f} GFLOPS, "
        f"memory bandwidth {peak.bandwidth_gbs:.1f} GB/s\n"
        f"measured {when} on {plural(peak.num_threads, 'thread')} with TVM {peak.tvm_version}; "
        f"kept in {cache_path()} (--remeasure measures again)"
    )
    if peak.was_busy:
        print(
            f"warning: other processes used {peak.busy_elsewhere:.0%} of the CPUs meanwhile; "
            "the numbers may be low: --remeasure when the machine is quiet"
        )
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
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

    p = sub.add_parser("workloads", help="list operator families and named shapes")
    p.set_defaults(func=cmd_workloads)

    p = sub.add_parser("show", help="describe a workload: sizes, FLOPs, loop nest, TVMScript")
    _add_workload_args(p)
    _add_common(p)
    p.add_argument("--script", action="store_true", help="also print the TVMScript")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("measure", help="build, run, check and time one schedule")
    _add_workload_args(p)
    _add_common(p)
    p.add_argument(
        "--trace", type=file_name, help="JSON trace or saved session (default: unscheduled)"
    )
    p.add_argument("--refit", action="store_true", help=REFIT_HELP)
    p.add_argument(
        "--repeat", type=repeat_count, default=5, help="timed repeats (default 5, at most 100)"
    )
    add_tracker_args(p)
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("tune", help="search for a fast schedule")
    _add_workload_args(p, optional=True)
    _add_common(p)
    # Defaults are None here (TUNE_DEFAULTS fills them in): with --resume only options given
    # explicitly are compared with the run's own.
    p.add_argument(
        "--strategy",
        default=None,
        metavar="NAME",
        help=f"search strategy: {', '.join(STRATEGY_NAMES)} (default: random)",
    )
    p.add_argument(
        "--trials",
        type=trial_count,
        default=None,
        help=f"trial budget (default 64, at most {MAX_TRIALS})",
    )
    p.add_argument(
        "--seconds", type=positive_seconds, default=None, help="wall-clock budget in seconds"
    )
    p.add_argument("--seed", type=non_negative_int, default=None, help="random seed (default 0)")
    p.add_argument(
        "--batch", type=batch_count, default=None, help="candidates per batch (default 8)"
    )
    p.add_argument(
        "--resume",
        type=positive_int,
        default=None,
        metavar="RUN",
        help="continue run RUN with its own workload, strategy, budget and seed (`explorer runs` "
        "lists them; other options may only repeat the run's own)",
    )
    p.add_argument("--save-trace", type=file_name, help="write the best trace (JSON) to this file")
    p.add_argument(
        "--start",
        type=file_name,
        metavar="FILE",
        help="start from this schedule (saved session or trace JSON): it is measured as the "
        "run's reference and the search starts at its nearest point",
    )
    p.add_argument("--refit", action="store_true", help=REFIT_HELP)
    p.add_argument(
        "--cost-model",
        default=None,
        metavar="NAME",
        help="the cost model the strategy runs with, for one that takes a choice (autotvm: "
        "xgb-rank or xgb-reg); default: the strategy's own",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_tracker_args(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("runs", help="list the runs in the database")
    _add_common(p, target=False)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("export", help="export trials as CSV, JSON Lines or a MetaSchedule DB")
    _add_common(p, target=False)
    p.add_argument("--format", choices=("csv", "jsonl", "metaschedule"), default="csv")
    p.add_argument("--run", type=positive_int, default=None, help="only this run")
    p.add_argument("out", type=file_name, help="output file (a directory for metaschedule)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import",
        help="import a MetaSchedule JSON database (work_dir), or merge in the runs of another "
        "record database (an SQLite file or a postgresql:// URL) that this one lacks",
    )
    _add_common(p, target=False)
    p.add_argument("work_dir", type=file_name, metavar="SOURCE")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "backup",
        help="copy the database safely, even while a search writes to it (SQLite and "
        "PostgreSQL, either way)",
    )
    _add_common(p, target=False)
    p.add_argument(
        "dest",
        type=file_name,
        help="the backup file to write (its folder must exist), or the postgresql:// URL of an "
        "empty database",
    )
    p.add_argument("--force", action="store_true", help="replace DEST if it exists")
    p.set_defaults(func=cmd_backup)

    p = sub.add_parser(
        "check", help="re-measure unchecked (MetaSchedule) timings, checking results vs NumPy"
    )
    _add_common(p, target=False)
    p.add_argument("--run", type=positive_int, default=None, metavar="RUN", help="only this run")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser(
        "peak",
        help="this CPU's, or a fleet key's devices', measured fp32 peak and memory bandwidth",
    )
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="cores to measure on, at most the cores available (default: all of them)",
    )
    p.add_argument(
        "--remeasure", action="store_true", help="measure again, replacing the kept one"
    )
    add_tracker_args(p)  # a fleet device's peak, measured there
    p.set_defaults(func=cmd_peak, target="cpu")

    add_fleet_parser(sub)  # explorer/_cli_fleet.py
    add_report_parser(sub)  # explorer/_cli_report.py
    add_lab_parser(sub)  # explorer/_cli_lab.py
    add_nas_parser(sub)  # explorer/_cli_nas.py
    return parser


if __name__ == "__main__":
    sys.exit(main())
