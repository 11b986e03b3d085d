"""``explorer report``: one self-contained HTML file of runs, for sharing a result.

The database is opened read-only and checked intact first (like ``explorer runs``); the output
file is checked writable before any work, and written whole or not at all. Everything is in the
file (plotly.js included), so it opens in any browser, offline, without Python.
"""

from __future__ import annotations

import argparse
import sys

from explorer.cli._args import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    UsageError,
    check_writable_file,
    file_name,
    positive_int,
)
from explorer.cli._db import _open
from explorer.text import plural

DEFAULT_OUTPUT = "report.html"


def cmd_report(args: argparse.Namespace) -> int:
    from explorer.report import MAX_SCHEDULES, MissingDependencyError, write_report

    if args.run and args.latest is not None:
        raise UsageError("give either --run or --latest, not both")
    check_writable_file(args.output, "-o/--output")
    store = _open(args, read_only=True)
    try:
        result = write_report(  # checks for plotly before any work
            store,
            args.output,
            run_ids=args.run,
            latest=args.latest,
            max_schedules=args.schedules if args.schedules is not None else MAX_SCHEDULES,
        )
    except MissingDependencyError as exc:  # the installation's fault, not the command's
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    finally:
        store.close()
    size = f"{result.size_bytes / 1e6:.1f} MB"
    print(
        f"wrote {result.path} ({size}): {plural(result.num_runs, 'run')} of "
        f"{plural(result.num_workloads, 'workload')}, "
        f"{plural(result.num_schedules, 'best schedule')}; it opens in any browser, offline"
    )
    return EXIT_OK


def add_report_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="write one self-contained HTML file of runs: plots, best schedules, settings",
        description=(
            "Write the dashboards' plots, the best schedules' TVMScript and traces, and the "
            "runs' settings into one HTML file that opens in any browser, offline."
        ),
    )
    p.add_argument(
        "--db",
        type=file_name,
        help="record database: a file, or a postgresql://user@host/dbname URL "
        "(default: $EXPLORER_DB or ~/.explorer/records.db)",
    )
    p.add_argument(
        "--run",
        type=positive_int,
        action="append",
        default=None,
        metavar="RUN",
        help="a run to include (repeatable; default: every run; `explorer runs` lists them)",
    )
    p.add_argument("--latest", type=positive_int, metavar="N", help="only the latest N runs")
    p.add_argument(
        "-o",
        "--output",
        type=file_name,
        default=DEFAULT_OUTPUT,
        metavar="FILE",
        help=f"the HTML file to write (default: {DEFAULT_OUTPUT}; replaced if it exists)",
    )
    p.add_argument(
        "--schedules",
        type=positive_int,
        default=None,
        metavar="N",
        help="best distinct schedules shown per workload, with TVMScript (default 5)",
    )
    p.set_defaults(func=cmd_report)
