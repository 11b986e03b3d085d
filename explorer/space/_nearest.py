"""Map a schedule made by hand onto the nearest point of the knob space, saying what changed.

Why the nearest point, and not a space built around the user's schedule: every strategy searches
one ``KnobSpace`` so that runs are comparable, and the sketches carry what MetaSchedule knows about
a fast CPU kernel (multi-level tiling, a write cache, parallel/vectorize/unroll postprocessing).
A space made from a hand trace would hold only the user's own transformations, differ from start
to start, and give TVM's evolutionary search nothing it can mutate (a hand trace has no sampling
instructions). Nothing is lost by approximating, because the user's schedule itself is measured
as the run's reference and offered as the answer when the search finds nothing faster
(``explorer.search`` and ``explorer.tuner``); the mapping only decides where the search begins.

How a hand schedule is read (from the IR it produces, not from the order of its steps):

* **Tiles.** Every block iterator's binding is normalised to a sum of loop variables times
  strides (``tvm.sym.normalize_to_iter_sum``); the loops' extents, outer stride first, are the
  user's split factors for that loop, whatever sequence of split/reorder/fuse produced them.
  A sketch's ``SamplePerfectTile`` knob is tied to its block iterator by replaying the sketch and
  looking at the loop the instruction tiles. The user's ``m`` factors are laid onto the knob's
  ``n`` levels with the outermost factor on the outermost level and the innermost on the
  innermost (the middle ones in order, merged when ``m > n``): for a classic ``i_0, j_0, k, i_1,
  j_1`` nest this gives exactly the user's loop order under MetaSchedule's ``SSRSRS`` structure.
  When that tiling is not in the knob's domain (innermost factor too large, a split that does not
  divide), the domain value nearest in log-factors is used. A packed sketch splits its vector
  loop by a fixed panel width before a knob tiles the panels: the user's factors above that
  width are what is laid onto the knob, and among sketches of equal structure the one whose
  panel width is a boundary of the user's own splits is preferred.
* **Unroll.** ``SampleCategorical`` knobs that feed ``meta_schedule.unroll_*`` take the candidate
  nearest to the user's unrolling (0 when the user unrolled nothing).
* **Sketch.** The sketch that drops the fewest of the user's structural steps (cache
  reads/writes, layout changes, compute-at, inlining, rfactor...), then adds the fewest of its
  own, is used; ties go to the lower index. Dropped first: a user who packed a buffer by hand
  starts from a packed sketch, even though it also adds MetaSchedule's write cache.
* **Everything else** (loop order, fuse, parallel, vectorize, annotations) is not a knob: the
  sketch's postprocessors parallelize and vectorize by themselves. Each such step gets a note.

A schedule that already is an instance of a sketch (a searched record) maps exactly (``exact``);
a decision of it outside its knob's domain is replaced by the nearest value, with a note.
"""

from __future__ import annotations

import math
import re
import weakref
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from explorer import _tvm
from explorer.core import Candidate
from explorer.errors import SearchError
from explorer.space import _packing
from explorer.space._design_space import SAMPLING_KINDS
from explorer.space._knob_space import KnobDomain, KnobSpace, Point
from explorer.space._reading import (
    Tiling,
    as_int,
    iter_sums,
    loop_kinds,
    realizes,
    user_tilings,
    user_unroll,
)
from explorer.types import JSON

# Steps that change what is computed where (a sketch either has them or not).
_STRUCTURAL = frozenset(
    {
        "CacheRead",
        "CacheWrite",
        "CacheInplace",
        "CacheIndex",
        "ReIndex",
        "ComputeAt",
        "ReverseComputeAt",
        "ComputeInline",
        "ReverseComputeInline",
        "RFactor",
        "DecomposeReduction",
        "Blockize",
        "Tensorize",
        "TransformLayout",
        "TransformBlockLayout",
        "SetScope",
        "PadEinsum",
    }
)
# Steps that only look things up, or that the knob space models itself.
_NEUTRAL = frozenset(
    {"GetSBlock", "GetLoops", "GetChildBlocks", "GetProducers", "GetConsumers", "Split"}
    | set(SAMPLING_KINDS)
    | {"EnterPostproc"}
)
_UNROLL_KEYS = ("meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit")


@dataclass(frozen=True)
class StartMapping:
    """Where a given schedule lands in the knob space, and what that changed.

    Attributes:
        point: the nearest point (buildable: ``KnobSpace.materialize`` accepts it).
        notes: plain-language sentences, one per approximation or dropped step.
        exact: the point's schedule *is* the given one (a searched record): nothing was changed.
    """

    point: Point
    notes: tuple[str, ...]
    exact: bool

    def describe(self) -> str:
        """The notes as one text, for a terminal or a notebook."""
        head = "exactly the point" if self.exact else "nearest point"
        return "\n".join([f"{head} {self.point.key()}", *(f"  - {n}" for n in self.notes)])

    def to_json(self) -> dict[str, JSON]:
        return {
            "sketch": self.point.sketch,
            "point": list(self.point.indices),
            "exact": self.exact,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class _TileRole:
    """The block iterator a sketch's tile knob splits, and the stride of the loop it splits:
    1, or a packed sketch's panel width (its loop ``j // bn`` is tiled, ``j % bn`` is fixed)."""

    block: str
    it: int  # the iterator's index in the block
    name: str  # the iterator's name ("j" for v_j)
    stride: int

    @property
    def where(self) -> str:
        return f"{self.block}.{self.name}"


def nearest_point(space: KnobSpace, candidate: Candidate) -> StartMapping:
    """The knob-space point nearest to ``candidate``'s schedule, with notes on what changed.

    Raises:
        SearchError: the candidate is for another workload.
        TraceError: the trace is malformed, does not apply, or would not replay as written
            (``explorer.session.check_trace``).
    """
    if candidate.workload != space.workload:
        raise SearchError(
            f"the start schedule was made for {candidate.workload.key()}, but this search tunes "
            f"{space.workload.key()}"
        )
    # Every gate first (static check, isolated replay, decisions compared): some malformed
    # traces kill the process that replays them, others are silently "repaired".
    from explorer.session import check_trace

    trace = check_trace(space.workload, candidate.trace)
    sch = _tvm.Schedule(space.workload.mod())
    _tvm.apply_trace_json(trace, sch)
    instance = _as_instance(space, sch.trace)
    if instance is not None:
        return instance
    return _map_hand_schedule(space, sch)


def start_mapping(candidate: Candidate) -> StartMapping:
    """Where ``candidate``'s schedule starts a search of its workload on its target: the
    nearest point of the space every strategy searches, with the notes on what was changed.

    What ``explorer tune --start`` prints and the notebook's search panel shows.

    Raises:
        TraceError: as ``nearest_point``.
    """
    space = KnobSpace.of(candidate.workload, candidate.target)
    return nearest_point(space, candidate)


# -- a searched record ---------------------------------------------------------------------------
def sketch_signature(trace: Any) -> tuple[str, ...]:
    """A trace's instructions without decisions or postprocessing, as lines of text."""
    simplified = trace.simplified(remove_postproc=True)
    lines = _tvm.Trace(list(simplified.insts), {}).as_python(remove_postproc=True)
    return tuple(str(line) for line in lines)


def _as_instance(space: KnobSpace, trace: Any) -> StartMapping | None:
    sig = sketch_signature(trace)
    design = space.design
    matches = []
    for s in range(space.num_sketches):
        known = sketch_signature(design.sketch_trace(s))
        if sig[: len(known)] == known:
            matches.append((len(known), s))
    if not matches:
        return None
    sketch = max(matches)[1]
    values = [
        _tvm.to_plain(trace.get_decision(inst))
        for inst in trace.insts
        if inst.kind.name in SAMPLING_KINDS
    ]
    domains = space.domains[sketch]
    if len(values) != len(domains):
        return None
    indices, notes = [], []
    for domain, value in zip(domains, values, strict=True):
        if value in domain.values:
            indices.append(domain.values.index(value))
            continue
        index = _nearest_index(domain, value)
        indices.append(index)
        notes.append(
            f"{domain.knob.label}: your decision {value} is not in this space; nearest "
            f"{domain.values[index]} used"
        )
    return StartMapping(Point(sketch, tuple(indices)), tuple(notes), exact=not notes)


def _nearest_index(domain: KnobDomain, value: JSON) -> int:
    if domain.knob.kind == "SamplePerfectTile" and isinstance(value, list):
        return _nearest_tile(domain, [int(v) for v in value])
    return 0  # a categorical or location outside its domain: the sketch's own choice


# -- a schedule made by hand ---------------------------------------------------------------------
def _map_hand_schedule(space: KnobSpace, sch: Any) -> StartMapping:
    tilings = user_tilings(sch.mod["main"])
    unroll = user_unroll(sch.mod["main"])
    kinds = [inst.kind.name for inst in sch.trace.insts]
    mine = Counter(k for k in kinds if k in _STRUCTURAL)
    # Ties (a packed sketch per panel width) go to the sketch whose panels the user's own
    # innermost splits match.
    ranked = sorted(
        range(space.num_sketches),
        key=lambda s: (
            (mine - _sketch_structure(space, s)).total(),
            (_sketch_structure(space, s) - mine).total(),
            _panel_mismatches(space, s, tilings),
            s,
        ),
    )
    notes: list[str] = []
    for sketch in ranked:
        point, knob_notes = _point_in_sketch(space, sketch, tilings, unroll)
        if space.materialize(point) is not None:
            break
        repaired = _nearest_that_builds(space, point)
        if repaired is not None:
            point, note = repaired
            knob_notes.append(note)
            break
        notes.append(f"sketch #{sketch}: your tiling does not build there; tried the next one")
    else:
        sketch = ranked[0]
        point, knob_notes = space.origin(sketch), ["no sketch builds with your tiling"]
        notes.append(f"started from sketch #{sketch}'s own decisions instead")
    if unroll and "unroll" not in _knob_roles(space, sketch):
        knob_notes.append("your unrolling is not a knob of this sketch and was dropped")
    theirs = _sketch_structure(space, sketch)
    header = f"nearest sketch: #{sketch} of {space.num_sketches}"
    added = sorted((theirs - mine).elements())
    if added:
        header += f" (it adds MetaSchedule's {', '.join(map(_snake, added))})"
    kept = sorted((mine & theirs).elements())
    if kept:
        steps = ", ".join(map(_snake, dict.fromkeys(kept)))
        header += f"; your {steps} {'are steps' if len(set(kept)) > 1 else 'is a step'} of it too"
    panels = _panels(space, sketch)
    if panels:
        header += f"; it packs {panels}"
    notes = [header, *notes, *knob_notes, *_dropped_steps(sch, kinds, mine - theirs)]
    return StartMapping(point, tuple(notes), exact=False)


def _point_in_sketch(
    space: KnobSpace, sketch: int, tilings: dict[tuple[str, int], Tiling], unroll: int
) -> tuple[Point, list[str]]:
    roles = _knob_roles(space, sketch)
    indices, notes = [], []
    for domain, role in zip(space.domains[sketch], roles, strict=True):
        knob = domain.knob
        if knob.kind == "SamplePerfectTile" and role is not None:
            tiling = tilings.get((role.block, role.it))
            index, note = _tile_choice(domain, tiling, role)
        elif knob.kind == "SampleCategorical" and role == "unroll":
            index, note = _unroll_choice(domain, unroll)
        else:
            index, note = 0, None  # the sketch's own choice (no hand step corresponds to it)
        indices.append(index)
        if note:
            notes.append(note)
    tiled = {(r.block, r.it) for r in roles if isinstance(r, _TileRole)}
    for (block, it), tiling in sorted(tilings.items(), key=lambda kv: kv[0]):
        factors = [f for f in tiling.factors if f > 1]
        if len(factors) > 1 and (block, it) not in tiled and not tiling.placed:
            notes.append(
                f"{block}.{tiling.name}: your split {' x '.join(map(str, factors))} is not a "
                "knob of this sketch and was dropped"
            )
    return Point(sketch, tuple(indices)), notes


def _tile_choice(domain: KnobDomain, tiling: Tiling | None, role: _TileRole) -> tuple[int, str]:
    n = int(domain.knob.attrs[0])
    where = role.where
    if tiling is None:
        return 0, f"{where}: not found in your schedule; the sketch's own tile {domain.values[0]}"
    extent = tiling.extent
    factors = [f for f in tiling.factors if f > 1] or [extent]
    shown = " x ".join(map(str, factors))
    if role.stride > 1:
        # The knob tiles what is left above the sketch's fixed inner split (its panels).
        above, exact = _above(factors, role.stride)
        target = _lay_out(above, n)
        in_space = target in domain.values
        index = domain.values.index(target) if in_space else _nearest_tile(domain, target)
        panels = f"the sketch's panels of {role.stride}"
        if exact and in_space and tiling.pure:
            return index, f"{where}: your split {shown} kept: {panels}, tile {target} of them"
        return index, (
            f"{where}: your split {shown} read as {panels}, nearest tile "
            f"{domain.values[index]} of them used"
        )
    target = _lay_out(factors, n)
    if tiling.pure and target in domain.values:
        index = domain.values.index(target)
        if len(factors) == 1:
            return index, f"{where}: not split by you; kept whole as tile {target}"
        return index, f"{where}: your split {shown} kept as tile {target}"
    index = _nearest_tile(domain, target)
    why = (
        f"does not divide {extent} evenly"
        if not tiling.pure
        else f"has no tile in this space (innermost factor at most {domain.knob.attrs[1]})"
    )
    return index, f"{where}: your split {shown} {why}; nearest tile {domain.values[index]} used"


def _above(factors: Sequence[int], stride: int) -> tuple[list[int], bool]:
    """The user's factors above the innermost ``stride`` iterations, and whether a boundary
    of theirs falls exactly there (``4 x 32`` above 32 is ``[4]``, exactly; ``8 x 16`` is
    ``[4]``, not: the panel boundary cuts their outer loop)."""
    rest, need, exact = list(factors), stride, True
    while rest and need > 1:
        last = rest.pop()
        if need % last == 0:
            need //= last
        elif last % need == 0:
            rest.append(last // need)
            need, exact = 1, False
        else:
            break
    if need == 1:
        return rest or [1], exact
    return [max(1, math.prod(factors) // stride)], False


def _nearest_that_builds(
    space: KnobSpace, point: Point, tries: int = 8
) -> tuple[Point, str] | None:
    """``point`` with one tile knob moved to the nearest of its next ``tries`` values that
    builds, and a note saying why; ``None`` when no such move builds. A packed sketch refuses
    a register tile too small to keep the FMA units busy: a user's matmul packed by hand with
    its rows unsplit (a one-row tile) maps onto such a point."""
    sch = space.replay(point)
    refusal = _packing.tile_refusal(sch.trace, space.target.vector_lanes_f32) if sch else None
    roles = _knob_roles(space, point.sketch)
    for k, (domain, role) in enumerate(zip(space.domains[point.sketch], roles, strict=True)):
        if not isinstance(role, _TileRole):
            continue
        current = domain.values[point.indices[k]]
        for index in _by_distance(domain, current)[1 : tries + 1]:
            moved = Point(point.sketch, (*point.indices[:k], index, *point.indices[k + 1 :]))
            if space.materialize(moved) is not None:
                why = refusal or "the sketch's checks refuse it"
                return moved, (
                    f"{role.where}: tile {current} does not build in this sketch: {why}; "
                    f"nearest tile that builds: {domain.values[index]}"
                )
    return None


def _lay_out(factors: Sequence[int], n: int) -> list[int]:
    """The user's factors on ``n`` levels: outermost first, innermost last, the rest in order
    (merged into the last middle level when there are more of them than levels)."""
    f = list(factors)
    if n == 1:
        return [math.prod(f)]
    if len(f) == 1:
        return [f[0]] + [1] * (n - 1)
    middle = f[1:-1]
    if len(middle) > n - 2:
        keep = n - 2
        middle = [*middle[: keep - 1], math.prod(middle[keep - 1 :])] if keep else []
    return [f[0], *middle, *[1] * (n - 2 - len(middle)), f[-1]]


def _nearest_tile(domain: KnobDomain, target: Sequence[int]) -> int:
    """The domain value closest to ``target`` in log-factors per level (ties: lowest index)."""
    return _by_distance(domain, target)[0]


def _by_distance(domain: KnobDomain, target: Any) -> list[int]:
    """The domain's indices, nearest to ``target`` (a tile) first in log-factors per level."""
    want = [math.log(max(t, 1)) for t in target]

    def distance(i: int) -> float:
        value = domain.values[i]
        if not isinstance(value, list) or len(value) != len(want):
            return math.inf
        return sum((math.log(v) - w) ** 2 for v, w in zip(value, want, strict=True))

    return sorted(range(domain.size), key=lambda i: (distance(i), i))


def _unroll_choice(domain: KnobDomain, steps: int) -> tuple[int, str]:
    candidates = [int(c) for c in domain.knob.attrs[0]]
    # Indices of the domain are candidate positions; compare on log(1 + steps).
    best = min(
        range(domain.size),
        key=lambda i: (abs(math.log1p(candidates[domain.values[i]]) - math.log1p(steps)), i),
    )
    depth = candidates[domain.values[best]]
    if steps == 0:
        return best, f"no unrolling in your schedule: unroll depth {depth}"
    return best, f"your unrolling ({steps} steps) approximated as unroll depth {depth}"


# Per design space (weakly held: spaces are cached and rebuilt elsewhere), per sketch.
_ROLES: weakref.WeakKeyDictionary[Any, dict[int, list[Any]]] = weakref.WeakKeyDictionary()


def _knob_roles(space: KnobSpace, sketch: int) -> list[Any]:
    """Per knob: a ``_TileRole`` for a tile, ``"unroll"`` for an unroll-depth categorical,
    ``None`` otherwise; found by replaying the sketch once."""
    known = _ROLES.setdefault(space.design, {})
    if sketch in known:
        return known[sketch]
    trace = space.design.sketch_trace(sketch)
    insts = list(trace.insts)
    unroll_vars = [
        inst.inputs[1]
        for inst in insts
        if inst.kind.name == "Annotate" and str(inst.attrs[0]) in _UNROLL_KEYS
    ]
    roles: list[Any] = []
    sch = _tvm.Schedule(space.workload.mod())

    def provider(inst: Any, inputs: list[Any], attrs: list[Any], decision: Any) -> Any:
        kind = inst.kind.name
        if kind == "SamplePerfectTile":
            roles.append(_tiled_iterator(sch, sch.get(inputs[0])))
        elif kind == "SampleCategorical":
            out = inst.outputs[0]
            roles.append("unroll" if any(out.same_as(v) for v in unroll_vars) else None)
        elif kind in SAMPLING_KINDS:
            roles.append(None)
        return decision

    trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provider)
    known[sketch] = roles
    return roles


def _tiled_iterator(sch: Any, loop: Any) -> _TileRole | None:
    """The block iterator that ``loop`` (about to be tiled) drives, and its stride there."""
    for realize, loops in realizes(sch.mod["main"]):
        if not any(lp.loop_var.same_as(loop.loop_var) for lp in loops):
            continue
        for it, total in enumerate(iter_sums(realize, loops)):
            for arg in total.args:
                if arg.source.source.same_as(loop.loop_var):
                    name = str(realize.block.iter_vars[it].var.name).removeprefix("v_")
                    return _TileRole(str(realize.block.name_hint), it, name, as_int(arg.scale))
    return None


def _panel_mismatches(
    space: KnobSpace, sketch: int, tilings: dict[tuple[str, int], Tiling]
) -> int:
    """How many of ``sketch``'s fixed inner splits (panels) no split of the user's matches."""
    count = 0
    for role in _knob_roles(space, sketch):
        if isinstance(role, _TileRole) and role.stride > 1:
            tiling = tilings.get((role.block, role.it))
            factors = [f for f in tiling.factors if f > 1] if tiling else []
            count += not (factors and _above(factors, role.stride)[1])
    return count


def _panels(space: KnobSpace, sketch: int) -> str:
    """What ``sketch`` splits by a fixed width before tiling ("C.j in panels of 32"), if any."""
    return ", ".join(
        f"{role.where} in panels of {role.stride}"
        for role in _knob_roles(space, sketch)
        if isinstance(role, _TileRole) and role.stride > 1
    )


def _sketch_structure(space: KnobSpace, sketch: int) -> Counter[str]:
    insts = space.design.sketch_trace(sketch).insts
    return Counter(inst.kind.name for inst in insts if inst.kind.name in _STRUCTURAL)


def _dropped_steps(sch: Any, kinds: Sequence[str], extra: Counter[str]) -> list[str]:
    nest = loop_kinds(sch.mod["main"])
    notes = []
    seen = Counter(kinds)
    if seen["Reorder"]:
        notes.append("your reorder is not a knob and was dropped: the sketch's loop order is used")
    if seen["Fuse"]:
        notes.append(
            "your fuse is not a knob and was dropped: the sketch fuses its outer loops itself"
        )
    if seen["Parallel"]:
        notes.append(
            f"your parallel ({', '.join(nest['parallel']) or 'a loop'}) is not a knob: the "
            "sketch parallelizes its outermost tile loops itself"
        )
    if seen["Vectorize"]:
        notes.append(
            f"your vectorize ({', '.join(nest['vectorized']) or 'a loop'}) is not a knob: the "
            "sketch vectorizes its innermost loop itself"
        )
    for kind in sorted(extra):
        notes.append(f"your {_snake(kind)} is not in the nearest sketch and was dropped")
    handled = {"Reorder", "Fuse", "Parallel", "Vectorize", "Unroll"} | _NEUTRAL | _STRUCTURAL
    for kind in sorted(set(kinds) - handled):
        notes.append(f"your {_snake(kind)} is not a knob and was dropped")
    return notes


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower().replace("s_block", "block")
