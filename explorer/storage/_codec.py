"""Rows to records and back, for the SQLite store."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from explorer.core import (
    Candidate,
    MeasureResult,
    NewTrial,
    RunInfo,
    TrialRecord,
    TrialRow,
    text_hash,
)
from explorer.target import Target
from explorer.types import CacheFlush, MeasureStatus
from explorer.workloads import Workload

# -- garbage collector --------------------------------------------------------------------------
# Decoding thousands of trials allocates ~20 containers each; the allocation count alone makes
# CPython run full collections over the whole heap (TVM's included), which doubled the time of
# trials(run_id=...) on a 5,000-trial run. The decoded objects are acyclic, so the collector has
# nothing to find there; it is paused for large decodes only, and restored as it was, even when
# several threads decode at once.
GC_PAUSE_ROWS = 1000
_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


def decode_trial(
    row: Sequence[Any], objects: Mapping[int, tuple[Workload, Target]]
) -> TrialRecord:
    (trial_id, run_id, seq, trace, decisions, status, run_secs, build_secs, error_msg, flops,
     num_threads, predicted, created_at, is_remeasure, device, cache_flush) = row  # fmt: skip
    workload, target = objects[run_id]
    return TrialRecord(
        id=int(trial_id),
        run_id=int(run_id),
        seq=int(seq),
        candidate=Candidate(
            workload=workload,
            target=target,
            trace=_loads(trace),
            decisions=_loads(decisions),
        ),
        result=MeasureResult(
            status=MeasureStatus(status),
            run_secs=tuple(_loads(run_secs)),
            error_msg=error_msg,
            build_secs=build_secs,
            flops=int(flops),
            num_threads=num_threads,
            device=device,
            # NULL: stored before trials named their protocol, when none flushed anything
            cache_flush=CacheFlush(cache_flush) if cache_flush else CacheFlush.NONE,
        ),
        predicted=_loads(predicted),
        created_at=float(created_at),
        is_remeasure=bool(is_remeasure),
    )


# -- encoding helpers ---------------------------------------------------------------------------
# One shared encoder: json.dumps() with non-default options builds a new encoder on every call,
# which was a third of the cost of storing a trial.
_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)
_DECODER = json.JSONDecoder()


def dumps(value: Any, what: str) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} is not JSON-serialisable: {exc}") from None


def encode_trial(run: RunInfo, index: int, trial: NewTrial) -> tuple[Any, ...]:
    """The stored columns of one trial, from ``trace_json`` to ``predicted_json``."""
    if not isinstance(trial, NewTrial):
        raise TypeError(f"trial {index}: expected a NewTrial (got {type(trial).__name__})")
    cand, result = trial.candidate, trial.result
    # A run is one workload on one target; the trial rows only keep their keys and are decoded
    # with the run's objects, so a different key would silently change the record.
    if cand.workload.key() != run.workload.key():
        raise ValueError(
            f"trial {index}: workload {cand.workload.key()} differs from run {run.id}'s "
            f"workload {run.workload.key()}"
        )
    if cand.target.key() != run.target.key():
        raise ValueError(
            f"trial {index}: target {cand.target.key()} differs from run {run.id}'s "
            f"target {run.target.key()}"
        )
    try:
        predicted = {str(k): float(v) for k, v in dict(trial.predicted).items()}
    except (TypeError, ValueError) as exc:
        raise ValueError(f"trial {index}: predictions must be numbers ({exc})") from None
    return (
        dumps(cand.trace, f"trial {index}: trace"),
        None if cand.decisions is None else dumps(cand.decisions, f"trial {index}: decisions"),
        MeasureStatus(result.status).value,
        dumps([float(x) for x in result.run_secs], f"trial {index}: run_secs"),
        result.median_secs,
        result.gflops,
        int(result.flops),
        None if result.build_secs is None else float(result.build_secs),
        result.error_msg,
        result.num_threads,
        dumps(predicted, f"trial {index}: predicted"),
    )


def snapshot(
    trial_id: int,
    run: RunInfo,
    seq: int,
    row: Sequence[Any],
    created_at: float,
    is_remeasure: bool = False,
    device: str | None = None,
    cache_flush: CacheFlush = CacheFlush.NONE,
) -> TrialRecord:
    """The record just stored, rebuilt from the stored text: the caller keeps no reference into
    it, and it equals what a later query returns."""
    (trace, decisions, status, run_secs, _median, _gflops, flops, build_secs, error_msg,
     num_threads, predicted) = row  # fmt: skip
    return TrialRecord(
        id=trial_id,
        run_id=run.id,
        seq=seq,
        candidate=Candidate(run.workload, run.target, _loads(trace), _loads(decisions)),
        result=MeasureResult(
            status=MeasureStatus(status),
            run_secs=tuple(_loads(run_secs)),
            error_msg=error_msg,
            build_secs=build_secs,
            flops=flops,
            num_threads=num_threads,
            device=device,
            cache_flush=cache_flush,
        ),
        predicted=_loads(predicted),
        created_at=created_at,
        is_remeasure=bool(is_remeasure),
    )


def _loads(text: str | None) -> Any:
    # Most predictions and repeats lists are empty; skipping the parser for them is measurable
    # when a query returns thousands of trials.
    if text is None:
        return None
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return _DECODER.decode(text)


def filters(
    *,
    run_id: int | None = None,
    workload: Workload | None = None,
    target: Target | None = None,
    strategy: str | None = None,
    status: MeasureStatus | None = None,
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (
        ("run_id", run_id),
        ("workload_key", None if workload is None else workload.key()),
        ("target_key", None if target is None else target.key()),
        ("strategy", strategy),
        ("status", None if status is None else MeasureStatus(status).value),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


_STATUSES = {s.value: s for s in MeasureStatus}
_ROW_DECODER = json.JSONDecoder()


def decode_row(row: Sequence[Any]) -> TrialRow:
    """A ``TrialRow`` from the columns ``SQLiteStore`` reads for ``trial_rows``."""
    (trial_id, run_id, seq, status, median, run_secs, predicted, decisions, trace,
     created_at, is_remeasure, device) = row  # fmt: skip
    return TrialRow(
        id=trial_id,
        run_id=run_id,
        seq=seq,
        status=_STATUSES[status],
        median_secs=median,
        run_secs=tuple(_ROW_DECODER.decode(run_secs)) if run_secs != "[]" else (),
        predicted=_ROW_DECODER.decode(predicted) if predicted != "{}" else {},
        decisions=None if decisions is None else _ROW_DECODER.decode(decisions),
        trace_hash=text_hash(trace),
        created_at=created_at,
        is_remeasure=bool(is_remeasure),
        device=device,
    )
