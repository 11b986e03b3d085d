"""`explorer pretrain`: measure random schedules of the catalog's presets, so that
`explorer tune --transfer` has other workloads' trials to learn from."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from explorer.cli._args import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    UsageError,
    non_negative_int,
    positive_int,
    positive_seconds,
)
from explorer.cli._common import add_common, target_of
from explorer.cli._fleet import add_tracker_args, fleet_target, measurer_for
from explorer.cli._lifecycle import Terminated, raise_unanswered_interrupt
from explorer.text import plural
from explorer.types import MAX_SECS


def cmd_pretrain(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from explorer.pretrain import coverage, pretrain, pretrain_presets
    from explorer.storage import get_store

    seconds = args.minutes * 60
    if seconds > MAX_SECS:
        raise UsageError(f"--minutes {args.minutes:g}: at most {MAX_SECS / 60:.0f} minutes")
    names = pretrain_presets(args.only or (), args.skip or ())
    store = get_store(args.db)
    measurer = measurer_for(args)
    with measurer:
        target = target_of(args) if args.tracker is None else fleet_target(args, measurer)
        before = sum(coverage(store, target, names).values())
        print(
            f"pretraining on {plural(len(names), 'preset')} for {target.key()}: the database "
            f"holds {plural(before, 'trial')} of them"
        )
        with tqdm(total=round(seconds), unit="s", disable=args.quiet, file=sys.stderr) as bar:

            def progress(p: Any) -> None:
                raise_unanswered_interrupt()  # a Ctrl-C swallowed in a batch ends it here
                bar.n = min(round(p.elapsed_secs), bar.total)
                bar.set_postfix_str(f"{p.preset}, {plural(p.trials, 'trial')} stored")

            try:
                result = pretrain(
                    store,
                    measurer,
                    target,
                    seconds=seconds,
                    names=names,
                    per_preset=args.per_preset,
                    trials_per_run=args.trials_per_run,
                    seed=args.seed,
                    on_progress=progress,
                )
            except KeyboardInterrupt as exc:
                bar.close()
                now = sum(coverage(store, target, names).values())
                print(
                    f"interrupted; {plural(now - before, 'trial')} stored. `explorer pretrain` "
                    "again goes on with the presets that have the fewest trials",
                    file=sys.stderr,
                )
                return EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
    print(
        f"{plural(result.trials, 'trial')} in {plural(len(result.runs), 'run')} "
        f"({result.why_stopped})"
    )
    fewest, most = min(result.covered.values()), max(result.covered.values())
    held = plural(most, "trial") if fewest == most else f"{fewest} to {plural(most, 'trial')}"
    print(
        f"the database now holds {held} of each preset on this target; "
        "`explorer tune ... --transfer` learns from them"
    )
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "pretrain",
        help="measure random schedules of the catalog's presets for transfer learning",
        description="Measure random schedules of the catalog's presets and store them, the "
        "preset with the fewest trials on the target first, so that `explorer tune "
        "--transfer` learns from other workloads first. Run it again to go on.",
    )
    add_common(p)
    p.add_argument("--minutes", type=_minutes, required=True, help="how long to measure (e.g. 10)")
    p.add_argument(
        "--only",
        action="append",
        metavar="PRESET",
        help="pretrain on this preset only (repeatable; default: every preset)",
    )
    p.add_argument(
        "--skip",
        action="append",
        metavar="PRESET",
        help="leave this preset out, e.g. to test transfer on it (repeatable)",
    )
    p.add_argument(
        "--per-preset",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop once every preset has N trials on the target",
    )
    p.add_argument(
        "--trials-per-run",
        type=positive_int,
        default=16,
        metavar="N",
        help="trials of one preset before the next one's turn (default 16)",
    )
    p.add_argument(
        "--seed", type=non_negative_int, default=0, help="added to each run's seed (default 0)"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_tracker_args(p)
    p.set_defaults(func=cmd_pretrain)


def _minutes(text: str) -> float:
    try:
        return positive_seconds(text)  # the same rules: a plain, positive, finite number
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace("seconds", "minutes")) from None
