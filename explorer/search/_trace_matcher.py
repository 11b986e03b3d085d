"""Where a MetaSchedule trace lies in the knob space: the sketch its instructions follow, and
its decisions as a point when each lies in its knob's domain."""

from __future__ import annotations

from typing import Any

from explorer import _tvm
from explorer.core import Candidate
from explorer.space import SAMPLING_KINDS, KnobSpace, Point
from explorer.types import JSON


class TraceMatcher:
    """Maps a MetaSchedule trace back onto the knob space, when it lies in it.

    A trace is *representable* when its instructions (postprocessing aside) are exactly those of
    one sketch and every decision lies in that knob's domain. MetaSchedule's ``MutateParallel``
    rewrites an annotation and ``MutateComputeLocation`` moves a block; such traces are real
    schedules the knob space cannot name, so they keep their raw decisions instead.
    """

    def __init__(self, knob_space: KnobSpace):
        self.knob_space = knob_space
        design = knob_space.design
        self._signatures = [
            _signature(design.sketch_trace(s)) for s in range(knob_space.num_sketches)
        ]

    def sketch_of(self, trace: Any) -> int | None:
        """The sketch this trace instantiates, or ``None``.

        A prefix match: a trace replayed from JSON has lost its postprocessing marker, so its
        postprocessing instructions follow the sketch's as ordinary ones.
        """
        sig = _signature(trace)
        matches = [s for s, known in enumerate(self._signatures) if sig[: len(known)] == known]
        return max(matches, key=lambda s: len(self._signatures[s]), default=None)

    def describe(self, trace: Any) -> dict[str, JSON]:
        """``Candidate.decisions`` for a trace: KnobSpace form when representable, else raw.

        Representable: ``{"sketch", "point", "values"}`` (what ``KnobSpace.materialize`` writes,
        so ``KnobSpace.point_of_candidate`` works). Otherwise ``{"sketch": s | None, "values"}``.
        """
        values = _decisions_of(trace)
        sketch = self.sketch_of(trace)
        point = None if sketch is None else self.knob_space.point_of(sketch, values)
        if point is None:
            return {"sketch": sketch, "values": list(values)}
        return {"sketch": sketch, "point": list(point.indices), "values": list(values)}

    def point_of(self, trace: Any, *, project: bool = False) -> Point | None:
        """The knob-space point of a trace; with ``project`` an out-of-domain decision falls back
        to the sketch's own (index 0) instead of making the trace unrepresentable."""
        sketch = self.sketch_of(trace)
        if sketch is None:
            return None
        values = _decisions_of(trace)
        point = self.knob_space.point_of(sketch, values)
        if point is not None or not project:
            return point
        domains = self.knob_space.domains[sketch]
        if len(domains) != len(values):
            return None
        indices = tuple(
            d.values.index(v) if v in d.values else 0 for d, v in zip(domains, values, strict=True)
        )
        return Point(sketch, indices)

    def point_of_candidate(self, candidate: Candidate, *, project: bool = False) -> Point | None:
        """Like ``point_of``, for any candidate (its trace is replayed when it has no point)."""
        point = self.knob_space.point_of_candidate(candidate)
        if point is not None:
            return point
        sch = replay(candidate.workload.mod(), candidate.trace)
        return None if sch is None else self.point_of(sch.trace, project=project)


def _signature(trace: Any) -> tuple[str, ...]:
    """The trace's instructions without decisions or postprocessing, as lines of text."""
    simplified = trace.simplified(remove_postproc=True)
    lines = _tvm.Trace(list(simplified.insts), {}).as_python(remove_postproc=True)
    return tuple(str(line) for line in lines)


def _decisions_of(trace: Any) -> tuple[JSON, ...]:
    return tuple(
        _tvm.to_plain(trace.get_decision(inst))
        for inst in trace.insts
        if inst.kind.name in SAMPLING_KINDS
    )


def replay(mod: Any, trace_json: JSON) -> Any | None:
    """``trace_json`` applied to a new schedule of ``mod``; ``None`` where it does not apply."""
    sch = _tvm.Schedule(mod)
    try:
        _tvm.apply_trace_json(trace_json, sch)
    except (_tvm.ScheduleError, ValueError, RuntimeError):
        return None
    return sch
