"""A discrete knob space over MetaSchedule's sketches (AutoTVM's ConfigSpace, rebuilt on TVM 0.27).

Every strategy searches this one space so results are comparable. A point is a sketch plus one
index per knob into that knob's domain:

* ``SamplePerfectTile(n, max_innermost)``: every ordered ``n``-factorisation of the loop extent
  whose innermost factor is at most ``max_innermost``. Enumerating them ourselves matters: TVM
  silently replaces a decision whose product is wrong by ``[1, ..., extent]``
  (docs/tvm-notes.md, §3), so only perfect tilings may ever reach it.
* ``SampleCategorical``: the indices of its candidates (unroll depth, for instance).
* ``SampleComputeLocation``: kept at the sketch's own decision; its domain depends on the tiles
  chosen before it and would need TIR analysis per point.

Index 0 of every tile knob is the sketch's own decision (MetaSchedule's first sample), so the
all-zero point is a sensible origin for coordinate descent.
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.core import Candidate, factorizations
from explorer.errors import SearchError
from explorer.space._design_space import DesignSpace, Knob
from explorer.target import Target
from explorer.types import JSON
from explorer.workloads import Workload


@dataclass(frozen=True, slots=True)
class Point:
    """A point of the knob space: a sketch and one domain index per knob of that sketch."""

    sketch: int
    indices: tuple[int, ...]

    def key(self) -> str:
        return f"{self.sketch}:{','.join(map(str, self.indices))}"


@dataclass(frozen=True)
class KnobDomain:
    """The values one knob can take, in index order."""

    knob: Knob
    values: tuple[JSON, ...]

    @property
    def size(self) -> int:
        return len(self.values)


class KnobSpace:
    """Points <-> decisions <-> buildable candidates for one workload and target.

    Example:
        >>> from explorer.target import Target
        >>> from explorer.workloads import get_workload
        >>> matmul = get_workload("matmul", M=16, N=16, K=16)
        >>> space = KnobSpace.of(matmul, Target.local_cpu())
        >>> point = space.random_point(np.random.default_rng(0))
        >>> candidate = space.materialize(point)  # None when the space refuses the point
        >>> candidate is None or space.point_of_candidate(candidate) == point
        True
    """

    def __init__(self, design: DesignSpace):
        self.design = design
        self.domains: tuple[tuple[KnobDomain, ...], ...] = tuple(
            tuple(KnobDomain(k, _domain(k)) for k in knobs) for knobs in design.knobs
        )
        # A space ``within`` some points (a recording's): those are all a search may propose.
        self.pool: tuple[Point, ...] | None = None
        if design.pool is not None:
            self.pool = tuple(
                Point(s, idx) for s, idx in sorted(design.pool) if self._valid(Point(s, idx))
            )
            if not self.pool:
                raise SearchError(
                    f"none of the points to search is a point of {self.workload.key()}'s space"
                )
        self._pool_set = frozenset(self.pool or ())
        self._pool_sizes = collections.Counter(p.sketch for p in self.pool or ())

    @staticmethod
    def of(workload: Workload, target: Target) -> KnobSpace:
        """The knob space of ``workload`` on ``target``, built once per pair (each is a
        MetaSchedule ``TuneContext``): every part of the explorer shares these.

        Raises:
            SearchError: TVM derives no design space for the pair (remembered: the same pair
                fails the same way).
        """
        space = _knob_space_cached(workload, target)
        if isinstance(space, Exception):
            raise SearchError(f"no knob space for {workload.key()}: {space}") from space
        return space

    @property
    def workload(self) -> Workload:
        return self.design.workload

    @property
    def target(self) -> Target:
        return self.design.target

    @property
    def num_sketches(self) -> int:
        return len(self.domains)

    def dims(self, sketch: int) -> tuple[int, ...]:
        return tuple(d.size for d in self.domains[sketch])

    def size(self, sketch: int | None = None) -> int:
        """Number of points in one sketch, or in all of them (of the pool, if any)."""
        if sketch is None:
            return sum(self.size(s) for s in range(self.num_sketches))
        if self.pool is not None:
            return self._pool_sizes[sketch]
        return math.prod(self.dims(sketch))

    def points(self) -> Iterator[Point]:
        """Every point (of the pool, if any), sketch by sketch, in index order (small spaces
        only: a matmul's has hundreds of thousands)."""
        if self.pool is not None:
            yield from self.pool
            return
        for sketch in range(self.num_sketches):
            for idx in itertools.product(*(range(d) for d in self.dims(sketch))):
                yield Point(sketch, tuple(idx))

    def allows(self, point: Point) -> bool:
        """Whether a search may propose ``point`` (every point, unless the space is ``within``
        a pool)."""
        return self.pool is None or point in self._pool_set

    def origin(self, sketch: int = 0) -> Point:
        return Point(sketch, (0,) * len(self.domains[sketch]))

    def random_point(self, rng: np.random.Generator, *, sketch: int | None = None) -> Point:
        """Uniform over all points (sketches weighted by their size), over the points of
        ``sketch``, or over the pool (``sketch`` must then be ``None``)."""
        if self.pool is not None:
            if sketch is not None:
                raise ValueError("random_point: a pooled space draws from its pool, not a sketch")
            return self.pool[int(rng.integers(len(self.pool)))]
        if sketch is None:
            sizes = np.array([self.size(s) for s in range(self.num_sketches)], dtype=float)
            sketch = int(rng.choice(len(sizes), p=sizes / sizes.sum()))
        elif not 0 <= sketch < self.num_sketches:
            raise ValueError(
                f"random_point: no sketch {sketch} (the space has {self.num_sketches})"
            )
        return Point(sketch, tuple(int(rng.integers(n)) for n in self.dims(sketch)))

    def decisions(self, point: Point) -> tuple[JSON, ...]:
        self._check(point)
        return tuple(
            d.values[i] for d, i in zip(self.domains[point.sketch], point.indices, strict=True)
        )

    def point_of(self, sketch: int, decisions: Sequence[JSON]) -> Point | None:
        """The point whose decisions these are; ``None`` when one lies outside its domain."""
        domains = self.domains[sketch]
        if len(decisions) != len(domains):
            return None
        indices = []
        for domain, value in zip(domains, decisions, strict=True):
            try:
                indices.append(domain.values.index(_tvm.to_plain(value)))
            except ValueError:
                return None
        return Point(sketch, tuple(indices))

    def materialize(self, point: Point) -> Candidate | None:
        """Replay the sketch with the point's decisions and run the postprocessors.

        Returns ``None`` when TVM refuses the point (an invalid point is data for a search, not a
        crash) or the space's pool lacks it; the candidate carries ``decisions = {"sketch": s,
        "point": [...], "values": ...}``.
        """
        self._check(point)
        if not self.allows(point):
            return None
        sch = self.replay(point)
        if sch is None or not self.design.apply_postprocs(sch):
            return None
        return Candidate(
            workload=self.workload,
            target=self.target,
            trace=_tvm.trace_to_json(sch.trace),
            decisions={
                "sketch": point.sketch,
                "point": list(point.indices),
                "values": list(self.decisions(point)),
            },
        )

    def replay(self, point: Point) -> Any | None:
        """The sketch replayed with the point's decisions, before the postprocessors (a TVM
        schedule), or ``None`` when TVM refuses them."""
        insts = list(self.design.sketch_trace(point.sketch).insts)
        decisions = {
            insts[d.knob.inst_index]: v
            for d, v in zip(self.domains[point.sketch], self.decisions(point), strict=True)
        }
        sch = _tvm.Schedule(self.workload.mod())
        try:
            _tvm.Trace(insts, decisions).apply_to_schedule(sch, remove_postproc=True)
        except (_tvm.ScheduleError, ValueError, RuntimeError):
            return None
        return sch

    def point_of_candidate(self, candidate: Candidate) -> Point | None:
        """Recover the point of a candidate made by ``materialize`` (or ``None``).

        A stored point is trusted only when its decisions are still that point's: a candidate
        stored before its sketch changed (a knob added, removed or re-split) names indices into
        domains that no longer exist, and read as indices into today's they would name another
        schedule. Such a candidate is found by its decisions' values, or not at all.
        """
        d = candidate.decisions
        if not (isinstance(d, dict) and "sketch" in d and "point" in d):
            return None
        point = Point(int(d["sketch"]), tuple(int(i) for i in d["point"]))
        values = d.get("values")
        if self._valid(point) and (
            values is None or _tvm.to_plain(self.decisions(point)) == _tvm.to_plain(values)
        ):
            return point
        if isinstance(values, list) and 0 <= point.sketch < self.num_sketches:
            return self.point_of(point.sketch, values)
        return None

    def _valid(self, point: Point) -> bool:
        return (
            0 <= point.sketch < self.num_sketches
            and len(point.indices) == len(self.domains[point.sketch])
            and all(
                0 <= i < n for i, n in zip(point.indices, self.dims(point.sketch), strict=True)
            )
        )

    def _check(self, point: Point) -> None:
        if not self._valid(point):
            raise ValueError(
                f"{point} is not a point of this space (dims per sketch: "
                f"{[self.dims(s) for s in range(self.num_sketches)]})"
            )


def _domain(knob: Knob) -> tuple[JSON, ...]:
    if knob.kind == "SamplePerfectTile":
        n, max_innermost = int(knob.attrs[0]), int(knob.attrs[1])
        extent = math.prod(int(x) for x in knob.default)
        values = [list(f) for f in factorizations(extent, n, max_innermost)]
        default = [int(x) for x in knob.default]
        values.remove(default)
        return (default, *values)
    if knob.kind == "SampleCategorical":
        num = len(knob.attrs[0])
        return (int(knob.default), *(i for i in range(num) if i != int(knob.default)))
    return (knob.default,)


@functools.lru_cache(maxsize=32)
def _knob_space_cached(workload: Workload, target: Target) -> KnobSpace | Exception:
    try:
        return KnobSpace(DesignSpace.of(workload, target))
    except Exception as exc:  # noqa: BLE001 - TVM's refusal, remembered and raised by KnobSpace.of
        return exc
