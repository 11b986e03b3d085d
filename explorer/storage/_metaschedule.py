"""MetaSchedule's ``JSONDatabase`` as an import and export format.

A MetaSchedule work_dir holds ``database_workload.json`` (one IRModule per line) and
``database_tuning_record.json`` (one ``[workload_index, record]`` per line, in commit order). Our
trials become ``TuningRecord``s and back: the trace is the unit exchanged, the IR is never stored
in our database.

An IRModule does not say which of our workloads it is (its family, parameters and NumPy
reference), so an export also writes ``explorer_workloads.json`` beside the two files: the
workloads and targets it exported, as our JSON. MetaSchedule ignores the file; an import reads
it, so that an export imports back into an empty database.

MetaSchedule never compares a kernel's output with a reference, so its timings are imported as
``UNCHECKED`` trials: never ranked as best until ``check_unchecked`` (``explorer check``)
re-measures them with our measurer.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from explorer import _tvm
from explorer.core import (
    Candidate,
    RecordStore,
    trace_hash,
)
from explorer.errors import StoreError
from explorer.storage._files import check_output_folder
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload

logger = logging.getLogger(__name__)

MS_FAILURE_SECS = 1e10
"""What MetaSchedule stores as ``run_secs`` for a candidate that failed to build or run."""

WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
SIDECAR_FILE = "explorer_workloads.json"
"""Our descriptions of the exported workloads and targets, beside MetaSchedule's files."""
_SIDECAR_FORMAT = "schedule-explorer metaschedule sidecar"


def export_metaschedule(
    store: RecordStore,
    work_dir: str | Path,
    *,
    run_id: int | None = None,
    workload: Workload | None = None,
    target: Target | None = None,
    include_failed: bool = False,
) -> int:
    """Write trials to a MetaSchedule JSON database, so TVM tooling can use them.

    Only timed trials are exported by default: ``OK`` ones, and ``UNCHECKED`` ones (MetaSchedule's
    own timings, imported or streamed) unless our measurer found that schedule wrong.
    MetaSchedule treats every record as a valid schedule and keeps no error message, so a failure
    could only be written as the ``1e10`` sentinel it uses itself. ``include_failed=True`` does
    exactly that (useful to stop MetaSchedule re-measuring known-bad schedules); failed trials
    whose trace does not even replay are skipped then. ``WRONG_RESULT`` trials are failures here:
    their timings are not usable.

    Records are appended in our insertion order to an existing database in ``work_dir``, as
    ``JSONDatabase`` itself does, except records it already holds (same workload, trace and
    timings), so exporting twice writes nothing new. ``explorer_workloads.json`` is written (or
    extended) beside, describing the workloads and targets as our JSON (see the module doc).

    Args:
        store: The source.
        work_dir: The MetaSchedule work directory (created if missing; the folder it is in
            must exist).
        run_id: Only this run's trials.
        workload: Only trials of this workload.
        target: Only trials on this target.
        include_failed: Export failures with ``run_secs=[1e10]`` instead of skipping them.

    Returns:
        How many tuning records were written.

    Raises:
        StoreError: ``work_dir`` is a file or its folder does not exist (checked before
            anything is read), or a successful trial's trace no longer replays on its workload.
    """
    if not str(work_dir).strip():  # Path("") would be the current folder
        raise StoreError("cannot export to an empty path: name the MetaSchedule folder")
    path = Path(work_dir)
    _check_export_dir(path)
    trials = store.trials(run_id=run_id, workload=workload, target=target)
    try:
        path.mkdir(exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder {path}: {exc.strerror or exc}") from exc
    writer = _RecordWriter(_tvm.ms.database.JSONDatabase(work_dir=str(path)))
    refuted: dict[tuple[str, str], set[int]] = {}  # (workload, target) -> wrong traces' hashes
    for trial in trials:
        result, cand = trial.result, trial.candidate
        is_timed = result.status in _TIMED and bool(result.run_secs)
        if is_timed and result.status is MeasureStatus.UNCHECKED:
            is_timed = trace_hash(cand.trace) not in _refuted(store, cand, refuted)
        if not is_timed and not include_failed:
            continue
        sch = _tvm.Schedule(cand.workload.mod())
        try:
            _tvm.apply_trace_json(cand.trace, sch)
        except Exception as exc:
            if is_timed:
                raise StoreError(
                    f"trial {trial.id}: its trace no longer replays on {cand.workload.key()}: "
                    f"{exc}"
                ) from exc
            logger.debug("trial %d: failed trace does not replay; not exported", trial.id)
            continue
        # TuningRecord keeps each value as a FloatImm holding a double: no precision lost.
        writer.write(
            cand, sch, [float(x) for x in result.run_secs] if is_timed else [MS_FAILURE_SECS]
        )
    if writer.described:
        _write_sidecar(path, writer.described.values())
    return writer.written


class _RecordWriter:
    """Tuning records appended to a MetaSchedule ``JSONDatabase``, each once (the records it
    holds already are not written again), and the workloads and targets they are of."""

    def __init__(self, database: Any) -> None:
        self.database = database
        self.present = {
            _record_key(r.workload.mod, r.trace, r.run_secs)
            for r in database.get_all_tuning_records()
        }
        self.entries: dict[
            str, tuple[Any, Any, int]
        ] = {}  # workload key -> MS workload, args, hash
        self.tvm_targets: dict[str, Any] = {}
        self.described: dict[str, Workload | Target] = {}  # for the sidecar, by key
        self.written = 0

    def write(self, cand: Candidate, sch: Any, run_secs: list[float]) -> None:
        ms = _tvm.ms
        key, target_key = cand.workload.key(), cand.target.key()
        if key not in self.entries:
            mod = cand.workload.mod()
            self.entries[key] = (
                self.database.commit_workload(mod),
                ms.arg_info.ArgInfo.from_prim_func(mod["main"]),
                _tvm.tvm_ffi.structural_hash(mod),
            )
        entry, args_info, mod_hash = self.entries[key]
        if target_key not in self.tvm_targets:
            self.tvm_targets[target_key] = cand.target.to_tvm()
        self.described.setdefault(key, cand.workload)
        self.described.setdefault(target_key, cand.target)
        record_key = (mod_hash, trace_hash(_tvm.trace_to_json(sch.trace)), tuple(run_secs))
        if record_key in self.present:
            return
        self.present.add(record_key)
        self.database.commit_tuning_record(
            ms.database.TuningRecord(
                sch.trace,
                entry,
                run_secs=run_secs,
                target=self.tvm_targets[target_key],
                args_info=args_info,
            )
        )
        self.written += 1


_TIMED = (MeasureStatus.OK, MeasureStatus.UNCHECKED)


def _check_export_dir(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise StoreError(
            f"cannot export to {path}: it is a file, and the MetaSchedule format writes a folder "
            "(name a new folder, or one that holds a MetaSchedule database)"
        )
    check_output_folder(path, doing="export to")


def check_work_dir(path: str | Path) -> Path:
    """``path`` as a ``Path`` if it holds a MetaSchedule JSON database, else ``StoreError``
    saying what is missing (checked before any database is opened)."""
    if not str(path).strip():  # Path("") would be the current folder
        raise StoreError("cannot import an empty path: name a MetaSchedule work_dir")
    path = Path(path)
    if not path.exists():
        raise StoreError(
            f"cannot import {path}: the folder {path} does not exist (name a MetaSchedule "
            "work_dir)"
        )
    if not path.is_dir():
        raise StoreError(
            f"cannot import {path}: it is a file; a MetaSchedule work_dir is a folder holding "
            f"{WORKLOAD_FILE} and {RECORD_FILE}"
        )
    for name in (WORKLOAD_FILE, RECORD_FILE):
        if not (path / name).is_file():
            raise StoreError(f"{path} is not a MetaSchedule JSON database (no {name})")
    return path


def _record_key(mod: Any, trace: Any, run_secs: Any) -> tuple[int, int, tuple[float, ...]]:
    """What makes two tuning records the same: workload, schedule and timings."""
    secs = tuple(float(x) for x in run_secs or ())
    return _tvm.tvm_ffi.structural_hash(mod), trace_hash(_tvm.trace_to_json(trace)), secs


def _refuted(
    store: RecordStore, cand: Candidate, cache: dict[tuple[str, str], set[int]]
) -> set[int]:
    """Hashes of the traces our measurer found wrong for this candidate's workload and target."""
    key = (cand.workload.key(), cand.target.key())
    if key not in cache:
        rows = store.trial_rows(
            workload=cand.workload, target=cand.target, status=MeasureStatus.WRONG_RESULT
        )
        cache[key] = {row.trace_hash for row in rows}
    return cache[key]


def _write_sidecar(path: Path, objects: Iterable[Workload | Target]) -> None:
    """Add these workloads and targets to ``explorer_workloads.json`` (written atomically)."""
    workloads, targets = _read_sidecar(path)
    by_key: dict[str, Any] = {w.key(): w.to_json() for w in workloads}
    target_by_key: dict[str, Any] = {t.key(): t.to_json() for t in targets}
    for obj in objects:
        if isinstance(obj, Workload):
            by_key.setdefault(obj.key(), obj.to_json())
        else:
            target_by_key.setdefault(obj.key(), obj.to_json())
    data = {
        "format": _SIDECAR_FORMAT,
        "version": 1,
        "workloads": list(by_key.values()),
        "targets": list(target_by_key.values()),
    }
    tmp = path / f".{SIDECAR_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path / SIDECAR_FILE)


def _read_sidecar(path: Path) -> tuple[list[Workload], list[Target]]:
    """The workloads and targets described in ``explorer_workloads.json`` (none if absent).

    What cannot be read is logged and skipped: the records it describes are then reported as
    unmatched, like those of any plain MetaSchedule work_dir.
    """
    file = path / SIDECAR_FILE
    if not file.is_file():
        return [], []
    try:
        data = json.loads(file.read_text())
        if not isinstance(data, dict) or data.get("format") != _SIDECAR_FORMAT:
            raise ValueError("not written by Schedule Explorer")
        items: list[tuple[Callable[[Any], Workload | Target], Any]]
        items = [(Workload.from_json, w) for w in data.get("workloads", ())]
        items += [(Target.from_json, t) for t in data.get("targets", ())]
    except (OSError, ValueError) as exc:
        logger.warning("%s: unreadable, ignored: %s", file, exc)
        return [], []
    workloads: list[Workload] = []
    targets: list[Target] = []
    for decode, item in items:
        try:  # one unknown family (e.g. a plug-in not installed here) must not hide the rest
            obj = decode(item)
        except Exception as exc:  # noqa: BLE001 - see above
            logger.warning("%s: cannot describe %r: %s", file, item, exc)
            continue
        if isinstance(obj, Workload):
            workloads.append(obj)
        else:
            targets.append(obj)
    return workloads, targets


def _read(path: Path) -> tuple[list[Any], list[tuple[int, str]]]:
    """The MetaSchedule workloads (``None`` where a line is unreadable) and the raw record lines
    as ``(lineno, line)``, in commit order.

    ``JSONDatabase.get_all_tuning_records()`` sorts by latency, which loses the order a search
    measured in, so the files are parsed directly.
    """
    check_work_dir(path)
    workloads: list[Any] = []
    for lineno, line in _lines(path / WORKLOAD_FILE):
        try:
            workloads.append(_tvm.ms.database.Workload.from_json(json.loads(line)))
        except Exception as exc:  # noqa: BLE001 - one bad line must not hide the others
            logger.warning("%s:%d: unreadable workload: %s", path / WORKLOAD_FILE, lineno, exc)
            workloads.append(None)
    return workloads, list(_lines(path / RECORD_FILE))


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    with open(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                yield lineno, line
