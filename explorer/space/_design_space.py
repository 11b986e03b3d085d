"""TVM MetaSchedule's design space for a workload, and sampling from it.

MetaSchedule's ``post-order-apply`` generator turns a workload into a few *sketches*: traces whose
sampling instructions (``SamplePerfectTile``, ``SampleCategorical``, ``SampleComputeLocation``)
are the knobs. Replaying a sketch's instructions on a seeded schedule *without* decisions makes TVM
draw every knob afresh; running the sketch's postprocessors afterwards turns it into a buildable
schedule. The resulting trace (postprocessors included) replays exactly, so it is what a
``Candidate`` carries. On a CPU, the packed sketches (``_packing``) follow MetaSchedule's own.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.core import Candidate
from explorer.errors import SearchError
from explorer.space._packing import packed_sketches, register_tile_check, register_tile_share
from explorer.target import Target
from explorer.types import JSON
from explorer.workloads import Workload

SAMPLING_KINDS = ("SamplePerfectTile", "SampleCategorical", "SampleComputeLocation")


@dataclass(frozen=True)
class Knob:
    """One sampling instruction of a sketch: a decision a search can make."""

    sketch: int  # which sketch it belongs to
    inst_index: int  # position of the instruction in the sketch's trace
    kind: str  # one of SAMPLING_KINDS
    attrs: tuple[Any, ...]  # TVM's attributes: (n, max_innermost_factor) for tiles
    default: JSON  # the sketch's own decision
    label: str  # readable: "tile #0 (n=4)", "categorical #3"


@dataclass(frozen=True)
class Sample:
    """A random point of the space, ready to measure."""

    candidate: Candidate
    sketch: int
    decisions: tuple[JSON, ...]  # one per knob of the sketch, in instruction order


class DesignSpace:
    """The sketches and postprocessors MetaSchedule derives for a workload on a target, then
    (CPU targets) the packed sketches.

    Example:
        >>> from explorer.workloads import get_workload
        >>> space = DesignSpace.of(get_workload("matmul", M=64, N=64, K=64), Target.local_cpu())
        >>> s = space.sample(np.random.default_rng(0))
        >>> s.candidate.workload.family
        'matmul'
    """

    def __init__(self, workload: Workload, target: Target):
        self.workload = workload
        self.target = target
        _tvm.ensure_cpu_intrinsics()
        if target.kind == "cuda":
            _tvm.ensure_cuda_intrinsics()
        self._context = _tvm.ms.TuneContext(
            mod=workload.mod(),
            target=target.to_tvm(),
            space_generator="post-order-apply",
            search_strategy="evolutionary",
            task_name=workload.family,
            rand_state=1,
            num_threads=target.num_cores,
        )
        self._sketches = list(self._context.generate_design_space())
        self.num_metaschedule_sketches = len(self._sketches)
        """MetaSchedule's own sketches come first; the packed ones follow."""
        if target.kind == "llvm":
            # After MetaSchedule's own, so a stored point's sketch index keeps its meaning.
            self._sketches += packed_sketches(
                workload.mod(), target.to_tvm(), target.vector_lanes_f32, target.num_cores
            )
        if not self._sketches:
            raise SearchError(f"MetaSchedule derived no design space for {workload.key()}")
        self._postprocs = list(self._context.space_generator.postprocs)
        if target.kind == "llvm":
            # First: it reads the sketch's decisions only, and refuses before the others run.
            self._postprocs.insert(0, register_tile_check(target.vector_lanes_f32))
        self.knobs: tuple[tuple[Knob, ...], ...] = tuple(
            _knobs_of(i, sk.trace) for i, sk in enumerate(self._sketches)
        )
        self.pool: frozenset[tuple[int, tuple[int, ...]]] | None = None
        """The only points a search may propose, as ``(sketch, indices)`` (``within``);
        ``None``: every point."""

    @staticmethod
    def of(workload: Workload, target: Target) -> DesignSpace:
        """A cached space per (workload, target): building one costs a TuneContext."""
        return _space_cached(workload, target)

    def within(self, points: Iterable[tuple[int, Sequence[int]]]) -> DesignSpace:
        """This space with only ``points`` (``(sketch, indices)``) left to propose: a race on
        a recording searches the schedules the recording holds, and nothing else.

        Every strategy's ``KnobSpace`` honours it (``KnobSpace.allows``); the sketches and the
        tuning context are shared with this space.
        """
        pool = frozenset((int(s), tuple(int(i) for i in idx)) for s, idx in points)
        if not pool:
            raise SearchError("a design space needs at least one point to search")
        view = copy.copy(self)
        view.pool = pool
        return view

    def metaschedule_only(self) -> DesignSpace:
        """This space without its packed sketches: MetaSchedule's own, as ``tune_tir`` searches
        them (what the packed ones add is measured against it: ``benchmarks/bench_packing.py``)."""
        view = copy.copy(self)
        view._sketches = self._sketches[: self.num_metaschedule_sketches]
        view.knobs = self.knobs[: self.num_metaschedule_sketches]
        return view

    @property
    def num_sketches(self) -> int:
        return len(self._sketches)

    @property
    def tune_context(self) -> Any:
        """The MetaSchedule ``TuneContext`` (for strategies that drive TVM's own search)."""
        return self._context

    def sketch_trace(self, sketch: int) -> Any:
        return self._sketches[sketch].trace

    def sample(
        self, rng: np.random.Generator, *, sketch: int | None = None, max_tries: int = 32
    ) -> Sample:
        """Draw one random buildable point: a random sketch (or ``sketch``), every knob
        re-sampled by TVM.

        Raises:
            SearchError: no valid point was found in ``max_tries`` draws.
        """
        chosen = sketch
        for _ in range(max_tries):
            sketch = int(rng.integers(len(self._sketches))) if chosen is None else chosen
            seed = int(rng.integers(1, 2**31 - 1))
            sch = _tvm.Schedule(self.workload.mod(), seed=seed)
            insts = list(self._sketches[sketch].trace.insts)
            try:
                _tvm.Trace(insts, {}).apply_to_schedule(sch, remove_postproc=True)
            except (_tvm.ScheduleError, ValueError, RuntimeError):
                continue
            decisions = _decisions_of(sch.trace)
            if not self.apply_postprocs(sch):
                continue
            return Sample(self.candidate_of(sch, decisions), sketch, decisions)
        raise SearchError(
            f"no valid schedule of {self.workload.key()} found in {max_tries} random draws"
        )

    @functools.cached_property
    def sampling_copies(self) -> tuple[int, ...]:
        """How many times MetaSchedule's evolution should list each sketch.

        It draws its random population by picking a sketch, then its decisions, and drops what
        the postprocessors refuse: a packed sketch whose register tile fits in a third of its
        draws would give a third of the others' share of the population. Listed ``1 / share``
        times (at most 4), every sketch gets about the same share of valid schedules.
        """
        lanes = self.target.vector_lanes_f32
        copies = [1] * self.num_metaschedule_sketches
        for sketch in range(self.num_metaschedule_sketches, self.num_sketches):  # packed ones
            share = register_tile_share(self.workload.mod(), self.sketch_trace(sketch), lanes)
            copies.append(min(4, max(1, round(1 / share))) if share > 0 else 1)
        return tuple(copies)

    @property
    def postprocs(self) -> list[Any]:
        """The postprocessors every sampling of this space runs: MetaSchedule's for the
        target, and on a CPU first the packed sketches' register-tile check."""
        return list(self._postprocs)

    def apply_postprocs(self, sch: Any) -> bool:
        """Run the sketch postprocessors on ``sch`` in place; ``False`` if any refuses.

        Their instructions follow a mark, as MetaSchedule marks its own: a replay that removes
        the postprocessing (its evolution's, which runs it again) must find where it starts, or
        a weight's layout rewrite is applied twice and TVM refuses the trace.
        """
        sch.enter_postproc()
        try:
            return all(p.apply(sch) for p in self._postprocs)
        except (_tvm.ScheduleError, ValueError, RuntimeError):
            return False

    def candidate_of(self, sch: Any, decisions: Sequence[JSON] | None = None) -> Candidate:
        return Candidate(
            workload=self.workload,
            target=self.target,
            trace=_tvm.trace_to_json(sch.trace),
            decisions=list(decisions) if decisions is not None else None,
        )


def _knobs_of(sketch: int, trace: Any) -> tuple[Knob, ...]:
    knobs = []
    counts: dict[str, int] = {}
    for index, inst in enumerate(trace.insts):
        kind = inst.kind.name
        if kind not in SAMPLING_KINDS:
            continue
        n = counts.get(kind, 0)
        counts[kind] = n + 1
        attrs = tuple(_tvm.to_plain(list(inst.attrs)))
        short = {"SamplePerfectTile": "tile", "SampleCategorical": "categorical"}.get(
            kind, "compute-location"
        )
        knobs.append(
            Knob(
                sketch=sketch,
                inst_index=index,
                kind=kind,
                attrs=attrs,
                default=_tvm.to_plain(trace.get_decision(inst)),
                label=f"{short} #{n}",
            )
        )
    return tuple(knobs)


def _decisions_of(trace: Any) -> tuple[JSON, ...]:
    return tuple(
        _tvm.to_plain(trace.get_decision(inst))
        for inst in trace.insts
        if inst.kind.name in SAMPLING_KINDS
    )


@functools.lru_cache(maxsize=32)
def _space_cached(workload: Workload, target: Target) -> DesignSpace:
    return DesignSpace(workload, target)
