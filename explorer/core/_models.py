"""What the database keeps of an imported model: its inputs and its tasks, each a workload of
the ``task`` family with its weight and its time untuned."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from explorer.target import Target
from explorer.types import CacheFlush

if TYPE_CHECKING:  # importing workloads imports TVM; the record types stay light without it
    from explorer.workloads import Workload


@dataclass(frozen=True)
class ModelInput:
    """One input of a model: its name, static shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.name}={'x'.join(map(str, self.shape))} ({self.dtype})"


@dataclass(frozen=True)
class ModelTask:
    """One fused TIR function of a model.

    ``weight``: how many times one inference calls it. ``untuned_secs``: one call of its
    unscheduled program timed on import (``None``: it could not be timed; ``error`` says why).
    ``untuned_busy``: the share of the CPUs (0 to 1) other processes used while the import
    timed the tasks (``None``: not watched, as on a fleet device or before it was recorded).
    ``untuned_flush``: the protocol ``untuned_secs`` was timed under (``NONE`` in models
    imported before it was recorded, which all were timed so).
    """

    name: str
    workload: Workload
    weight: int
    flops: int
    untuned_secs: float | None
    error: str | None = None
    untuned_busy: float | None = None
    untuned_flush: CacheFlush = CacheFlush.NONE

    @property
    def untuned_total_secs(self) -> float | None:
        """What the task costs one inference, untuned (its time times its weight)."""
        return None if self.untuned_secs is None else self.untuned_secs * self.weight

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "workload": self.workload.to_json(),
            "weight": self.weight,
            "flops": self.flops,
            "untuned_secs": self.untuned_secs,
            "error": self.error,
            "untuned_busy": self.untuned_busy,
            "untuned_flush": self.untuned_flush.value,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> ModelTask:
        from explorer.workloads import Workload

        return ModelTask(
            name=str(data["name"]),
            workload=Workload.from_json(data["workload"]),
            weight=int(data["weight"]),
            flops=int(data["flops"]),
            untuned_secs=None if data["untuned_secs"] is None else float(data["untuned_secs"]),
            error=data.get("error"),
            untuned_busy=None if data.get("untuned_busy") is None else float(data["untuned_busy"]),
            untuned_flush=CacheFlush(data.get("untuned_flush") or CacheFlush.NONE),
        )


@dataclass(frozen=True)
class ModelRecord:
    """An imported model as stored: ``id`` is 0 until a store gives it one.

    ``source_sha256`` is the digest of the ONNX file's bytes: importing the same file again
    finds this record instead of adding another.
    """

    id: int
    name: str
    source_sha256: str
    inputs: tuple[ModelInput, ...]
    tasks: tuple[ModelTask, ...]
    target: Target
    created_at: float

    def share(self, task: ModelTask) -> float | None:
        """The task's share of the untuned network's time (``None`` when a task was not timed)."""
        totals = [t.untuned_total_secs for t in self.tasks]
        if task.untuned_total_secs is None or any(t is None for t in totals):
            return None
        whole = math.fsum(t for t in totals if t is not None)
        return task.untuned_total_secs / whole if whole > 0 else None

    def task(self, name: str) -> ModelTask:
        """The task called ``name``; ``KeyError`` naming the tasks there are."""
        for t in self.tasks:
            if t.name == name:
                return t
        raise KeyError(
            f"model {self.name!r} has no task {name!r} (its tasks: "
            f"{', '.join(t.name for t in self.tasks)})"
        )

    def inputs_json(self) -> str:
        return json.dumps([[i.name, list(i.shape), i.dtype] for i in self.inputs])

    def tasks_json(self) -> str:
        return json.dumps([t.to_json() for t in self.tasks], sort_keys=True)

    @staticmethod
    def decode_inputs(text: str) -> tuple[ModelInput, ...]:
        return tuple(
            ModelInput(str(name), tuple(int(d) for d in shape), str(dtype))
            for name, shape, dtype in json.loads(text)
        )

    @staticmethod
    def decode_tasks(text: str) -> tuple[ModelTask, ...]:
        return tuple(ModelTask.from_json(t) for t in json.loads(text))


@dataclass(frozen=True)
class RaceEntry:
    """One contender of a model race: the network built one way (``untuned``, ``tuned``,
    ``tune_relax``) or ONNX Runtime. ``round_secs``: its fastest call in each interleaved
    round; ``max_error``: its largest difference from ONNX Runtime's output, relative to the
    largest output (``None`` for ONNX Runtime, the reference); ``error``: why it could not run
    (then nothing was timed)."""

    name: str
    round_secs: tuple[float, ...]
    max_error: float | None = None
    error: str | None = None

    @property
    def fastest_secs(self) -> float | None:
        return min(self.round_secs) if self.round_secs else None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "round_secs": list(self.round_secs),
                "max_error": self.max_error, "error": self.error}  # fmt: skip

    @staticmethod
    def from_json(data: dict[str, Any]) -> RaceEntry:
        # races stored before 2026-12-03 compared ONNX Runtime with itself (0.0)
        error = None if data["name"] == "onnxruntime" else data.get("max_error")
        return RaceEntry(
            str(data["name"]), tuple(float(x) for x in data["round_secs"]),
            None if error is None else float(error), data.get("error"),
        )  # fmt: skip


@dataclass(frozen=True)
class ModelRace:
    """A whole-network race, as stored: ``tune`` names the model tune whose schedules the
    ``tuned`` entry used (``None``: the best of every task in the database), ``trials`` how
    many trials it had spent; ``environment`` the machine, threads and versions."""

    id: int
    model_id: int
    tune: str | None
    trials: int
    entries: tuple[RaceEntry, ...]
    environment: dict[str, Any]
    created_at: float

    def entry(self, name: str) -> RaceEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    def entries_json(self) -> str:
        return json.dumps([e.to_json() for e in self.entries])
