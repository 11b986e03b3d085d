"""The record database's contract: runs (one search or one manual session) and their trials."""

from __future__ import annotations

import abc
import difflib
import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from explorer._process import ProcessIdentity
from explorer.core._candidate import Candidate, MeasureResult
from explorer.core._models import ModelRace, ModelRecord
from explorer.target import Target
from explorer.types import JSON, MeasureStatus

if TYPE_CHECKING:  # importing workloads imports TVM; the record types stay light without it
    from explorer.workloads import Workload


class RunStatus(str, Enum):
    """Where a run stands. A ``str`` enum: ``RunStatus.FINISHED == "finished"``.

    ``INTERRUPTED`` is either stored (Ctrl-C, SIGTERM) or read: a run stored as running whose
    owning process is gone (``kill -9``, a crash, a dead notebook kernel) reads as interrupted.
    Every status but ``RUNNING`` can be resumed.
    """

    RUNNING = "running"
    FINISHED = "finished"  # the budget was spent or the strategy ran dry
    CANCELLED = "cancelled"  # should_stop() asked for it between batches
    INTERRUPTED = "interrupted"  # Ctrl-C, SIGTERM or a dead owner
    FAILED = "failed"  # an error ended it

    def __str__(self) -> str:
        return self.value


REMOTE_STALE_SECS = 3600.0
"""A running run owned by a process on *another* host (whose pid cannot be checked from here)
counts as interrupted once its heartbeat is this old."""


MANUAL = "manual"
"""The strategy name of the runs that hold measurements made by hand (the editor's Measure,
``explorer measure --trace``)."""


@dataclass(frozen=True)
class RunInfo:
    """One search run, or the manual measurements of one session (strategy ``MANUAL``).

    ``owner`` is the process that holds the run while it is running (``None`` once it ended);
    ``heartbeat_at`` when that owner last said it was alive; ``active_secs`` the time spent
    searching over all the run's sessions. They describe liveness, not the run, and are left
    out of equality.
    """

    id: int
    workload: Workload
    target: Target
    strategy: str
    settings: Mapping[str, JSON]
    environment: Mapping[str, JSON]  # TVM version, CPU, commit, threads...
    started_at: float  # unix seconds
    ended_at: float | None = None
    status: RunStatus = RunStatus.RUNNING
    owner: ProcessIdentity | None = field(default=None, compare=False)
    heartbeat_at: float | None = field(default=None, compare=False)
    active_secs: float = field(default=0.0, compare=False)


def effective_status(
    stored: str, owner: ProcessIdentity | None, heartbeat_at: float | None
) -> RunStatus:
    """A stored status as it stands now: ``running`` with a dead (or no) owner is interrupted."""
    status = RunStatus(stored)
    if status is not RunStatus.RUNNING:
        return status
    if owner is None:  # written before owners were recorded (schema < 3): nobody holds it
        return RunStatus.INTERRUPTED
    alive = owner.is_alive()
    if alive is None:  # another host: trust the heartbeat while it is recent
        alive = heartbeat_at is not None and time.time() - heartbeat_at < REMOTE_STALE_SECS
    return RunStatus.RUNNING if alive else RunStatus.INTERRUPTED


@dataclass(frozen=True)
class NewTrial:
    """What a caller hands the store; the store adds id, run, sequence number and timestamp."""

    candidate: Candidate
    result: MeasureResult
    predicted: Mapping[str, float] = field(default_factory=dict)  # cost model name -> prediction
    is_remeasure: bool = False  # a re-timing of a schedule the run measured before, not a trial


@dataclass(frozen=True)
class TrialRecord:
    """A stored trial. Immutable: the store never rewrites one."""

    id: int
    run_id: int
    seq: int  # 0-based position within its run, in measurement order
    candidate: Candidate
    result: MeasureResult
    predicted: Mapping[str, float]
    created_at: float  # unix seconds, when the trial was stored
    is_remeasure: bool = False  # see NewTrial: not a trial of the search, not counted as one

    @property
    def status(self) -> MeasureStatus:
        return self.result.status

    @property
    def median_secs(self) -> float | None:
        return self.result.median_secs


@dataclass(frozen=True, slots=True)
class TrialRow:
    """A stored trial without its trace: what tables and plots read (``RecordStore.trial_rows``).

    A decoded trace is about 27 KB of Python objects, so 100k ``TrialRecord``\\ s take seconds
    and gigabytes; a row keeps the scalar columns and only a digest of the trace.

    Attributes:
        id, run_id, seq, created_at: as in ``TrialRecord``.
        status: the measurement's status.
        median_secs: the median of ``run_secs`` (``None`` without timings).
        run_secs: the timed repeats.
        predicted: cost model name -> predicted score (higher = faster).
        decisions: the candidate's knob decisions (JSON), ``None`` when it recorded none.
        trace_hash: ``trace_hash(candidate.trace)``: equal traces have equal hashes, so a trial
            that re-measures an earlier schedule is recognised without decoding either trace.
        is_remeasure: a re-timing of a schedule its run measured before (``NewTrial``).
        device: the fleet device that measured it (``MeasureResult.device``), ``None`` here.
    """

    id: int
    run_id: int
    seq: int
    status: MeasureStatus
    median_secs: float | None
    run_secs: tuple[float, ...]
    predicted: Mapping[str, float]
    decisions: JSON | None
    trace_hash: int
    created_at: float
    is_remeasure: bool = False
    device: str | None = None

    @property
    def is_ok(self) -> bool:
        return self.status is MeasureStatus.OK

    @classmethod
    def from_record(cls, record: TrialRecord) -> TrialRow:
        """The row of a decoded record (what ``trial_rows`` returns for it)."""
        result = record.result
        return cls(
            id=record.id,
            run_id=record.run_id,
            seq=record.seq,
            status=result.status,
            median_secs=result.median_secs,
            run_secs=tuple(result.run_secs),
            predicted=dict(record.predicted),
            decisions=record.candidate.decisions,
            trace_hash=trace_hash(record.candidate.trace),
            created_at=record.created_at,
            is_remeasure=record.is_remeasure,
            device=result.device,
        )


# The canonical text of a JSON value: sorted keys, no spaces (what ``trace_key`` returns for a
# decoded trace, and what the SQLite store writes), so a store can hash its stored text as is.
_CANONICAL = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def trace_hash(trace: JSON) -> int:
    """A 63-bit digest of a trace's canonical JSON text: equal traces, equal hashes.

    Example:
        >>> trace_hash([["a", 1]]) == trace_hash([["a", 1]]) != trace_hash([["a", 2]])
        True
    """
    return text_hash(_CANONICAL.encode(trace).encode())


def text_hash(canonical: bytes) -> int:
    """``trace_hash`` of a trace given as its canonical JSON text (UTF-8 bytes)."""
    # BLAKE2b: fast on long texts, and stable across processes (unlike hash()); 63 bits fit a
    # signed 64-bit column.
    return int.from_bytes(hashlib.blake2b(canonical, digest_size=8).digest(), "big") >> 1


@dataclass(frozen=True)
class BestSoFar:
    """The convergence curve of one run: after trial ``seq[i]`` (stored ``elapsed_secs[i]`` after
    the run started) the best median latency seen was ``best_secs[i]`` (``inf`` until a trial
    succeeds)."""

    run_id: int
    seq: tuple[int, ...]
    elapsed_secs: tuple[float, ...]
    best_secs: tuple[float, ...]


@dataclass(frozen=True)
class Rank:
    """Where a latency ranks among a workload's correct timings on a target (re-measurements
    not counted): ``position`` 1 is the fastest, ``best_secs`` the fastest known (``None``
    when there is none)."""

    position: int
    num_ok: int
    best_secs: float | None


S = TypeVar("S", bound="RecordStore")


class RecordStore(abc.ABC):
    """Where runs and trials live.

    Contract:
        * Thread-safe: any method may be called from any thread.
        * Append-only: trials are never modified or deleted; ``finish_run`` only sets a run's end
          time and status (and releases it), ``claim_run`` and ``heartbeat`` only its owner.
        * One owner per run: the process that created or claimed a run holds it until
          ``finish_run``; a run stored as running whose owner is gone reads as ``interrupted``.
        * ``add_trials`` is atomic: either every trial of the batch is stored or none is, so a
          process killed mid-batch loses at most that batch.
        * Ids are unique and increase in insertion order; ``seq`` increases within a run.
        * Returned objects are immutable snapshots.
        * Subscribers are called after each committed batch, on the thread that added it, with the
          new records; an exception in a subscriber is logged, never propagated to the writer.
    """

    # -- runs ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_run(
        self,
        workload: Workload,
        target: Target,
        strategy: str,
        *,
        settings: Mapping[str, JSON] | None = None,
        environment: Mapping[str, JSON] | None = None,
    ) -> RunInfo:
        """Start a run; ``environment`` defaults to ``explorer.storage.environment()``."""

    @abc.abstractmethod
    def finish_run(self, run_id: int, status: str = "finished") -> RunInfo:
        """Mark a run ended (``finished``, ``cancelled``, ``interrupted`` or ``failed``) and
        release it (its owner is cleared)."""

    @abc.abstractmethod
    def claim_run(self, run_id: int) -> RunInfo:
        """Make this process the owner of an ended (or interrupted) run, to resume it: the run
        is ``running`` again until ``finish_run``.

        Raises:
            KeyError: There is no such run.
            RunInUseError: Another live process owns it (one owner per run).
        """

    @abc.abstractmethod
    def heartbeat(self, run_id: int, active_secs: float) -> None:
        """The owner says it is alive, and how long the run has searched in all (seconds).

        Raises:
            RunInUseError: This process no longer owns the run.
        """

    @abc.abstractmethod
    def get_run(self, run_id: int) -> RunInfo:
        """The run with this id; ``KeyError`` when there is none."""

    @abc.abstractmethod
    def runs(
        self,
        *,
        workload: Workload | None = None,
        target: Target | None = None,
        strategy: str | None = None,
    ) -> list[RunInfo]:
        """Runs matching every given filter, oldest first."""

    # -- trials -------------------------------------------------------------------------------
    @abc.abstractmethod
    def add_trials(self, run_id: int, trials: Sequence[NewTrial]) -> list[TrialRecord]:
        """Store a batch atomically (one transaction) and return the stored records."""

    @abc.abstractmethod
    def get_trial(self, trial_id: int) -> TrialRecord:
        """The trial with this id; ``KeyError`` when there is none."""

    @abc.abstractmethod
    def trials(
        self,
        *,
        run_id: int | None = None,
        workload: Workload | None = None,
        target: Target | None = None,
        status: MeasureStatus | None = None,
        limit: int | None = None,
    ) -> list[TrialRecord]:
        """Trials matching every given filter, in insertion order (predictions included)."""

    def trial_rows(
        self,
        *,
        run_id: int | None = None,
        workload: Workload | None = None,
        target: Target | None = None,
        status: MeasureStatus | None = None,
    ) -> list[TrialRow]:
        """``trials(...)`` without decoding traces: one ``TrialRow`` per matching trial, in
        insertion order.

        The default decodes full records; a store that can read the columns alone (the SQLite
        store does) should override it: a dashboard's first load reads every row.
        """
        records = self.trials(run_id=run_id, workload=workload, target=target, status=status)
        return [TrialRow.from_record(r) for r in records]

    @abc.abstractmethod
    def count_trials(self, *, run_id: int | None = None, remeasures: bool = True) -> int:
        """How many trials are stored (in one run, or in all); with ``remeasures=False`` the
        re-measurements are not counted (what a run's trial budget counts)."""

    @abc.abstractmethod
    def best(self, workload: Workload, target: Target, k: int = 1) -> list[TrialRecord]:
        """The ``k`` fastest successful trials of a workload on a target, fastest first."""

    def measurements_of(self, candidate: Candidate) -> list[TrialRecord]:
        """Every stored measurement of exactly this schedule (workload, target and trace),
        oldest first: what a front end shows for a schedule it displays."""
        mine = trace_hash(candidate.trace)
        return [
            r
            for r in self.trials(workload=candidate.workload, target=candidate.target)
            if trace_hash(r.candidate.trace) == mine
        ]

    def rank(self, workload: Workload, target: Target, secs: float | None) -> Rank:
        """Where ``secs`` ranks among this workload's correct timings on ``target``.

        The default reads the rows (no trace decoded); a store that can count in place should
        override it (the SQLite store does, along its ``trials_best`` index).
        """
        rows = self.trial_rows(workload=workload, target=target, status=MeasureStatus.OK)
        times = [r.median_secs for r in rows if r.median_secs is not None and not r.is_remeasure]
        faster = sum(t < secs for t in times) if secs is not None else len(times)
        return Rank(1 + faster, len(times), min(times, default=None))

    def rank_of(self, record: TrialRecord) -> Rank:
        """Where a stored measurement ranks among its workload's correct timings on its
        target (``rank``), itself counted once: a re-timing or a baseline, which ``rank``
        leaves out, is added, so a correct measurement is never "the fastest of 0".

        Raises ``ValueError`` for a measurement that is not correct (it has no rank).
        """
        if not record.result.is_ok or record.median_secs is None:
            raise ValueError(f"trial {record.id} is {record.status.value}: it has no rank")
        candidate = record.candidate
        rank = self.rank(candidate.workload, candidate.target, record.median_secs)
        if not record.is_remeasure:
            return rank  # counted by ``rank`` already
        best = min(record.median_secs, rank.best_secs or math.inf)
        return Rank(rank.position, rank.num_ok + 1, best)

    @abc.abstractmethod
    def best_so_far(self, run_id: int) -> BestSoFar:
        """The convergence curve of a run."""

    # -- models -------------------------------------------------------------------------------
    # An imported model (explorer.model), stored with its ONNX file (so that any process on the
    # database can build the network), the runs that tuned its tasks and its races.
    @abc.abstractmethod
    def add_model(self, model: ModelRecord, source: bytes) -> ModelRecord:
        """Store an imported model and its ONNX file's bytes (``model.id`` is ignored); returns
        it with its id.

        A model of the same name and the same source file is returned as stored, not added
        again. Raises ``StoreError`` when another source is stored under that name.
        """

    @abc.abstractmethod
    def models(self) -> list[ModelRecord]:
        """Every stored model, oldest first."""

    @abc.abstractmethod
    def model_source(self, model_id: int) -> bytes:
        """The ONNX file a model was imported from; ``KeyError`` for an unknown id."""

    @abc.abstractmethod
    def link_model_run(self, model_id: int, run_id: int, task: str, tune: str) -> None:
        """Record that run ``run_id`` tuned the model's task ``task`` for the model tune
        ``tune`` (a name such as ``evolutionary/seed0/gradient``)."""

    @abc.abstractmethod
    def model_runs(self, model_id: int) -> list[tuple[int, str, str]]:
        """(run id, task, tune) of every run linked to the model, in the order linked."""

    @abc.abstractmethod
    def add_model_race(self, race: ModelRace) -> ModelRace:
        """Store a race (``race.id`` is ignored); returns it with its id."""

    @abc.abstractmethod
    def model_races(self, model_id: int) -> list[ModelRace]:
        """Every race of the model, oldest first."""

    def get_model(self, name_or_id: str | int) -> ModelRecord:
        """The model of that name (or id); ``KeyError`` naming the models there are."""
        stored = self.models()
        for model in stored:
            if name_or_id in (model.name, model.id, str(model.id)):
                return model
        names = ", ".join(m.name for m in stored) or "none yet: `explorer model import FILE`"
        close = difflib.get_close_matches(str(name_or_id), [m.name for m in stored], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise KeyError(f"no model {name_or_id!r} in this database (models: {names}){hint}")

    # -- events and lifetime ------------------------------------------------------------------
    @abc.abstractmethod
    def subscribe(self, callback: Callable[[list[TrialRecord]], None]) -> Callable[[], None]:
        """Call ``callback`` with every committed batch; returns a function that unsubscribes."""

    def close(self) -> None:  # noqa: B027  (optional hook)
        """Release the connection(s)."""

    def __enter__(self: S) -> S:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
