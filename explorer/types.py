"""Small value types shared by every package."""

from __future__ import annotations

from enum import Enum
from typing import Any

JSON = Any
"""A value made of dicts, lists, str, int, float, bool and None only."""

MAX_TRIALS = 1_000_000
"""A run's trial budget at most. The smallest kernels measure about 5 trials a second here, so
this is days of measuring; a larger number is a slip of the keyboard (``--trials
99999999999999999999`` once started a run with an ETA of 8e16 hours)."""
TOO_MANY_TRIALS = ": a million trials take days; split the work into several runs"
MAX_INT = 2**63 - 1
"""Any whole number a user gives at most: the databases' largest integer (a run id, a seed or a
count above it cannot be stored or looked up)."""
MAX_SECS = 30 * 24 * 3600.0
"""A run's wall-clock budget at most (30 days), for the same reason."""
TOO_LONG = ": 30 days; resume the run to go on longer"


class MeasureStatus(str, Enum):
    """What happened to one candidate. Everything but ``OK`` carries an error message.

    ``UNCHECKED`` is a timing nobody compared with the NumPy reference (MetaSchedule's runner,
    imported or streamed): it has ``run_secs``, but it is not ``is_ok`` and is never ranked as
    best until our measurer re-measures the schedule (``explorer.storage.check_unchecked``).

    ``UNCHECKED`` is ``is_inconclusive``: neither a success nor a failure, so cost models and
    strategies leave it out of their training data.

    A correct kernel timed on a busy machine is ``OK``: how widely its repeats spread is a
    property of the reading (``MeasureResult.spread``), not a status. Databases written before
    hold such results as ``"noisy"``, which reads back as ``OK`` (see ``_missing_``).
    """

    OK = "ok"
    BUILD_ERROR = "build_error"  # TVM refused to compile it (or applying the trace failed)
    RUN_ERROR = "run_error"  # it crashed, or was killed for exceeding the memory limit
    TIMEOUT = "timeout"  # build or run exceeded its time limit and the worker was killed
    WRONG_RESULT = "wrong_result"  # it ran, but the output differs from the NumPy reference
    INVALID = "invalid"  # the point does not denote a legal schedule (search spaces only)
    UNCHECKED = "unchecked"  # timed elsewhere (MetaSchedule), output never checked against NumPy

    @property
    def is_ok(self) -> bool:
        return self is MeasureStatus.OK

    @property
    def is_inconclusive(self) -> bool:
        """Timed, but the timing says nothing reliable: neither a success nor a failure."""
        return self is MeasureStatus.UNCHECKED

    @classmethod
    def _missing_(cls, value: object) -> MeasureStatus | None:
        # "noisy" was a status until the timing protocol took the fastest sample of each
        # repeat: a correct kernel whose repeats spread wide, which is OK now.
        return cls.OK if value == LEGACY_NOISY else None


LEGACY_NOISY = "noisy"
"""The status text of a correct but widely spread timing in databases written before noisy
became a property of a reading; it reads back as ``MeasureStatus.OK``."""


class CacheFlush(str, Enum):
    """What leaves the CPU caches before each timed sample of a kernel: a measurement's
    protocol (``MeasureConfig.cache_flush``, ``MeasureResult.cache_flush``).

    A kernel timed in a loop finds its arguments in the caches; inside a network it finds its
    input there (the kernel before it just wrote it) but not its weights, read once an
    inference (ResNet-18's are 46 MB). In a tuned ResNet-18 one 3x3 convolution read 1.24 ms
    timed warm, 1.95 ms with its weights flushed and 1.61 ms inside the network, while another
    schedule of the same convolution read 1.01, 1.04 and 1.03: timed warm, a search ranks them
    the other way round from the network. Timings under two protocols are not comparable."""

    NONE = "none"
    """Nothing: the kernel as a loop of calls runs it."""
    ARGUMENTS = "arguments"
    """Every argument but the first, line by line (TVM's ``cache_flush_cpu_non_first_arg``, as
    Ansor times a network's tasks): the first is the input, which the kernel before wrote."""
    ALL = "all"
    """Everything: a buffer twice the target's caches written before each sample; it costs
    milliseconds a sample (a 150-trial ResNet-18 tune took 2.2x as long)."""

    @property
    def phrase(self) -> str:
        """What a timing under this protocol found, in words ("" for ``NONE``)."""
        return {
            CacheFlush.NONE: "",
            CacheFlush.ARGUMENTS: "every argument but the first flushed from the caches",
            CacheFlush.ALL: "the caches flushed",
        }[self]
