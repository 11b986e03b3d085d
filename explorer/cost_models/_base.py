"""The fit/predict contract every cost model implements."""

from __future__ import annotations

import abc
import enum
import inspect
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from explorer.core import Candidate, TrialRecord, cpu_heavy
from explorer.types import JSON


class ScoreScale(enum.Enum):
    """What a model's score measures, i.e. what a reader may derive from it."""

    RANK = "rank"  # only orders candidates of one workload
    RELATIVE = "relative"  # throughput over the best measured one's: latency = best / score
    GFLOPS = "gflops"  # an absolute throughput: latency = flops / (score * 1e9)


class CostModel(abc.ABC):
    """Predicts how fast candidates will run, without running them.

    Contract (checked by ``explorer.testing.contracts``):
        * ``predict`` returns a float64 array with one score per candidate, **higher = faster**
          (TVM's convention: scores are comparable within one workload; they are throughputs or
          normalised throughputs, never latencies). Before any ``update`` a learned model may
          return arbitrary but finite scores; an analytical model needs no training.
        * ``update(records)`` adds measured trials (failures included: they carry throughput 0)
          and refits; calling it with no records is a no-op.
        * ``save(path)`` / ``load(path)`` round-trip a fitted model: predictions are identical.
        * Randomness comes from the ``seed`` constructor argument only.
        * Constructor arguments are keyword-only hyper-parameters stored verbatim; fitted state
          ends in ``_`` (scikit-learn style).

    Training and prediction keep off the cores while a kernel is timed: every subclass's
    methods named in ``GATED_METHODS`` run inside ``explorer.core._gate.TIMING_GATE.work()``
    (wrapped when the class is defined, so a new model cannot forget it). xgboost training
    next to a timed kernel made its timings 100x too slow (issue 9).
    """

    name: ClassVar[str] = ""
    GATED_METHODS: ClassVar[tuple[str, ...]] = (
        "update",
        "predict",
        "fit",
        "fit_rows",
        "predict_rows",
        "calibrate",
        "values",
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for method in cls.GATED_METHODS:
            fn = cls.__dict__.get(method)
            if callable(fn) and not getattr(fn, "__isabstractmethod__", False):
                setattr(cls, method, cpu_heavy(fn))

    @abc.abstractmethod
    def update(self, records: Sequence[TrialRecord]) -> None:
        """Learn from measured trials."""

    @abc.abstractmethod
    def predict(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """One score per candidate, higher = faster."""

    @property
    def score_scale(self) -> ScoreScale:
        """What ``predict``'s scores measure (``RANK`` unless a model says more)."""
        return ScoreScale.RANK

    @property
    def is_fitted(self) -> bool:
        """Whether ``predict`` says something (an analytical model always does)."""
        return True

    def save(self, path: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be saved")

    def load(self, path: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be loaded")

    def settings(self) -> dict[str, JSON]:
        params = inspect.signature(type(self).__init__).parameters
        return {
            n: getattr(self, n) for n in params if n != "self" and _plain(getattr(self, n, None))
        }


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None)))
