"""The record database's contract: runs (one search or one manual session) and their trials."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from explorer.measure._base import Candidate, MeasureResult
from explorer.target import Target
from explorer.types import JSON, MeasureStatus
from explorer.workloads import Workload


@dataclass(frozen=True)
class RunInfo:
    """One search run, or the manual measurements of one session (strategy ``"manual"``)."""

    id: int
    workload: Workload
    target: Target
    strategy: str
    settings: Mapping[str, JSON]
    environment: Mapping[str, JSON]  # TVM version, CPU, commit, threads...
    started_at: float  # unix seconds
    ended_at: float | None = None
    status: str = "running"  # running | finished | cancelled | failed


@dataclass(frozen=True)
class NewTrial:
    """What a caller hands the store; the store adds id, run, sequence number and timestamp."""

    candidate: Candidate
    result: MeasureResult
    predicted: Mapping[str, float] = field(default_factory=dict)  # cost model name -> prediction


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

    @property
    def status(self) -> MeasureStatus:
        return self.result.status

    @property
    def median_secs(self) -> float | None:
        return self.result.median_secs


@dataclass(frozen=True)
class BestSoFar:
    """The convergence curve of one run: after trial ``seq[i]`` (stored ``elapsed_secs[i]`` after
    the run started) the best median latency seen was ``best_secs[i]`` (``inf`` until a trial
    succeeds)."""

    run_id: int
    seq: tuple[int, ...]
    elapsed_secs: tuple[float, ...]
    best_secs: tuple[float, ...]


class RecordStore(abc.ABC):
    """Where runs and trials live.

    Contract:
        * Thread-safe: any method may be called from any thread.
        * Append-only: trials are never modified or deleted; ``finish_run`` only sets a run's end
          time and status.
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
        """Mark a run ended (``finished``, ``cancelled`` or ``failed``)."""

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

    @abc.abstractmethod
    def count_trials(self, *, run_id: int | None = None) -> int:
        """How many trials are stored (in one run, or in all)."""

    @abc.abstractmethod
    def best(self, workload: Workload, target: Target, k: int = 1) -> list[TrialRecord]:
        """The ``k`` fastest successful trials of a workload on a target, fastest first."""

    @abc.abstractmethod
    def best_so_far(self, run_id: int) -> BestSoFar:
        """The convergence curve of a run."""

    # -- events and lifetime ------------------------------------------------------------------
    @abc.abstractmethod
    def subscribe(self, callback: Callable[[list[TrialRecord]], None]) -> Callable[[], None]:
        """Call ``callback`` with every committed batch; returns a function that unsubscribes."""

    def close(self) -> None:  # noqa: B027  (optional hook)
        """Release the connection(s)."""

    def __enter__(self) -> RecordStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
