"""Starting a search from what the user has: a hand-made schedule, a record, or a point.

A strategy that declares ``Capabilities(start=True)`` takes ``start=`` and builds a
``StartPlan`` in its ``_start`` hook. The plan holds two candidates that are proposed before
anything else:

* the **reference**: the user's schedule exactly as given, marked ``decisions["start"] = True``.
  It is measured like any trial, so it is stored in the run; the ``Tuner`` re-times it beside
  the best candidates at the end and offers it as the answer when nothing beat it.
* the **nearest point**: where the schedule lands in the knob space (``nearest_point``), the
  point the strategy descends from, seeds its population with or starts its walks at. When the
  schedule is itself a point of the space (a searched record, a ``Point``), the reference is
  that point and there is nothing else to measure.

Resuming needs no ``start=``: the reference is the run's trial marked ``start``, and the plan is
rebuilt from it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from explorer.core import START_MARK, Candidate, TrialRecord, has_mark, trace_key
from explorer.errors import SearchError
from explorer.space import KnobSpace, Point, StartMapping, nearest_point
from explorer.types import JSON

StartSpec = Candidate | Point | None


def is_start(candidate: Candidate) -> bool:
    """Whether ``candidate`` is a run's reference: the user's own schedule."""
    return has_mark(candidate.decisions, START_MARK)


def is_hand_start(candidate: Candidate) -> bool:
    """Whether ``candidate`` is a reference that is not a point of the space (made by hand)."""
    return is_start(candidate) and "point" not in candidate.decisions


def first_candidates(plan: StartPlan | None, history: Sequence[TrialRecord]) -> list[Candidate]:
    """``plan.first_candidates(history)``, or nothing without a plan."""
    return [] if plan is None else plan.first_candidates(history)


def start_trial(trials: Sequence[TrialRecord]) -> TrialRecord | None:
    """The run's reference trial (the first one marked ``start``), if it has one."""
    return next((t for t in trials if is_start(t.candidate)), None)


@dataclass(frozen=True)
class StartPlan:
    """Where a search starts and what it measures first.

    Attributes:
        mapping: the start's nearest point and the notes on what was approximated.
        reference: the user's schedule, marked as the run's reference.
        nearest: the nearest point's candidate when it is not the reference itself.
    """

    mapping: StartMapping
    reference: Candidate
    nearest: Candidate | None

    @property
    def point(self) -> Point:
        return self.mapping.point

    def first_candidates(self, history: Sequence[TrialRecord]) -> list[Candidate]:
        """The plan's candidates not measured yet (in ``history``), reference first.

        A point counts as measured under any trace that names it: MetaSchedule's trace of a
        point is not textually the one ``KnobSpace.materialize`` writes.
        """
        done = {trace_key(r.candidate.trace) for r in history}
        done |= {p for r in history if (p := _point_key(r.candidate)) is not None}
        todo = [self.reference] + ([self.nearest] if self.nearest is not None else [])
        return [c for c in todo if trace_key(c.trace) not in done and _point_key(c) not in done]


def _point_key(candidate: Candidate) -> str | None:
    d = candidate.decisions
    if isinstance(d, Mapping) and d.get("sketch") is not None and "point" in d:
        return f"point {d['sketch']}:{list(d['point'])}"
    return None


def plan_start(
    start: StartSpec | Mapping[str, JSON],
    space: KnobSpace,
    history: Sequence[TrialRecord] = (),
) -> StartPlan | None:
    """The plan for ``start``; ``None`` when there is none (no ``start``, nothing to resume).

    ``start`` may also be the JSON a run's settings record for it (a resumed run rebuilt from
    its settings): the run's own reference trial is used then.

    Raises:
        SearchError: the start is for another workload or is not a point of the space.
        TraceError: the start's trace is malformed or would not replay as written.
    """
    if isinstance(start, Mapping) or start is None:
        stored = start_trial(history)
        if stored is not None:
            start = stored.candidate
        elif isinstance(start, Mapping) and "sketch" in start and "point" in start:
            start = Point(int(start["sketch"]), tuple(int(i) for i in start["point"]))
        elif isinstance(start, Mapping):
            raise SearchError(
                "this run started from a schedule it never measured, so it cannot be rebuilt "
                "from the run's settings; give the schedule again (start=... / --start FILE)"
            )
        else:
            return None
    if isinstance(start, Point):
        try:
            space.decisions(start)
        except ValueError as exc:
            raise SearchError(f"start: {exc}") from None
        mapping = StartMapping(start, (), exact=True)
        user = None
    elif isinstance(start, Candidate):
        mapping = nearest_point(space, start)
        user = start
    else:
        raise TypeError(
            f"start must be a Candidate (e.g. session.candidate()), a Point or None "
            f"(got {type(start).__name__})"
        )
    point_candidate = space.materialize(mapping.point)
    if point_candidate is None:
        raise SearchError(
            f"start: the point {mapping.point.key()} is not a schedule of this space "
            "(TVM refuses to build it, or its register tile does not fit the vector registers)"
        )
    mark = {START_MARK: True, "notes": list(mapping.notes)}
    if mapping.exact:
        # The schedule is the point: one candidate is both the reference and the start.
        decisions = {**point_candidate.decisions, **mark}
        return StartPlan(mapping, replace(point_candidate, decisions=decisions), None)
    assert user is not None
    reference = Candidate(
        space.workload,
        space.target,  # the run's target: the reference is timed exactly like every trial
        user.trace,
        decisions={
            **mark,
            "nearest": {"sketch": mapping.point.sketch, "point": list(mapping.point.indices)},
        },
    )
    return StartPlan(mapping, reference, point_candidate)


def start_setting(start: StartSpec | Mapping[str, JSON]) -> JSON:
    """What a run's settings record about ``start`` (the trial marked ``start`` holds the rest)."""
    if isinstance(start, Point):
        return {"sketch": start.sketch, "point": list(start.indices)}
    if isinstance(start, Candidate):
        # A digest, not the trace: settings stay small and the trace is in the start trial.
        digest = hashlib.sha256(trace_key(start.trace).encode()).hexdigest()[:16]
        return {"trace_sha256": digest}
    if isinstance(start, Mapping):
        return dict(start)
    return None
