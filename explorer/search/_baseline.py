"""The run's baseline: the workload's unscheduled program, measured beside every search.

A search can only claim a speed-up over something measured the same way, on the same machine,
in the same run. The ``Tuner`` measures the unscheduled program (the empty trace: what
``Schedule(workload.mod())`` holds) once per run before the search, stores it marked
``decisions["baseline"]`` as a measurement that is not a trial (``is_remeasure``), and re-times
it beside the best candidates at the end. When nothing beat it, it is the run's answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from explorer import _tvm
from explorer.core import BASELINE_MARK, Candidate, TrialRecord, has_mark
from explorer.target import Target
from explorer.workloads import Workload


def baseline_candidate(workload: Workload, target: Target) -> Candidate:
    """The unscheduled program of ``workload`` on ``target``, marked as the run's baseline."""
    trace = _tvm.trace_to_json(_tvm.Schedule(workload.mod()).trace)
    return Candidate(workload, target, trace, decisions={BASELINE_MARK: True})


def is_baseline(candidate: Candidate) -> bool:
    """Whether ``candidate`` is a run's baseline (the unscheduled program)."""
    return has_mark(candidate.decisions, BASELINE_MARK)


def baseline_trial(trials: Sequence[TrialRecord]) -> TrialRecord | None:
    """The run's baseline measurement (the first one marked ``baseline``), if it has one."""
    return next((t for t in trials if is_baseline(t.candidate)), None)
