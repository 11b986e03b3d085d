"""Flat dumps of trials for spreadsheets, pandas and other tools: CSV and JSON Lines."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from explorer.core import BASELINE_MARK, RecordStore, RunInfo, TrialRecord, has_mark
from explorer.storage._files import check_output_file
from explorer.target import Target
from explorer.workloads import Workload

CSV_COLUMNS = (
    "trial_id",
    "run_id",
    "strategy",
    "workload",
    "target",
    "seq",
    "status",
    "median_secs",
    "gflops",
    "build_secs",
    "num_repeats",
    "is_remeasure",
    "is_baseline",
    "device",
    "cache_flush",
)
"""The fixed leading columns; ``run_secs_<i>`` (one per repeat), ``pred_<model>`` (one per cost
model seen), ``error_msg`` and ``created_at`` follow. ``is_remeasure`` is 1 for a measurement
that is not a trial of the search (a re-timing of a schedule the run measured before, or the
run's baseline), else 0; ``is_baseline`` is 1 for a measurement of the run's baseline, the
unscheduled program (``decisions["baseline"]``), else 0; ``device`` names the fleet device that
measured it (``key@host:port``), empty for this machine; ``cache_flush`` what each sample found
flushed from the CPU caches (``explorer.types.CacheFlush``: none, arguments or all)."""


def export_csv(
    store: RecordStore,
    path: str | Path,
    *,
    run_id: int | None = None,
    workload: Workload | None = None,
    target: Target | None = None,
) -> int:
    """Write one CSV row per trial, joined with its run, in insertion order.

    Repeats go in ``run_secs_0 .. run_secs_<n-1>`` where ``n`` is the most repeats of any exported
    trial (shorter rows leave the rest empty); predictions go in ``pred_<model>`` columns, one per
    model name seen. Floats are written at full precision, missing values as empty cells, times in
    seconds (``created_at`` in unix seconds).

    Args:
        store: The source.
        path: The CSV file to write (overwritten).
        run_id: Only this run's trials.
        workload: Only trials of this workload.
        target: Only trials on this target.

    Returns:
        How many rows were written: trials and re-measurements (``is_remeasure``) alike.

    Raises:
        StoreError: ``path`` is a directory or its folder does not exist (checked first).

    Example:
        >>> import tempfile, os
        >>> from explorer.storage import SQLiteStore, export_csv
        >>> out = os.path.join(tempfile.mkdtemp(), "trials.csv")
        >>> export_csv(SQLiteStore(":memory:"), out)
        0
    """
    path = check_output_file(path, doing="export to", what="the CSV file")
    trials = store.trials(run_id=run_id, workload=workload, target=target)
    runs = _runs(store, trials)
    num_repeats = max((len(t.result.run_secs) for t in trials), default=0)
    models = sorted({name for t in trials for name in t.predicted})
    header = [
        *CSV_COLUMNS,
        *(f"run_secs_{i}" for i in range(num_repeats)),
        *(f"pred_{m}" for m in models),
        "error_msg",
        "created_at",
    ]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for trial in trials:
            result = trial.result
            repeats = list(result.run_secs) + [None] * (num_repeats - len(result.run_secs))
            row = [
                trial.id,
                trial.run_id,
                runs[trial.run_id].strategy,
                trial.candidate.workload.key(),
                trial.candidate.target.key(),
                trial.seq,
                result.status.value,
                result.median_secs,
                result.gflops,
                result.build_secs,
                len(result.run_secs),
                int(trial.is_remeasure),
                int(has_mark(trial.candidate.decisions, BASELINE_MARK)),
                trial.result.device,
                trial.result.cache_flush.value,
                *repeats,
                *(trial.predicted.get(m) for m in models),
                result.error_msg,
                trial.created_at,
            ]
            writer.writerow(_cell(v) for v in row)
    return len(trials)


def export_jsonl(
    store: RecordStore,
    path: str | Path,
    *,
    run_id: int | None = None,
    workload: Workload | None = None,
    target: Target | None = None,
) -> int:
    """Write one JSON object per line and trial, in insertion order.

    Each line holds ``id``, ``run_id``, ``seq``, ``strategy``, ``created_at``, ``predicted``,
    ``is_remeasure`` (a measurement that is not a trial of the search: a re-timing, or the
    run's baseline, whose ``candidate.decisions`` is ``{"baseline": true}``), ``candidate``
    (``Candidate.to_json()``) and ``result`` (``MeasureResult.to_json()``), so
    ``Candidate.from_json`` and ``MeasureResult.from_json`` read a line back.

    Args:
        store: The source.
        path: The file to write (overwritten).
        run_id: Only this run's trials.
        workload: Only trials of this workload.
        target: Only trials on this target.

    Returns:
        How many lines were written: trials and re-measurements (``is_remeasure``) alike.

    Raises:
        StoreError: ``path`` is a directory or its folder does not exist (checked first).
    """
    path = check_output_file(path, doing="export to", what="the JSON Lines file")
    trials = store.trials(run_id=run_id, workload=workload, target=target)
    runs = _runs(store, trials)
    with open(path, "w", encoding="utf-8") as fh:
        for line in _jsonl_lines(trials, runs):
            fh.write(line)
            fh.write("\n")
    return len(trials)


def _jsonl_lines(trials: list[TrialRecord], runs: dict[int, RunInfo]) -> Iterator[str]:
    for trial in trials:
        yield json.dumps(
            {
                "id": trial.id,
                "run_id": trial.run_id,
                "seq": trial.seq,
                "strategy": runs[trial.run_id].strategy,
                "created_at": trial.created_at,
                "predicted": dict(trial.predicted),
                "is_remeasure": trial.is_remeasure,
                "candidate": trial.candidate.to_json(),
                "result": trial.result.to_json(),
            },
            separators=(",", ":"),
        )


def _runs(store: RecordStore, trials: list[TrialRecord]) -> dict[int, RunInfo]:
    return {run_id: store.get_run(run_id) for run_id in sorted({t.run_id for t in trials})}


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # full precision: str() of a float is repr() today, but be explicit
    return value
