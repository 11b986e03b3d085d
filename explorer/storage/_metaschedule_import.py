"""MetaSchedule's ``JSONDatabase`` read into new runs (``import_metaschedule``); the format and
its export are ``explorer.storage._metaschedule``'s."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Sequence
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
from explorer.errors import TargetError
from explorer.session import check_trace_on_module
from explorer.storage._metaschedule import (
    MS_FAILURE_SECS,
    RECORD_FILE,
    WORKLOAD_FILE,
    _read,
    _read_sidecar,
    check_work_dir,
)
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload, get_workload, presets

logger = logging.getLogger(__name__)

STRATEGY = "metaschedule-import"
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
    candidates, known_targets = _candidates(store, path, workloads)
    match = _WorkloadMatcher(candidates, path)
    # Step 1. Parse, match and group records by (workload, target), keeping commit order.
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
    # Step 2. Leave out what the store already holds (and repeats within the file).
    duplicates = sum(_drop_known(store, w, t, trials) for w, t, trials in groups.values())
    # Step 3. One run per group, in batches so a huge database is not one giant transaction.
    run_ids = [_store_run(store, w, t, trials, path) for w, t, trials in groups.values() if trials]
    imported = sum(len(trials) for _, _, trials in groups.values())
    return ImportSummary(tuple(run_ids), imported, unmatched, failed, duplicates)


def _candidates(
    store: RecordStore, path: Path, workloads: Iterable[Workload]
) -> tuple[list[Workload], list[Target]]:
    """The workloads and targets a record may match: the given workloads first, then the
    work_dir's sidecar's, then the store's runs' (each key tried once)."""
    runs = store.runs()
    described, described_targets = _read_sidecar(path)
    candidates = _unique([*workloads, *described, *(run.workload for run in runs)], Workload.key)
    known_targets = _unique(
        [*described_targets, *(run.target for run in runs), Target.local_cpu()], Target.key
    )
    return candidates, known_targets


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
