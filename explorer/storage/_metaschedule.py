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
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer import _tvm
from explorer.core import (
    UNCHECKED_MSG,
    Candidate,
    MeasureResult,
    NewTrial,
    RecordStore,
    trace_hash,
)
from explorer.errors import StoreError, TargetError
from explorer.session import check_trace_on_module
from explorer.storage._files import check_output_folder
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload, get_workload, presets

logger = logging.getLogger(__name__)

MS_FAILURE_SECS = 1e10
"""What MetaSchedule stores as ``run_secs`` for a candidate that failed to build or run."""

STRATEGY = "metaschedule-import"
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
SIDECAR_FILE = "explorer_workloads.json"
"""Our descriptions of the exported workloads and targets, beside MetaSchedule's files."""
_SIDECAR_FORMAT = "schedule-explorer metaschedule sidecar"
_BATCH = 256  # trials per add_trials transaction on import


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What ``import_metaschedule`` did.

    Attributes:
        run_ids: The runs created, one per (workload, target) pair, in order of first appearance.
        imported: Trials stored, successes and failures.
        unmatched: Records not stored because their workload matched none of the candidate
            workloads (or their target could not be described); the log says which.
        failed: Records not stored because they could not be read: a malformed or truncated
            line, an unreadable workload, or a trace that does not replay; the log says which.
            (MetaSchedule's own failures, ``run_secs`` of ``1e10``, are readable: they are
            imported as ``RUN_ERROR`` trials.)
    """

    run_ids: tuple[int, ...]
    imported: int
    unmatched: int
    failed: int
    duplicates: int = 0
    """Records already in the store (same workload, target, trace and timings): not stored."""


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
    ms = _tvm.ms
    if not str(work_dir).strip():  # Path("") would be the current folder
        raise StoreError("cannot export to an empty path: name the MetaSchedule folder")
    path = Path(work_dir)
    _check_export_dir(path)
    trials = store.trials(run_id=run_id, workload=workload, target=target)
    try:
        path.mkdir(exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder {path}: {exc.strerror or exc}") from exc
    database = ms.database.JSONDatabase(work_dir=str(path))
    present = {
        _record_key(r.workload.mod, r.trace, r.run_secs) for r in database.get_all_tuning_records()
    }
    entries: dict[str, tuple[Any, Any, int]] = {}  # workload key -> (MS Workload, args, hash)
    tvm_targets: dict[str, Any] = {}
    refuted: dict[tuple[str, str], set[int]] = {}  # (workload, target) -> wrong traces' hashes
    described: dict[str, Workload | Target] = {}  # for the sidecar, by key
    written = 0
    for trial in trials:
        result, cand = trial.result, trial.candidate
        is_timed = result.status in _TIMED and bool(result.run_secs)
        if is_timed and result.status is MeasureStatus.UNCHECKED:
            is_timed = trace_hash(cand.trace) not in _refuted(store, cand, refuted)
        if not is_timed and not include_failed:
            continue
        key = cand.workload.key()
        if key not in entries:
            mod = cand.workload.mod()
            entries[key] = (
                database.commit_workload(mod),
                ms.arg_info.ArgInfo.from_prim_func(mod["main"]),
                _tvm.tvm_ffi.structural_hash(mod),
            )
        entry, args_info, mod_hash = entries[key]
        sch = _tvm.Schedule(cand.workload.mod())
        try:
            _tvm.apply_trace_json(cand.trace, sch)
        except Exception as exc:
            if is_timed:
                raise StoreError(
                    f"trial {trial.id}: its trace no longer replays on {key}: {exc}"
                ) from exc
            logger.debug("trial %d: failed trace does not replay; not exported", trial.id)
            continue
        target_key = cand.target.key()
        if target_key not in tvm_targets:
            tvm_targets[target_key] = cand.target.to_tvm()
        described.setdefault(key, cand.workload)
        described.setdefault(target_key, cand.target)
        # TuningRecord keeps each value as a FloatImm holding a double: no precision lost.
        run_secs = [float(x) for x in result.run_secs] if is_timed else [MS_FAILURE_SECS]
        record_key = (mod_hash, trace_hash(_tvm.trace_to_json(sch.trace)), tuple(run_secs))
        if record_key in present:
            continue
        present.add(record_key)
        database.commit_tuning_record(
            ms.database.TuningRecord(
                sch.trace,
                entry,
                run_secs=run_secs,
                target=tvm_targets[target_key],
                args_info=args_info,
            )
        )
        written += 1
    if described:
        _write_sidecar(path, described.values())
    return written


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


def import_metaschedule(
    store: RecordStore,
    work_dir: str | Path,
    *,
    workloads: Iterable[Workload] = (),
    target: Target | None = None,
) -> ImportSummary:
    """Read a MetaSchedule JSON database into new runs (strategy ``"metaschedule-import"``).

    Each MetaSchedule workload is matched, by structural equality of its IRModule, against the
    given ``workloads``, those described in the work_dir's ``explorer_workloads.json`` (written by
    ``export_metaschedule``), those of the runs already in ``store`` and, last, the catalog's
    named shapes (``explorer.workloads.presets()``). Records of unmatched
    workloads and unreadable records are counted in the summary and logged, never silently
    dropped. Records are stored in commit order, so a run's ``seq`` is MetaSchedule's measurement
    order. Timed records become ``UNCHECKED`` trials (MetaSchedule never checks a kernel's output;
    ``check_unchecked`` does), and its failures (``run_secs`` of ``1e10``) ``RUN_ERROR`` trials.

    Importing is idempotent: a record whose workload, target, trace and timings are already in
    the store is counted in ``duplicates`` and not stored again, so importing a work_dir twice
    adds nothing the second time.

    Args:
        store: The destination.
        work_dir: The MetaSchedule work directory.
        workloads: Candidate workloads, tried before the store's own.
        target: The target of every record; by default each record's TVM target is matched
            against the store's run targets and ``Target.local_cpu()`` by kind, ``mcpu`` and
            core count, and described from its attributes when none matches.

    Returns:
        The runs created and the counts of imported, unmatched and unreadable records.

    Raises:
        StoreError: ``work_dir`` does not exist, is a file, or holds no MetaSchedule JSON
            database.

    Example:
        >>> import tempfile
        >>> from explorer.storage import SQLiteStore, export_metaschedule, import_metaschedule
        >>> work_dir = tempfile.mkdtemp()
        >>> store = SQLiteStore(":memory:")
        >>> export_metaschedule(store, work_dir)
        0
        >>> import_metaschedule(store, work_dir)
        ImportSummary(run_ids=(), imported=0, unmatched=0, failed=0, duplicates=0)
    """
    path = check_work_dir(work_dir)
    ms_workloads, lines = _read(path)
    # Step 1. Candidates, explicit ones first; duplicates by key are tried once.
    runs = store.runs()
    described, described_targets = _read_sidecar(path)
    candidates = _unique([*workloads, *described, *(run.workload for run in runs)], Workload.key)
    known_targets = _unique(
        [*described_targets, *(run.target for run in runs), Target.local_cpu()], Target.key
    )
    match = _WorkloadMatcher(candidates, path)
    # Step 2. Parse, match and group records by (workload, target), keeping commit order.
    groups: dict[tuple[str, str], tuple[Workload, Target, list[NewTrial]]] = {}
    unmatched = failed = 0
    for lineno, line in lines:
        try:
            index, record = _read_record(line, ms_workloads)
        except Exception as exc:  # noqa: BLE001 - one bad line (e.g. truncated by a kill) must not hide others
            logger.warning("%s:%d: unreadable tuning record: %s", path / RECORD_FILE, lineno, exc)
            failed += 1
            continue
        workload = match(index, ms_workloads[index])
        record_target = target or _match_target(record.target, known_targets)
        if workload is None or record_target is None:
            unmatched += 1
            continue
        trial = NewTrial(
            candidate=Candidate(workload, record_target, _tvm.trace_to_json(record.trace)),
            result=_result(record, workload),
        )
        key = (workload.key(), record_target.key())
        groups.setdefault(key, (workload, record_target, []))[2].append(trial)
    # Step 3. Leave out what the store already holds (and repeats within the file).
    duplicates = sum(_drop_known(store, w, t, trials) for w, t, trials in groups.values())
    # Step 4. One run per group, in batches so a huge database is not one giant transaction.
    run_ids = [_store_run(store, w, t, trials, path) for w, t, trials in groups.values() if trials]
    imported = sum(len(trials) for _, _, trials in groups.values())
    return ImportSummary(tuple(run_ids), imported, unmatched, failed, duplicates)


def _read_record(line: str, ms_workloads: Sequence[Any]) -> tuple[int, Any]:
    """A line's workload index and MetaSchedule ``TuningRecord``.

    Raises:
        ValueError: the line is not a record, names an unreadable workload, or its trace does
            not apply to its workload.
    """
    index, record_json = _parse_record(line, len(ms_workloads))
    ms_workload = ms_workloads[index]
    if ms_workload is None:
        raise ValueError(f"its workload #{index} is unreadable")
    # from_json replays the trace in this process: a hostile trace could kill it (a zero tile
    # factor), or be "repaired" into another schedule, so check it first.
    check_trace_on_module(ms_workload.mod, record_json[0], name=f"MetaSchedule workload #{index}")
    try:
        return index, _tvm.ms.database.TuningRecord.from_json(record_json, ms_workload)
    except Exception as exc:  # TVM's text names its own types: say what failed first
        raise ValueError(f"TVM cannot read the record ({_message_line(exc)})") from exc


class _WorkloadMatcher:
    """The workload a MetaSchedule workload is, by index: one of the candidates, else a named
    shape of the catalog (built only when needed), else ``None`` (said once in the log)."""

    def __init__(self, candidates: list[Workload], path: Path) -> None:
        self.candidates, self.path = candidates, path
        self.matches: dict[int, Workload | None] = {}
        self.catalog: list[Workload] | None = None

    def __call__(self, index: int, ms_workload: Any) -> Workload | None:
        if index not in self.matches:
            found = _match_workload(ms_workload, self.candidates)
            if found is None:  # last resort: a named shape of the catalog
                self.catalog = _catalog() if self.catalog is None else self.catalog
                found = _match_workload(ms_workload, self.catalog)
            if found is None:
                logger.warning(
                    "%s: workload #%d matches none of %d candidate workloads; its records are "
                    "not imported",
                    self.path,
                    index,
                    len(self.candidates),
                )
            self.matches[index] = found
        return self.matches[index]


def _drop_known(
    store: RecordStore, workload: Workload, target: Target, trials: list[NewTrial]
) -> int:
    """Remove from ``trials`` those ``store`` holds already (same trace and timings) or that
    repeat an earlier one; returns how many were removed."""
    rows = store.trial_rows(workload=workload, target=target)
    seen = {(row.trace_hash, tuple(row.run_secs)) for row in rows}
    fresh = []
    for trial in trials:
        measured = (trace_hash(trial.candidate.trace), tuple(trial.result.run_secs))
        if measured not in seen:
            seen.add(measured)
            fresh.append(trial)
    removed = len(trials) - len(fresh)
    trials[:] = fresh
    return removed


def _store_run(
    store: RecordStore, workload: Workload, target: Target, trials: list[NewTrial], path: Path
) -> int:
    """One imported run holding ``trials``, stored in batches; returns its id."""
    run = store.create_run(
        workload,
        target,
        STRATEGY,
        settings={"work_dir": str(path.resolve())},
        environment={"source": "MetaSchedule JSONDatabase; measuring machine not recorded"},
    )
    for start in range(0, len(trials), _BATCH):
        store.add_trials(run.id, trials[start : start + _BATCH])
    store.finish_run(run.id)
    return run.id


def _parse_record(line: str, num_workloads: int) -> tuple[int, list[Any]]:
    """A record line's ``(workload index, record)``, checked enough that TVM never sees a shape
    it would answer with its internals; ``ValueError`` says in plain words what is wrong.

    A record is ``[trace, run_secs, target, args_info]``; ``run_secs`` is ``null`` (never
    measured) or a list of positive, finite seconds (``1e10`` is MetaSchedule's failure mark).
    """
    try:
        data = json.loads(line)
    except ValueError:
        raise ValueError("not valid JSON (truncated, or not a MetaSchedule record)") from None
    if not (isinstance(data, list) and len(data) == 2):
        raise ValueError("not a [workload index, record] pair")
    index, record = data
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"the workload index is not a whole number (got {index!r:.40})")
    if not 0 <= index < num_workloads:
        raise ValueError(
            f"workload #{index} is not in {WORKLOAD_FILE} (it has {num_workloads} workloads)"
        )
    if not (isinstance(record, list) and 2 <= len(record) <= 4):
        raise ValueError("the record is not a [trace, run_secs, target, args_info] list")
    run_secs = record[1]
    if run_secs is not None:
        if not isinstance(run_secs, list):
            raise ValueError(f"run_secs is not a list of seconds (got {run_secs!r:.40})")
        for secs in run_secs:
            is_number = isinstance(secs, (int, float)) and not isinstance(secs, bool)
            if not (is_number and math.isfinite(secs) and secs > 0):
                raise ValueError(
                    f"run_secs holds {secs!r:.40}, not a positive, finite number of seconds"
                )
    return index, record


def _message_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    with open(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                yield lineno, line


def _catalog() -> list[Workload]:
    """The catalog's named shapes (``presets()``): a plain MetaSchedule work_dir tuned on one of
    them imports even into an empty database."""
    return [get_workload(name) for name in presets()]


def _unique(items: Sequence[Any], key: Any) -> list[Any]:
    seen: dict[str, Any] = {}
    for item in items:
        seen.setdefault(key(item), item)
    return list(seen.values())


def _match_workload(ms_workload: Any, candidates: Sequence[Workload]) -> Workload | None:
    for workload in candidates:
        if _tvm.tvm_ffi.structural_equal(ms_workload.mod, workload.mod()):
            return workload
    return None


def _match_target(tvm_target: Any, known: Sequence[Target]) -> Target | None:
    if tvm_target is None:
        return None
    kind = str(tvm_target.kind.name)
    attrs = tvm_target.attrs
    spec: dict[str, Any] = {"kind": kind}
    if kind == "llvm":
        spec["num-cores"] = int(attrs["num-cores"]) if "num-cores" in attrs else 1
        if "mcpu" in attrs:
            spec["mcpu"] = str(attrs["mcpu"])
    elif kind == "cuda":
        spec["arch"] = str(attrs["arch"]) if "arch" in attrs else None
    for candidate in known:
        if candidate.to_tvm_dict() == spec:
            return candidate
    try:
        if kind == "cuda":
            return Target(kind="cuda", arch=spec["arch"])
        return Target(kind=kind, mcpu=spec.get("mcpu"), num_cores=spec.get("num-cores", 1))
    except TargetError as exc:
        logger.warning("MetaSchedule target %s cannot be described: %s", spec, exc)
        return None


def _result(record: Any, workload: Workload) -> MeasureResult:
    run_secs = tuple(float(x) for x in (record.run_secs or ()))
    if not run_secs or max(run_secs) >= MS_FAILURE_SECS:
        return MeasureResult(
            status=MeasureStatus.RUN_ERROR,
            error_msg="MetaSchedule recorded this candidate as failed (run_secs=1e10); "
            "its database keeps no error message",
            flops=workload.flops(),
        )
    return MeasureResult(
        status=MeasureStatus.UNCHECKED,
        run_secs=run_secs,
        error_msg=UNCHECKED_MSG,
        flops=workload.flops(),
    )
