"""Marks in a candidate's ``decisions`` that give a stored measurement a role in its run.

* ``"start"``: the user's own schedule, the run's reference (a trial; see
  ``explorer.search._start``).
* ``"baseline"``: the workload's unscheduled program (an empty trace), which the ``Tuner``
  measures once per run and re-times beside the best candidates at the end. It is stored as a
  measurement that is not a trial (``is_remeasure``): it spends no budget, is not counted and
  is never told to the strategy.

A mark is read from the JSON a trial row already holds, so analyses need no trace to find it.
"""

from __future__ import annotations

from collections.abc import Mapping

from explorer.types import JSON

START_MARK = "start"
BASELINE_MARK = "baseline"


def has_mark(decisions: JSON, mark: str) -> bool:
    """Whether ``decisions`` (a candidate's or a trial row's) carry ``mark``."""
    return isinstance(decisions, Mapping) and decisions.get(mark) is True


UNCHECKED_MSG = (
    "timed by MetaSchedule, whose runner never compares the output with a reference: not "
    "checked against NumPy (`explorer check` re-measures it)"
)
"""The ``error_msg`` of a trial MetaSchedule timed (status ``UNCHECKED``), imported or streamed."""
