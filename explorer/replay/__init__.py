"""Race strategies offline: earlier measurements replayed instead of new ones.

* ``Recording(store, workload, target)``: what a database holds of one workload on one target,
  answering for those schedules only (``measurer()``), searchable only among them
  (``space()``), with how much of the whole space that is (``coverage``).
* ``recordings_in(store)``: the workloads and targets a database could replay.
* ``example_recording()``: the recording shipped with the explorer (softmax 64x256, its
  whole knob space); ``open_copy(path)``: a private copy of any database to replay.
* ``race(recording, strategies, seeds=, trials=)``: every strategy with every seed on the
  recording, in seconds; runs stored marked as replayed (``REPLAYED_FROM``).
"""

from __future__ import annotations

from explorer.replay._race import (
    DEFAULT_STRATEGIES,
    MAX_SEEDS,
    RaceProgress,
    RaceResult,
    RaceRun,
    race,
)
from explorer.replay._recording import (
    EXAMPLE,
    REPLAYED_FROM,
    RecordedWorkload,
    Recording,
    example_recording,
    open_copy,
    recordings_in,
)

__all__ = [
    "EXAMPLE",
    "example_recording",
    "open_copy",
    "DEFAULT_STRATEGIES",
    "MAX_SEEDS",
    "REPLAYED_FROM",
    "RaceProgress",
    "RaceResult",
    "RaceRun",
    "RecordedWorkload",
    "Recording",
    "race",
    "recordings_in",
]
