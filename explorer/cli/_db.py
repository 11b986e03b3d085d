"""The record-database subcommands: ``runs``, ``export``, ``import``, ``backup``, ``check``.

``--db`` names an SQLite file or a PostgreSQL database (``postgresql://user@host/dbname``);
``backup`` copies either into either. Reading commands open the database read-only: they never
create a file or a folder (nor tables), and work in a read-only folder. Every command checks an
SQLite file with SQLite's ``quick_check`` before it reads or prints anything, so a damaged
database is one plain error, never half a table or SQLite's raw text. Counts say trials and
re-measurements apart, as ``explorer runs`` and ``explorer tune`` do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from explorer.cli._args import EXIT_FAILED, EXIT_OK, UsageError, file_name, positive_int
from explorer.cli._common import add_common
from explorer.errors import ExplorerError
from explorer.text import format_secs, plural

if TYPE_CHECKING:
    from explorer.storage import RecordStore


def _open(args: argparse.Namespace, *, read_only: bool, existing: bool = False) -> RecordStore:
    """The database of ``--db``, checked intact (``SQLiteStore.ensure_intact``) before use;
    with ``existing``, one that holds records already (opened read-only first, which refuses a
    missing file or an empty database and creates nothing)."""
    from explorer.storage import get_store

    if existing:
        get_store(_db_path(args), read_only=True).close()
    store = get_store(_db_path(args), read_only=read_only)
    try:
        check = getattr(store, "ensure_intact", None)
        if check is not None:
            check()
    except BaseException:
        store.close()
        raise
    return store


def _counted(trials: int, remeasures: int) -> str:
    """``16 trials`` or ``16 trials + 3 re-measurements`` (re-timings are not trials)."""
    text = plural(trials, "trial")
    return f"{text} + {plural(remeasures, 're-measurement')}" if remeasures else text


def cmd_runs(args: argparse.Namespace) -> int:
    from explorer.analysis import shown_strategy
    from explorer.storage import summarize_run

    store = _open(args, read_only=True)
    runs = store.runs()
    if not runs:
        print(f"no runs in {getattr(store, 'path', args.db)}")
        return EXIT_OK
    # Trials and best as `explorer tune` reports them (one summary for both): re-measurements
    # are not trials, and the best is the confirmed (re-timed) one. A run whose process is gone
    # reads as interrupted (resume it with `explorer tune --resume ID`).
    # "vs unscheduled": how many times faster the best is than the run's own baseline (the
    # unscheduled program, measured in the same run; "-" for runs made before baselines).
    print(
        f"{'id':>4} {'strategy':12} {'trials':>6} {'best':>10} {'vs unscheduled':>14}  "
        f"{'status':11} workload"
    )
    for run in runs:
        summary = summarize_run(run.id, store.trial_rows(run_id=run.id))
        speedup = summary.speedup_over_baseline
        versus = "-" if speedup is None else f"{speedup:.2f}x"
        print(
            f"{run.id:>4} {shown_strategy(run):12} {summary.num_trials:>6} "
            f"{format_secs(summary.best_secs):>10} {versus:>14}  {run.status:11} "
            f"{run.workload.key()} on {run.target.key()}"
        )
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from explorer import storage

    store = _open(args, read_only=True)
    out = Path(args.out)
    # "Nothing found" is not success: refuse before an empty output file is written.
    if args.run is not None and args.run not in {run.id for run in store.runs()}:
        raise UsageError(f"no run {args.run} in {getattr(store, 'path', args.db)}")
    total = store.count_trials(run_id=args.run)
    if total == 0:
        where = f"run {args.run}" if args.run is not None else getattr(store, "path", args.db)
        raise UsageError(f"nothing to export: {where} has no trials")
    remeasures = storage.count_trials(store, args.run)[1]  # as `explorer runs` counts
    if args.format == "metaschedule":
        n = storage.export_metaschedule(store, out, run_id=args.run)
        # Records, not trials: failures are left out, and records already in `out` too; both
        # are said, so a count below the trials is never a mystery.
        timed = [r for r in store.trial_rows(run_id=args.run) if r.run_secs]
        failed = total - sum(1 for r in timed if r.is_ok or r.status.is_inconclusive)
        left = []
        if failed:
            left.append(f"{plural(failed, 'failed trial')} (MetaSchedule keeps no failures)")
        if total - failed - n > 0:
            left.append(f"{total - failed - n} already in {out} or refuted by a check")
        print(
            f"exported {plural(n, 'MetaSchedule tuning record')} to {out}"
            + (f"; left out: {', '.join(left)}" if left else "")
        )
        return EXIT_OK
    export = storage.export_csv if args.format == "csv" else storage.export_jsonl
    n = export(store, out, run_id=args.run)
    # Every row is written; a search storing into the run meanwhile adds plain trials.
    print(f"exported {_counted(n - remeasures, remeasures)} to {out}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from explorer import storage
    from explorer.storage import is_record_database

    if is_record_database(args.work_dir):
        return _merge(args)
    # Import writes: the work_dir is checked before a database is created or opened, and the
    # database before anything is read from it.
    work_dir = storage.check_work_dir(args.work_dir)
    store = _open(args, read_only=False)
    summary = storage.import_metaschedule(store, work_dir)
    print(
        f"imported {summary.imported} records into run(s) {list(summary.run_ids)}; "
        f"{summary.duplicates} already in the database, "
        f"{summary.unmatched} with an unknown workload, {summary.failed} unreadable"
    )
    if summary.imported:
        print("imported timings are unchecked until `explorer check` re-measures them")
    stored = summary.imported + summary.duplicates
    return EXIT_OK if stored or not (summary.unmatched or summary.failed) else 1


def _merge(args: argparse.Namespace) -> int:
    """``explorer import DB``: the runs and trials of another record database that this one
    lacks (SQLite or PostgreSQL, either way)."""
    from explorer.storage import get_store, merge_records

    with get_store(args.work_dir, read_only=True) as source:
        check = getattr(source, "ensure_intact", None)
        if check is not None:
            check()
        store = _open(args, read_only=False)
        try:
            summary = merge_records(source, store)
            where = getattr(store, "path", args.db)
        finally:
            store.close()
        name = getattr(source, "path", args.work_dir)
    print(
        f"imported {plural(summary.runs_added, 'new run')} and "
        f"{plural(summary.trials_added, 'trial')} from {name} into {where}; "
        f"{plural(summary.runs_known, 'run')} already there"
    )
    return EXIT_OK


def cmd_backup(args: argparse.Namespace) -> int:
    from explorer.storage import (
        SQLiteStore,
        copy_records,
        copy_to_file,
        count_trials,
        get_store,
        is_postgres_url,
    )

    source, dest = _db_path(args), args.dest
    if is_postgres_url(dest) and args.force:
        raise UsageError(
            "--force cannot replace a PostgreSQL database (its records are append-only): "
            "back up into an empty database"
        )
    # Read-only: a backup of a missing database is an error, and the source is never written.
    # A damaged one is refused (`backup` checks it): its copy would be damaged too.
    with get_store(source, read_only=True) as store:
        if isinstance(store, SQLiteStore) and not is_postgres_url(dest):
            dest = store.backup(dest, overwrite=args.force)  # SQLite's online backup API
        elif is_postgres_url(dest):
            with get_store(dest) as target:  # between SQLite and PostgreSQL: record by record
                copy_records(store, target)
        else:
            dest = copy_to_file(store, dest, overwrite=args.force)
    with get_store(dest, read_only=True) as copy:  # the copy reads back, and says what it holds
        runs, (trials, remeasures) = len(copy.runs()), count_trials(copy)  # as `runs` counts
        where = getattr(copy, "path", dest)
    print(f"backed up {plural(runs, 'run')}, {_counted(trials, remeasures)} to {where}")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from explorer.measure import LocalMeasurer
    from explorer.storage import check_unchecked

    # Checking adds runs to a database of unchecked timings; it never creates one (as the
    # reading commands, it refuses a missing --db: a typo would leave an empty database behind).
    store = _open(args, read_only=False, existing=True)
    if args.run is not None:
        try:
            store.get_run(args.run)
        except KeyError:
            raise ExplorerError(
                f"no run {args.run} in {getattr(store, 'path', args.db)}"
            ) from None
    # A progress bar on a terminal only: each schedule is built and timed, seconds apiece.
    bar = tqdm(unit="schedule", file=sys.stderr, disable=not sys.stderr.isatty())
    with LocalMeasurer() as measurer, bar:
        summary = check_unchecked(
            store, measurer, run_id=args.run, on_batch=lambda batch: bar.update(len(batch))
        )
    if not summary.checked:
        where = f" in run {args.run}" if args.run is not None else ""
        print(
            f"nothing to check: no unchecked schedule{where} "
            f"({summary.already_checked} unchecked trials were checked before)"
        )
        return EXIT_OK
    print(
        f"checked {plural(summary.checked, 'schedule')} against NumPy into run(s) "
        f"{list(summary.run_ids)}: {summary.ok} ok, {summary.failed} not ok"
    )
    return EXIT_OK if not summary.failed else EXIT_FAILED


def _db_path(args: argparse.Namespace) -> str | Path:
    """``--db`` (a file, or a ``postgresql://`` URL as it is), or the default database when it
    is not given; an empty ``--db`` is refused (it would otherwise name the current folder, or
    silently mean the default)."""
    from explorer.storage import default_store, is_postgres_url

    if args.db is None:
        return default_store()
    if not args.db.strip():
        raise UsageError("--db needs a file name (it was given an empty one)")
    return args.db if is_postgres_url(args.db) else Path(args.db)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("runs", help="list the runs in the database")
    add_common(p, target=False)
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("export", help="export trials as CSV, JSON Lines or a MetaSchedule DB")
    add_common(p, target=False)
    p.add_argument("--format", choices=("csv", "jsonl", "metaschedule"), default="csv")
    p.add_argument("--run", type=positive_int, default=None, help="only this run")
    p.add_argument("out", type=file_name, help="output file (a directory for metaschedule)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "import",
        help="import a MetaSchedule JSON database (work_dir), or merge in the runs of another "
        "record database (an SQLite file or a postgresql:// URL) that this one lacks",
    )
    add_common(p, target=False)
    p.add_argument("work_dir", type=file_name, metavar="SOURCE")
    p.set_defaults(func=cmd_import)

    p = sub.add_parser(
        "backup",
        help="copy the database safely, even while a search writes to it (SQLite and "
        "PostgreSQL, either way)",
    )
    add_common(p, target=False)
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
    add_common(p, target=False)
    p.add_argument("--run", type=positive_int, default=None, metavar="RUN", help="only this run")
    p.set_defaults(func=cmd_check)
