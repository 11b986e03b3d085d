"""A model's tasks before and after tuning, and its races against trials spent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from explorer.core import ModelRace, ModelRecord
from explorer.model import busy_note, speed_note

ONNXRUNTIME, TUNED, TUNE_RELAX, UNTUNED = "onnxruntime", "tuned", "tune_relax", "untuned"


@dataclass(frozen=True)
class TaskTimeInfo:
    """One task's share of a network: its time per inference (its time times its weight)
    untuned and at its best so far (``None``: not tuned yet)."""

    name: str
    weight: int
    untuned_ms: float | None
    tuned_ms: float | None

    @property
    def untuned_kept(self) -> bool:
        """Tuned, but no faster than untuned: the network keeps the default schedule (as
        ``explorer.model.untuned_kept`` decides for a race's build)."""
        return (
            self.tuned_ms is not None
            and self.untuned_ms is not None
            and self.tuned_ms >= self.untuned_ms
        )

    @property
    def best_ms(self) -> float | None:
        """What the task costs now: its best if tuned and faster than untuned, else its
        untuned time."""
        if self.tuned_ms is None or self.untuned_kept:
            return self.untuned_ms
        return self.tuned_ms


@dataclass(frozen=True)
class ModelTimesInfo:
    """Every task, costliest now first: what still dominates after tuning."""

    model: str
    tasks: tuple[TaskTimeInfo, ...]

    @property
    def untuned_ms(self) -> float:
        return sum(t.untuned_ms or 0.0 for t in self.tasks)

    @property
    def tuned_ms(self) -> float:
        return sum(t.best_ms or 0.0 for t in self.tasks)


def model_times_info(model: ModelRecord, best_secs: Mapping[str, float]) -> ModelTimesInfo:
    """``best_secs``: each tuned task's best time per call, by task name, taken as the
    untuned time is (``explorer.model.best_times``: the fastest repeat)."""
    tasks = []
    for task in model.tasks:
        best = best_secs.get(task.name)
        tasks.append(
            TaskTimeInfo(
                task.name, task.weight,
                None if task.untuned_secs is None else task.untuned_secs * task.weight * 1e3,
                None if best is None else best * task.weight * 1e3,
            )
        )  # fmt: skip
    tasks.sort(key=lambda t: -(t.best_ms or 0.0))
    return ModelTimesInfo(model.name, tuple(tasks))


@dataclass(frozen=True)
class RacePoint:
    """A race's tuned network: trials spent, its latency, and ONNX Runtime's and the untuned
    build's in the same race (``None`` where they failed or were not run)."""

    race_id: int
    trials: int
    tuned_ms: float | None
    onnxruntime_ms: float | None
    untuned_ms: float | None
    tune_relax_ms: float | None = None
    busy: str | None = None  # the race's ``busy_note``: read on a busy machine
    slow: str | None = None  # its ``speed_note``: read while the machine ran slow


@dataclass(frozen=True)
class ModelRaceInfo:
    """Races by tune (``"database"``: the best of every task in the database), in order."""

    model: str
    series: tuple[tuple[str, tuple[RacePoint, ...]], ...]

    @property
    def latest(self) -> RacePoint | None:
        points = [p for _, pts in self.series for p in pts]
        return max(points, key=lambda p: p.race_id) if points else None


def model_race_info(model: ModelRecord, races: Sequence[ModelRace]) -> ModelRaceInfo:
    by_tune: dict[str, list[RacePoint]] = {}
    for race in sorted(races, key=lambda r: r.id):

        def ms(name: str, race: ModelRace = race) -> float | None:
            entry = race.entry(name)
            secs = None if entry is None or entry.error else entry.fastest_secs
            return None if secs is None else secs * 1e3

        point = RacePoint(
            race.id, race.trials, ms(TUNED), ms(ONNXRUNTIME), ms(UNTUNED), ms(TUNE_RELAX),
            busy_note(race), speed_note(race, races),
        )  # fmt: skip
        by_tune.setdefault(race.tune or "database", []).append(point)
    return ModelRaceInfo(model.name, tuple((k, tuple(v)) for k, v in by_tune.items()))
