"""Checking ``UNCHECKED`` trials: re-measure them with a measurer that compares against NumPy.

A MetaSchedule timing says how fast a kernel ran, not whether it computed the right thing (a
kernel with an fp16 accumulator is fast and wrong). Such trials are stored ``UNCHECKED`` and never
ranked as best; checking them measures each schedule again, output compared with the workload's
NumPy reference, and stores the outcome as a new trial of a ``"check"`` run. The unchecked trials
themselves stay as they were (the store is append-only): what ranks is the checked measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from explorer.core import (
    Candidate,
    MeasuresCandidates,
    NewTrial,
    RecordStore,
    TrialRecord,
    trace_hash,
)
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload

STRATEGY = "check"
"""The strategy name of the runs that hold checked measurements."""

_SETTLED = (MeasureStatus.OK, MeasureStatus.WRONG_RESULT)  # a NumPy comparison happened


@dataclass(frozen=True, slots=True)
class CheckSummary:
    """What ``check_unchecked`` did.

    Attributes:
        run_ids: The ``"check"`` runs created, one per (workload, target).
        checked: Schedules measured (one per distinct trace, however many trials it had).
        ok: Of those, how many matched NumPy and were timed.
        failed: How many did not (wrong result, build or run error, timeout): their status
            and message are in the check run's trials.
        already_checked: Unchecked trials skipped because their schedule had been checked.
    """

    run_ids: tuple[int, ...]
    checked: int
    ok: int
    failed: int
    already_checked: int


def check_unchecked(
    store: RecordStore,
    measurer: MeasuresCandidates,
    *,
    run_id: int | None = None,
    workload: Workload | None = None,
    target: Target | None = None,
    batch_size: int = 8,
    on_batch: Callable[[list[TrialRecord]], None] | None = None,
) -> CheckSummary:
    """Re-measure the ``UNCHECKED`` trials with ``measurer`` and store the checked results.

    A schedule counts as checked once a trial with the same workload, target and trace has a
    NumPy-checked outcome (``OK`` or ``WRONG_RESULT``) or belongs to an earlier check run, so
    checking twice measures nothing the second time. Each schedule is measured once however many
    unchecked trials it has. A run that is interrupted (``KeyboardInterrupt``) keeps the batches
    already stored and is marked ``interrupted``; checking again measures the rest.

    Args:
        store: Where the unchecked trials are and the check runs go.
        measurer: A measurer that checks outputs, e.g. ``LocalMeasurer()``.
        run_id: Only this run's unchecked trials (``KeyError`` if there is no such run).
        workload, target: Only this workload's (target's) unchecked trials.
        batch_size: Candidates per ``measure`` call and per stored batch.
        on_batch: Called with each stored batch (for progress).

    Returns:
        The runs created and the counts.

    Example:
        >>> from explorer.measure import LocalMeasurer  # doctest: +SKIP
        >>> with LocalMeasurer() as m:  # doctest: +SKIP
        ...     summary = check_unchecked(store, m)
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1 (got {batch_size})")
    if run_id is not None:
        store.get_run(run_id)  # KeyError for an unknown run, before any work
    unchecked = store.trials(
        run_id=run_id, workload=workload, target=target, status=MeasureStatus.UNCHECKED
    )
    todo, skipped = _to_check(store, unchecked)
    # Step 2. Measure and store, one check run per group.
    run_ids: list[int] = []
    ok = failed = 0
    for trials, checked_runs in todo:
        first = trials[0].candidate
        run = store.create_run(
            first.workload, first.target, STRATEGY, settings={"checks_runs": checked_runs}
        )
        run_ids.append(run.id)
        status = "failed"
        try:
            for start in range(0, len(trials), batch_size):
                batch = [t.candidate for t in trials[start : start + batch_size]]
                results = measurer.measure(batch)
                stored = store.add_trials(
                    run.id, [NewTrial(c, r) for c, r in zip(batch, results, strict=True)]
                )
                ok += sum(r.is_ok for r in results)
                failed += sum(not r.is_ok for r in results)
                if on_batch is not None:
                    on_batch(stored)
            status = "finished"
        except KeyboardInterrupt:
            status = "interrupted"  # Ctrl-C or SIGTERM: the run stopped, it did not fail
            raise
        finally:
            store.finish_run(run.id, status)
    return CheckSummary(tuple(run_ids), ok + failed, ok, failed, skipped)


def _to_check(
    store: RecordStore, unchecked: list[TrialRecord]
) -> tuple[list[tuple[list[TrialRecord], list[int]]], int]:
    """``unchecked`` grouped by workload and target, without the schedules already checked and
    repeats: per group, one trial per schedule and the runs they came from; and how many trials
    were left out as checked already."""
    groups: dict[tuple[str, str], list[TrialRecord]] = {}
    for trial in unchecked:
        cand = trial.candidate
        groups.setdefault((cand.workload.key(), cand.target.key()), []).append(trial)
    todo: list[tuple[list[TrialRecord], list[int]]] = []
    skipped = 0
    for trials in groups.values():
        settled = _settled(store, trials[0].candidate)
        pending: dict[int, TrialRecord] = {}
        sources: set[int] = set()
        for trial in trials:
            digest = trace_hash(trial.candidate.trace)
            if digest in settled:
                skipped += 1
            else:
                pending.setdefault(digest, trial)
                sources.add(trial.run_id)
        if pending:
            todo.append((list(pending.values()), sorted(sources)))
    return todo, skipped


def _settled(store: RecordStore, cand: Candidate) -> set[int]:
    """Trace hashes of this workload and target whose output has been checked (or tried)."""
    rows = store.trial_rows(workload=cand.workload, target=cand.target)
    done = {row.trace_hash for row in rows if row.status in _SETTLED}
    checks = store.runs(workload=cand.workload, target=cand.target, strategy=STRATEGY)
    for run in checks:
        done |= {row.trace_hash for row in store.trial_rows(run_id=run.id)}
    return done
