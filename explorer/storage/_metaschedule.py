"""MetaSchedule's ``JSONDatabase`` as an import and export format.

A MetaSchedule work_dir holds ``database_workload.json`` (one IRModule per line) and
``database_tuning_record.json`` (one ``[workload_index, record]`` per line, in commit order). Our
trials become ``TuningRecord``s and back: the trace is the unit exchanged, the IR is never stored
in our database.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer import _tvm
from explorer.errors import StoreError, TargetError
from explorer.measure._base import Candidate, MeasureResult
from explorer.storage._base import NewTrial, RecordStore
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload

logger = logging.getLogger(__name__)

MS_FAILURE_SECS = 1e10
"""What MetaSchedule stores as ``run_secs`` for a candidate that failed to build or run."""

STRATEGY = "metaschedule-import"
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
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

    Only successful trials are exported by default: MetaSchedule treats every record as a valid
    schedule and keeps no error message, so a failure could only be written as the ``1e10``
    sentinel it uses itself. ``include_failed=True`` does exactly that (useful to stop
    MetaSchedule re-measuring known-bad schedules); failed trials whose trace does not even replay
    are skipped then. ``WRONG_RESULT`` trials are failures here: their timings are not usable.

    Records are appended in our insertion order; an existing database in ``work_dir`` is appended
    to, as ``JSONDatabase`` itself does.

    Args:
        store: The source.
        work_dir: The MetaSchedule work directory (created if missing).
        run_id: Only this run's trials.
        workload: Only trials of this workload.
        target: Only trials on this target.
        include_failed: Export failures with ``run_secs=[1e10]`` instead of skipping them.

    Returns:
        How many tuning records were written.

    Raises:
        StoreError: A successful trial's trace no longer replays on its workload.
    """
    ms = _tvm.ms
    trials = store.trials(run_id=run_id, workload=workload, target=target)
    path = Path(work_dir)
    path.mkdir(parents=True, exist_ok=True)
    database = ms.database.JSONDatabase(work_dir=str(path))
    entries: dict[str, tuple[Any, Any]] = {}  # workload key -> (MS Workload, args_info)
    tvm_targets: dict[str, Any] = {}
    written = 0
    for trial in trials:
        result, cand = trial.result, trial.candidate
        is_ok = result.is_ok and bool(result.run_secs)
        if not is_ok and not include_failed:
            continue
        key = cand.workload.key()
        if key not in entries:
            mod = cand.workload.mod()
            entries[key] = (
                database.commit_workload(mod),
                ms.arg_info.ArgInfo.from_prim_func(mod["main"]),
            )
        entry, args_info = entries[key]
        sch = _tvm.Schedule(cand.workload.mod())
        try:
            _tvm.apply_trace_json(cand.trace, sch)
        except Exception as exc:
            if is_ok:
                raise StoreError(
                    f"trial {trial.id}: its trace no longer replays on {key}: {exc}"
                ) from exc
            logger.debug("trial %d: failed trace does not replay; not exported", trial.id)
            continue
        target_key = cand.target.key()
        if target_key not in tvm_targets:
            tvm_targets[target_key] = cand.target.to_tvm()
        database.commit_tuning_record(
            ms.database.TuningRecord(
                sch.trace,
                entry,
                # TuningRecord keeps each value as a FloatImm holding a double: no precision lost.
                run_secs=[float(x) for x in result.run_secs] if is_ok else [MS_FAILURE_SECS],
                target=tvm_targets[target_key],
                args_info=args_info,
            )
        )
        written += 1
    return written


def _read(path: Path) -> tuple[list[Any], list[tuple[int, str]]]:
    """The MetaSchedule workloads (``None`` where a line is unreadable) and the raw record lines
    as ``(lineno, line)``, in commit order.

    ``JSONDatabase.get_all_tuning_records()`` sorts by latency, which loses the order a search
    measured in, so the files are parsed directly.
    """
    for name in (WORKLOAD_FILE, RECORD_FILE):
        if not (path / name).is_file():
            raise StoreError(f"{path} is not a MetaSchedule JSON database (no {name})")
    workloads: list[Any] = []
    for lineno, line in _lines(path / WORKLOAD_FILE):
        try:
            workloads.append(_tvm.ms.database.Workload.from_json(json.loads(line)))
        except Exception as exc:  # one bad line must not hide the others
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
    given ``workloads`` and those of the runs already in ``store``. Records of unmatched workloads
    and unreadable records are counted in the summary and logged, never silently dropped.
    Records are stored in commit order, so a run's ``seq`` is MetaSchedule's measurement order;
    MetaSchedule's failures (``run_secs`` of ``1e10``) become ``RUN_ERROR`` trials. Importing the
    same work_dir twice stores its records twice.

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
        StoreError: ``work_dir`` holds no MetaSchedule JSON database.

    Example:
        >>> import tempfile
        >>> from explorer.storage import SQLiteStore, export_metaschedule, import_metaschedule
        >>> work_dir = tempfile.mkdtemp()
        >>> store = SQLiteStore(":memory:")
        >>> export_metaschedule(store, work_dir)
        0
        >>> import_metaschedule(store, work_dir)
        ImportSummary(run_ids=(), imported=0, unmatched=0, failed=0)
    """
    ms = _tvm.ms
    path = Path(work_dir)
    ms_workloads, lines = _read(path)
    # Step 1. Candidates, explicit ones first; duplicates by key are tried once.
    runs = store.runs()
    candidates = _unique([*workloads, *(run.workload for run in runs)], Workload.key)
    known_targets = _unique([*(run.target for run in runs), Target.local_cpu()], Target.key)
    matches: dict[int, Workload | None] = {}
    # Step 2. Parse, match and group records by (workload, target), keeping commit order.
    groups: dict[tuple[str, str], tuple[Workload, Target, list[NewTrial]]] = {}
    unmatched = failed = 0
    for lineno, line in lines:
        try:
            index, record_json = json.loads(line)
            ms_workload = ms_workloads[index]
            if ms_workload is None:
                raise ValueError(f"its workload #{index} is unreadable")
            # from_json replays the trace on the workload, so a bad trace fails here.
            record = ms.database.TuningRecord.from_json(record_json, ms_workload)
        except Exception as exc:  # one bad line (e.g. truncated by a kill) must not hide others
            logger.warning("%s:%d: unreadable tuning record: %s", path / RECORD_FILE, lineno, exc)
            failed += 1
            continue
        if index not in matches:
            matches[index] = _match_workload(ms_workload, candidates)
            if matches[index] is None:
                logger.warning(
                    "%s: workload #%d matches none of %d candidate workloads; its records are "
                    "not imported",
                    path,
                    index,
                    len(candidates),
                )
        workload = matches[index]
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
    # Step 3. One run per group, in batches so a huge database is not one giant transaction.
    run_ids = []
    settings = {"work_dir": str(path.resolve())}
    for workload, record_target, trials in groups.values():
        run = store.create_run(
            workload,
            record_target,
            STRATEGY,
            settings=settings,
            environment={"source": "MetaSchedule JSONDatabase; measuring machine not recorded"},
        )
        for start in range(0, len(trials), _BATCH):
            store.add_trials(run.id, trials[start : start + _BATCH])
        store.finish_run(run.id)
        run_ids.append(run.id)
    imported = sum(len(trials) for _, _, trials in groups.values())
    return ImportSummary(tuple(run_ids), imported, unmatched, failed)


def _lines(path: Path) -> Iterable[tuple[int, str]]:
    with open(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                yield lineno, line


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
    return MeasureResult(status=MeasureStatus.OK, run_secs=run_secs, flops=workload.flops())
