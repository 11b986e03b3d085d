"""``Recording``: the measurements a database holds of one workload on one target, replayed.

A recording answers for the schedules it holds and for nothing else: a race on it searches the
recorded schedules (``DesignSpace.within`` their knob-space points), so no strategy can ask for
a schedule the recording lacks, and no timing is ever invented. How much of the whole space it
covers is part of what it says (``coverage``): a race on 240 schedules of a 600 000-point space
compares how strategies pick among those 240, which is not how they would walk the whole space.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from explorer._process import owned_temp_dir
from explorer.core import Candidate, MeasureResult, trace_key
from explorer.errors import ExplorerError
from explorer.measure import ReplayMeasurer
from explorer.space import DesignSpace, KnobSpace, Point
from explorer.storage import RecordStore, get_store
from explorer.target import Target
from explorer.text import share
from explorer.workloads import Workload

EXAMPLE = Path(__file__).with_name("data") / "softmax_64x256.db"
"""The recording shipped with the explorer (``example_recording``)."""

REPLAYED_FROM = "replayed_from"
"""The run-environment key that marks a run as replayed (its value: the recording's source)."""


@dataclass(frozen=True)
class RecordedWorkload:
    """A workload and target a database holds measurements of (``recordings_in``)."""

    workload: Workload
    target: Target
    num_trials: int


def recordings_in(store: RecordStore) -> list[RecordedWorkload]:
    """Every workload and target ``store`` holds trials of, most trials first (what a race
    could replay; ``Recording`` says how many are knob-space schedules)."""
    counts: dict[tuple[Workload, Target], int] = {}
    for run in store.runs():
        if run.environment.get(REPLAYED_FROM):  # answered from a recording, not measured
            continue
        n = store.count_trials(run_id=run.id, remeasures=False)
        if n:
            pair = (run.workload, run.target)
            counts[pair] = counts.get(pair, 0) + n
    pairs = sorted(counts.items(), key=lambda item: (-item[1], item[0][0].key()))
    return [RecordedWorkload(w, t, n) for (w, t), n in pairs]


class Recording:
    """The measurements of ``workload`` on ``target`` in ``store``, to race strategies on.

    Only measured schedules that are points of the knob space take part (every strategy's
    schedules are; a hand-made or imported schedule is not, nor a replayed run's); a schedule
    measured several times answers with its first correct measurement.

    Args:
        store: the database to read (only read).
        workload: the workload to replay.
        target: the target it was measured on; ``None``: the only one the store has for it.
        source: how to name the database in what a race prints and stores.

    Raises:
        ExplorerError: the store holds no knob-space schedule of the workload (on the target),
            or holds it on several targets and none was named.
    """

    def __init__(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target | None = None,
        *,
        source: str = "the database",
    ) -> None:
        runs = store.runs(workload=workload, target=target)
        replayed = {r.id for r in runs if r.environment.get(REPLAYED_FROM)}
        trials = [
            t
            for t in store.trials(workload=workload, target=target)
            if t.candidate.workload == workload and t.run_id not in replayed
        ]
        targets = sorted({t.candidate.target for t in trials}, key=lambda t: t.key())
        if target is None and len(targets) > 1:
            names = ", ".join(str(t) for t in targets)
            raise ExplorerError(
                f"the database holds {workload.key()} on {len(targets)} targets ({names}): "
                "name the one to replay"
            )
        if not targets:
            raise ExplorerError(f"the database holds no measurement of {workload.key()}")
        self._setup(workload, targets[0], [(t.candidate, t.result) for t in trials], source)

    def _setup(
        self,
        workload: Workload,
        target: Target,
        measured: Sequence[tuple[Candidate, MeasureResult]],
        source: str,
    ) -> None:
        self.workload = workload
        self.target = target
        self.source = source
        self._space = KnobSpace.of(workload, target)
        self._by_point: dict[Point, tuple[Candidate, MeasureResult]] = {}
        for candidate, result in measured:
            point = self._space.point_of_candidate(candidate)
            if point is None:
                continue
            kept = self._by_point.get(point)
            if kept is None or (result.is_ok and not kept[1].is_ok):
                self._by_point[point] = (candidate, result)
        if not self._by_point:
            raise ExplorerError(
                f"the database's {len(measured)} measurement(s) of {workload.key()} hold no "
                "schedule a search proposes (hand-made or imported ones cannot be raced on)"
            )
        self._by_trace = {trace_key(c.trace): r for c, r in self._by_point.values()}

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to a race's worker processes: the recorded pairs, not the TVM objects.
        pairs = tuple(self._by_point.values())
        return _rebuilt, (self.workload, self.target, pairs, self.source)

    @property
    def points(self) -> tuple[Point, ...]:
        return tuple(sorted(self._by_point, key=lambda p: (p.sketch, p.indices)))

    @property
    def num_schedules(self) -> int:
        return len(self._by_point)

    @property
    def space_size(self) -> int:
        """Points in the workload's whole knob space."""
        return self._space.size()

    @property
    def coverage(self) -> float:
        """The share of the whole knob space the recording holds."""
        return self.num_schedules / self.space_size

    @property
    def best_secs(self) -> float | None:
        """The fastest correct recorded schedule's median latency."""
        times = [r.median_secs for _c, r in self._by_point.values() if r.is_ok]
        return min((s for s in times if s), default=None)

    def lookup(self, candidate: Candidate) -> MeasureResult | None:
        """The recorded result of ``candidate``, found by its trace, else by its knob-space
        point (MetaSchedule rebuilds a point's schedule through its own path, and its trace
        text differs although the program is the same); ``None`` when not recorded."""
        found = self._by_trace.get(trace_key(candidate.trace))
        if found is not None:
            return found
        point = self._space.point_of_candidate(candidate)
        pair = self._by_point.get(point) if point is not None else None
        return pair[1] if pair is not None else None

    def measurer(self) -> ReplayMeasurer:
        """A measurer that answers from this recording (runs are marked ``REPLAYED_FROM``)."""
        return _RecordingMeasurer(self)

    def space(self) -> DesignSpace:
        """The workload's design space within the recorded schedules."""
        return DesignSpace.of(self.workload, self.target).within(
            (p.sketch, p.indices) for p in self.points
        )

    def describe(self) -> str:
        """One sentence: what it holds, and how much of the space that is."""
        best = self.best_secs
        fastest = f", the fastest {best * 1e3:.4g} ms" if best else ""
        return (
            f"{self.num_schedules} recorded schedules of {self.workload.key()} on "
            f"{self.target}{fastest} ({share(self.coverage)} of its {self.space_size} "
            f"knob-space points), from {self.source}"
        )


def _rebuilt(
    workload: Workload,
    target: Target,
    measured: Sequence[tuple[Candidate, MeasureResult]],
    source: str,
) -> Recording:
    recording = Recording.__new__(Recording)
    recording._setup(workload, target, measured, source)
    return recording


class _RecordingMeasurer(ReplayMeasurer):
    def __init__(self, recording: Recording) -> None:
        super().__init__(recording.lookup)
        self.recording = recording

    def run_environment(self, target: Target) -> dict[str, Any]:
        return {REPLAYED_FROM: self.recording.source}


def open_copy(path: str | Path, directory: str | Path | None = None) -> RecordStore:
    """A private, writable copy of the database ``path`` (a shipped file is never opened for
    writing), in ``directory``, or else in a temporary folder removed when this process
    exits."""
    if directory is None:
        # named after this process: a kernel killed before its exit handlers ran leaves the
        # copy behind, and the next copy made on this machine removes it
        directory = owned_temp_dir("explorer-replay-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
    copy = Path(directory) / Path(path).name
    # Copied by SQLite, not as a file: closing a descriptor of a database that this process
    # has open would drop SQLite's locks on it. ``immutable``: the shipped file never changes,
    # so reading it takes no lock and leaves no -wal or -shm beside it.
    with (
        contextlib.closing(
            sqlite3.connect(f"{Path(path).resolve().as_uri()}?immutable=1", uri=True)
        ) as source,
        contextlib.closing(sqlite3.connect(copy)) as dest,
    ):
        source.backup(dest)
    return get_store(copy)


def example_recording(directory: str | Path | None = None) -> Recording:
    """The recording shipped with the explorer: every schedule of softmax 64x256's knob space,
    measured once on a 2-core AMD EPYC (``docs/replay.md``), read from a private copy."""
    from explorer.workloads import get_workload

    store = open_copy(EXAMPLE, directory)
    try:
        return Recording(
            store, get_workload("softmax", M=64, N=256), source="the shipped softmax recording"
        )
    finally:
        store.close()
