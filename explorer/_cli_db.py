"""The record-database subcommands: ``runs``, ``export``, ``import``, ``backup``, ``check``.

Reading commands open the database read-only: they never create a file or a folder, and work in
a read-only folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from explorer._cli_args import EXIT_FAILED, EXIT_OK, UsageError, format_secs, plural
from explorer.errors import ExplorerError


def cmd_runs(args: argparse.Namespace) -> int:
    from explorer.storage import get_store, summarize_run

    store = get_store(args.db, read_only=True)
    runs = store.runs()
    if not runs:
        print(f"no runs in {getattr(store, 'path', args.db)}")
        return EXIT_OK
    # Trials and best as `explorer tune` reports them (one summary for both): re-measurements
    # are not trials, and the best is the confirmed (re-timed) one. A run whose process is gone
    # reads as interrupted (resume it with `explorer tune --resume ID`).
    print(f"{'id':>4} {'strategy':12} {'trials':>6} {'best':>10}  {'status':11} workload")
    for run in runs:
        summary = summarize_run(run.id, store.trial_rows(run_id=run.id))
        print(
            f"{run.id:>4} {run.strategy:12} {summary.num_trials:>6} "
            f"{format_secs(summary.best_secs):>10}  {run.status:11} "
            f"{run.workload.key()} on {run.target.key()}"
        )
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from explorer import storage

    store = storage.get_store(args.db, read_only=True)
    out = Path(args.out)
    # "Nothing found" is not success: refuse before an empty output file is written.
    if args.run is not None and args.run not in {run.id for run in store.runs()}:
        raise UsageError(f"no run {args.run} in {getattr(store, 'path', args.db)}")
    if store.count_trials(run_id=args.run) == 0:
        where = f"run {args.run}" if args.run is not None else getattr(store, "path", args.db)
        raise UsageError(f"nothing to export: {where} has no trials")
    if args.format == "csv":
        n = storage.export_csv(store, out, run_id=args.run)
    elif args.format == "jsonl":
        n = storage.export_jsonl(store, out, run_id=args.run)
    else:
        n = storage.export_metaschedule(store, out, run_id=args.run)
    print(f"exported {n} trials to {out}")
    return EXIT_OK


def cmd_import(args: argparse.Namespace) -> int:
    from explorer import storage

    store = storage.get_store(args.db)
    summary = storage.import_metaschedule(store, Path(args.work_dir))
    print(
        f"imported {summary.imported} records into run(s) {list(summary.run_ids)}; "
        f"{summary.duplicates} already in the database, "
        f"{summary.unmatched} with an unknown workload, {summary.failed} unreadable"
    )
    if summary.imported:
        print("imported timings are unchecked until `explorer check` re-measures them")
    stored = summary.imported + summary.duplicates
    return EXIT_OK if stored or not (summary.unmatched or summary.failed) else 1


def cmd_backup(args: argparse.Namespace) -> int:
    from explorer.storage import SQLiteStore

    # Read-only: a backup of a missing database is an error, and the source is never written.
    with SQLiteStore(_db_path(args), read_only=True) as store:
        dest = store.backup(args.dest, overwrite=args.force)
    with SQLiteStore(dest, read_only=True) as copy:  # the copy reads back, and says what it holds
        runs, trials = len(copy.runs()), copy.count_trials()
    print(f"backed up {plural(runs, 'run')}, {plural(trials, 'trial')} to {dest}")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from explorer.measure import LocalMeasurer
    from explorer.storage import check_unchecked, get_store

    store = get_store(args.db)
    if args.run is not None:
        try:
            store.get_run(args.run)
        except KeyError:
            raise ExplorerError(f"no run {args.run} in {_db_path(args)}") from None
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


def _db_path(args: argparse.Namespace) -> Path:
    from explorer.storage import default_store_path

    return Path(args.db) if args.db else default_store_path()
