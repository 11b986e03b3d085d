"""Small value types shared by every package."""

from __future__ import annotations

from enum import Enum
from typing import Any

JSON = Any
"""A value made of dicts, lists, str, int, float, bool and None only."""


class MeasureStatus(str, Enum):
    """What happened to one candidate. Everything but ``OK`` carries an error message.

    ``UNCHECKED`` is a timing nobody compared with the NumPy reference (MetaSchedule's runner,
    imported or streamed): it has ``run_secs``, but it is not ``is_ok`` and is never ranked as
    best until our measurer re-measures the schedule (``explorer.storage.check_unchecked``).
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
