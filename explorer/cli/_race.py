"""``explorer race``: strategies and seeds raced on a recording of earlier measurements.

Nothing is built or timed: each strategy searches the recorded schedules of the workload and
is answered from the recording (``explorer.replay``), so ten seeds of five strategies take
seconds. The recording is opened read-only, checked intact first, and never written; the race's
runs live in memory and are printed (``--plot`` draws them into an HTML file).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from explorer.cli._args import (
    EXIT_FAILED,
    EXIT_OK,
    STRATEGY_NAMES,
    UsageError,
    check_tune_options,
    check_writable_file,
    file_name,
    positive_int,
    trial_count,
)
from explorer.cli._common import add_workload_args, workload_of
from explorer.cli._db import _open
from explorer.text import format_secs, plural, share

if TYPE_CHECKING:  # the command imports what it needs when it runs (TVM is slow to import)
    from explorer.analysis import RaceInfo, RaceRow
    from explorer.replay import RecordedWorkload, Recording

DEFAULT_SEEDS = 10
DEFAULT_TRIALS = 64


def cmd_race(args: argparse.Namespace) -> int:
    from explorer.replay import DEFAULT_STRATEGIES, MAX_SEEDS, race, recordings_in

    if args.seeds > MAX_SEEDS:
        raise UsageError(f"--seeds {args.seeds}: at most {MAX_SEEDS}")
    named = args.strategy or []
    repeated = sorted({name for name in named if named.count(name) > 1})
    if repeated:  # raced once either way: say so rather than merge them without a word
        raise UsageError(f"--strategy {repeated[0]} is given twice: name each strategy once")
    if args.plot:
        check_writable_file(args.plot, "--plot")
    if args.workload is None and args.expr is None:
        recorded = _open(argparse.Namespace(db=args.replay), read_only=True, existing=True)
        try:
            return _list(recordings_in(recorded), args.replay)
        finally:
            recorded.close()
    recording = _recording(args, args.replay)
    strategies = args.strategy or list(DEFAULT_STRATEGIES)
    print(f"replaying {recording.describe()}")
    from explorer.storage import get_store

    store = get_store(":memory:")
    result = race(
        recording,
        strategies,
        seeds=args.seeds,
        trials=args.trials,
        store=store,
        on_progress=lambda p: print(
            f"\r  {p.done}/{p.total} runs", end="", file=sys.stderr, flush=True
        ),
    )
    print(file=sys.stderr)
    from explorer.analysis import race_info

    info = race_info(result, store)
    _print_table(info)
    if args.plot:
        from explorer.plots import make_race_figure

        make_race_figure(info).write_html(args.plot, include_plotlyjs=True)
        print(f"wrote {args.plot}")
    return EXIT_OK


def tune_replayed(args: argparse.Namespace) -> int:
    """``explorer tune --replay DB``: one run of the strategy, answered from the recording."""
    from explorer.cli._lifecycle import apply_tune_defaults
    from explorer.search import make_strategy
    from explorer.storage import get_store, remeasurements
    from explorer.tuner import Tuner

    for option, given in (
        ("--resume", args.resume is not None),
        ("--start", bool(args.start)),
        ("--transfer", bool(args.transfer)),
        ("--db", args.db is not None),
        ("--tracker", getattr(args, "tracker", None) is not None),
    ):
        if given:
            raise UsageError(
                f"--replay answers from the recording: it takes no {option} (a replayed run "
                "is stored nowhere and measures nothing)"
            )
    if args.workload is None and args.expr is None:
        raise UsageError("tune --replay needs a workload (`explorer race --replay DB` lists them)")
    apply_tune_defaults(args)
    check_tune_options(args)
    recording = _recording(args, args.replay)
    print(f"replaying {recording.describe()}")
    store = get_store(":memory:")
    tuner = Tuner(measurer=recording.measurer(), store=store, batch_size=args.batch, confirm_top=0)
    strategy = make_strategy(args.strategy, cost_model=args.cost_model)
    result = tuner.run(
        recording.workload,
        recording.target,
        strategy,
        max_trials=args.trials,
        max_secs=args.seconds,
        seed=args.seed,
        space=recording.space(),
    )
    print(
        f"{args.strategy} (replayed): {plural(result.num_trials, 'trial')} ({result.why_stopped})"
    )
    if result.best is None:
        print("no recorded schedule it proposed ran correctly")
        return EXIT_FAILED
    best, recorded = result.best.result.median_secs, recording.best_secs
    share_of_best = f", {recorded / best:.2f} of the recording's best" if best and recorded else ""
    rows = store.trial_rows(run_id=result.run.id)  # trials as every screen counts them
    number = [r.id for r, again in zip(rows, remeasurements(rows), strict=True) if not again]
    print(
        f"best: trial {number.index(result.best.id) + 1}, {format_secs(best)} as recorded"
        f"{share_of_best}"
    )
    if args.save_trace:
        Path(args.save_trace).write_text(json.dumps(result.best.candidate.trace))
        print(f"trace written to {args.save_trace}")
    return EXIT_OK


def _recording(args: argparse.Namespace, source: str) -> Recording:
    from explorer.replay import Recording

    recorded = _open(argparse.Namespace(db=source), read_only=True, existing=True)
    try:
        return Recording(recorded, workload_of(args), source=source)
    finally:
        recorded.close()


def _list(recordings: list[RecordedWorkload], source: str) -> int:
    if not recordings:
        print(f"{source} holds no measurements to replay")
        return EXIT_OK
    print(f"{source} can replay (give the workload and its -p parameters to race on one):")
    for r in recordings:
        print(f"  {r.workload.key()} on {r.target}: {plural(r.num_trials, 'trial')}")
    return EXIT_OK


def _print_table(info: RaceInfo) -> None:
    from explorer.analysis import REACH

    print(
        f"raced {plural(len(info.rows), 'strategy')} x {plural(info.seeds, 'seed')} x "
        f"{plural(info.trials, 'trial')} in {info.secs:.1f} s (replayed: nothing was built or "
        "timed)"
    )
    print(
        f"{'strategy':<22}{'median best':>14}{'of best':>9}"
        f"{f'trials to {REACH:.0%}':>16}{'reached':>9}{'stopped early':>15}{'s a run':>9}"
    )
    for row in info.rows:
        best = f"{row.median_best_ms:.4g} ms" if row.median_best_ms else "-"
        of_best = f"{row.of_best:.2f}" if row.of_best else "-"
        needed = (
            f"> {info.trials}" if row.trials_to_reach == math.inf else f"{row.trials_to_reach:g}"
        )
        print(
            f"{row.strategy:<22}{best:>14}{of_best:>9}{needed:>16}"
            f"{f'{row.reached}/{row.num_seeds}':>9}{row.exhausted:>15}"
            f"{row.median_run_secs:>9.1f}"
        )
    for row in info.rows:
        if row.exhausted:
            print(f"note: {_stopped_early(row, info.coverage)}")


def _stopped_early(row: RaceRow, coverage: float) -> str:
    said = (
        f"{row.strategy} stopped before its budget in {row.exhausted} of {row.num_seeds} "
        f"seeds (median {row.median_trials:g} trials): it had nothing more to propose"
    )
    if coverage >= 1:
        return said + " (converged)"
    return (
        f"{said} among the recorded schedules; the recording holds {share(coverage)} of the "
        "space, and a replayed search proposes only schedules it holds (one that moves to "
        "neighbouring schedules finds few of them)"
    )


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "race",
        help="race strategies over seeds on a recording of earlier measurements (seconds)",
        description=(
            "Race search strategies, several seeds each, on the recorded measurements of one "
            "workload: each searches only the recorded schedules and is answered from the "
            "recording, so nothing is built or timed. Without a workload, list what the "
            "recording can replay."
        ),
    )
    add_workload_args(p, optional_when="without one: list what the recording can replay")
    p.add_argument(
        "--replay",
        type=file_name,
        required=True,
        metavar="DB",
        help="the recording: a database of earlier measurements (read only)",
    )
    p.add_argument(
        "--strategy",
        action="append",
        choices=STRATEGY_NAMES,
        default=None,
        metavar="NAME",
        help=f"a strategy to race (repeatable; default: random, autotvm, evolutionary, "
        f"droplet, evolutionary+droplet; any of {', '.join(STRATEGY_NAMES)})",
    )
    p.add_argument(
        "--seeds",
        type=positive_int,
        default=DEFAULT_SEEDS,
        help=f"seeds per strategy, 0 to N-1 (default {DEFAULT_SEEDS})",
    )
    p.add_argument(
        "--trials",
        type=trial_count,
        default=DEFAULT_TRIALS,
        help=f"trials per run (default {DEFAULT_TRIALS})",
    )
    p.add_argument(
        "--plot", type=file_name, metavar="FILE", help="also draw the race into an HTML file"
    )
    p.set_defaults(func=cmd_race)
