"""`explorer tune`: a search, new or resumed, and its verdicts."""

from __future__ import annotations

import argparse
import collections
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer.cli._args import (
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    STRATEGY_NAMES,
    batch_count,
    check_tune_options,
    describe,
    file_name,
    is_environment_problem,
    non_negative_int,
    only_with,
    positive_int,
    positive_seconds,
    trial_count,
)
from explorer.cli._common import (
    REFIT_HELP,
    add_common,
    add_workload_args,
    read_trace,
    target_of,
    workload_of,
)
from explorer.cli._fleet import add_tracker_args, fleet_target, measurer_for
from explorer.cli._lifecycle import (
    Terminated,
    apply_tune_defaults,
    check_resume_options,
    raise_unanswered_interrupt,
    resume_command,
)
from explorer.errors import ExplorerError
from explorer.text import format_secs, plural
from explorer.types import MAX_TRIALS


def cmd_tune(args: argparse.Namespace) -> int:
    only_with(args, "--refit", "--start")
    if getattr(args, "replay", None) is not None:
        from explorer.cli._race import tune_replayed

        return tune_replayed(args)
    plan = _new_run(args) if args.resume is None else _resumed_run(args)
    result = _search(args, plan)
    if isinstance(result, int):  # stopped, or failed midway: said already
        return result
    return _say_result(args, plan.store, result)


@dataclass(frozen=True)
class _Plan:
    """What a tune needs before it starts: where it stores and measures, what it runs, and
    where its progress bar starts (a resumed run's trials so far)."""

    store: Any
    measurer: Any
    strategy: Any
    total: int
    batch_size: int
    done: int = 0
    workload: Any = None  # a new run's; a resumed run has its own
    target: Any = None


def _new_run(args: argparse.Namespace) -> _Plan:
    from explorer.search import make_strategy
    from explorer.storage import get_store

    if args.workload is None and args.expr is None:
        raise ExplorerError("tune needs a workload (or --resume RUN to continue a run)")
    apply_tune_defaults(args)
    check_tune_options(args)  # before anything is built, measured or stored
    measurer = measurer_for(args)
    workload = workload_of(args)
    target = target_of(args) if args.tracker is None else fleet_target(args, measurer)
    options = {}
    if args.start:
        # "Start from what I have": a saved session, a record's JSON, or a bare trace.
        options["start"] = _start_candidate(args, workload, target)
    if args.transfer:
        options["transfer_from"] = "auto"
    strategy = make_strategy(args.strategy, cost_model=args.cost_model, **options)
    return _Plan(
        get_store(args.db), measurer, strategy, args.trials, args.batch, 0, workload, target
    )


def _resumed_run(args: argparse.Namespace) -> _Plan:
    """Everything comes from the stored run; explicit options may only repeat its own."""
    from explorer.storage import default_store, get_store, is_postgres_url
    from explorer.tuner import RunBudget, strategy_of

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
    given = workload_of(args) if args.workload is not None or args.expr else None
    budget = RunBudget.of(run)  # a run no search made cannot be resumed: say so first
    check_resume_options(args, run, given)
    args.strategy = run.strategy
    check_tune_options(args)
    strategy = strategy_of(run, store.trials(run_id=run.id))  # the run's own, as resume does
    return _Plan(
        store,
        measurer_for(args),  # last: nothing after it can refuse and leave it open
        strategy,
        budget.max_trials,
        budget.batch_size,
        done=store.count_trials(run_id=run.id, remeasures=False),  # the bar starts there
    )


def _search(args: argparse.Namespace, plan: _Plan) -> Any:
    """The run, with a progress bar; its ``TuneResult``, or the exit status of a run that
    was stopped or failed midway (it is kept, and the user is told how to resume it)."""
    from tqdm import tqdm

    from explorer.tuner import Tuner

    tuner: Tuner | None = None
    try:
        with (
            plan.measurer,
            tqdm(
                total=plan.total,
                initial=plan.done,
                unit="trial",
                disable=args.quiet,
                file=sys.stderr,
            ) as bar,
        ):
            tuner = Tuner(measurer=plan.measurer, store=plan.store, batch_size=plan.batch_size)

            def progress(p: Any) -> None:
                raise_unanswered_interrupt()  # a Ctrl-C swallowed in the batch ends the run
                bar.n = p.num_trials
                bar.set_description_str("", refresh=False)  # measuring now
                if p.best_secs:
                    bar.set_postfix_str(f"best {format_secs(p.best_secs)}")
                bar.refresh()

            def working(what: str) -> None:
                # An interrupt swallowed on its way (SIGTERM's, raised in a TVM callback, comes
                # back as a refused schedule) ends the tune at the static model's next batch of
                # scores, not after all of them (2 minutes on a loaded machine).
                raise_unanswered_interrupt()
                bar.set_description_str(what)

            # A strategy that works long before it measures says what it does on the bar.
            plan.strategy.on_working = working
            if args.resume is not None:
                result = tuner.resume(args.resume, strategy=plan.strategy, on_progress=progress)
            else:
                result = tuner.run(
                    plan.workload,
                    plan.target,
                    plan.strategy,
                    max_trials=args.trials,
                    max_secs=args.seconds,
                    seed=args.seed,
                    on_progress=progress,
                )
            raise_unanswered_interrupt()  # swallowed in the last batch: said with the run's id
            return result
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


def _say_result(args: argparse.Namespace, store: Any, result: Any) -> int:
    """The run's count, its best and its verdicts; the best's trace saved when asked."""
    from explorer.search import transfer_note
    from explorer.storage import trial_name

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

    secs = format_secs(result.best_secs)
    how = (
        f"{secs}, its fastest repeat re-timed side by side"
        if result.is_confirmed
        else f"median {secs}, not confirmed: re-timing it failed, this is the search's own timing"
    )
    print(f"best: {name(result.best.id)}, {how}{gflops}")
    transfer = transfer_note(store.get_run(result.run.id).settings)
    if transfer:
        print(transfer)
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

    trace = read_trace(Path(args.start), workload, target, refit=args.refit)
    candidate = Candidate(workload, target, trace)
    print(f"start: {args.start}, {start_mapping(candidate).describe()}")
    return candidate


def _failures(store: Any, result: Any) -> str:
    """``", 16 of them failed (16 run_error)"``, or nothing when every trial gave a timing."""
    from explorer.storage import remeasurements

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


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tune", help="search for a fast schedule")
    add_workload_args(p, optional_when="optional with --resume")
    add_common(p)
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
    p.add_argument(
        "--transfer",
        action="store_true",
        help="let the strategy's cost model learn first from the database's trials of other "
        "workloads on this target (`explorer pretrain` measures some): autotvm, evolutionary, "
        "evolutionary+droplet; value always does",
    )
    p.add_argument(
        "--replay",
        type=file_name,
        metavar="DB",
        help="answer from the measurements DB holds of the workload instead of measuring "
        "(seconds; the run searches the recorded schedules only and is stored nowhere; "
        "`explorer race` races several strategies and seeds)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_tracker_args(p)
    p.set_defaults(func=cmd_tune)
