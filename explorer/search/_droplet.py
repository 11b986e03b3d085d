"""Droplet Search (coordinate descent with a t-test) and the "storm + raindrop" hybrid.

Droplet Search (Canesche et al., TACO 2024; TVM's AutoTVM ``DropletTuner``) walks the knob space
from an origin: it measures the neighbours of the incumbent, moves to a faster one when a t-test on
the repeats says the gain is real, widens its steps when a round finds nothing ("speculation"), and
stops by itself once no step size helps. "Explore as a storm, exploit as a raindrop" (arXiv
2406.20037) runs an evolutionary search first and starts Droplet from its best schedule.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from explorer.core import Candidate, TrialRecord
from explorer.errors import SearchError
from explorer.search._base import AUTO, Capabilities, SearchStrategy, check_scaled
from explorer.search._evolutionary import EvolutionarySearch
from explorer.search._rounds import population_for
from explorer.search._start import StartPlan, first_candidates, plan_start
from explorer.search._transfer import check_transfer_from
from explorer.space import KnobDomain, KnobSpace, Point

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Incumbent:
    """Droplet's current best point and the repeats it was measured with."""

    point: Point
    run_secs: tuple[float, ...]
    trial_id: int

    @property
    def mean_secs(self) -> float:
        return statistics.fmean(self.run_secs)


def coordinate_order(domain: KnobDomain) -> tuple[int, ...]:
    """The order in which Droplet walks a knob's domain: domain indices, neighbours adjacent.

    ``KnobSpace`` puts the sketch's own decision first, which says nothing about which values are
    alike. Droplet's "one step" must mean "a similar schedule", so tile knobs are ordered
    lexicographically by their factors (the same as by log-factors: neighbours share their outer
    factors and differ in the inner ones) and categorical knobs by candidate index (unroll depths
    ascend). Anything else keeps the KnobSpace order.
    """
    values = domain.values
    if domain.knob.kind in ("SamplePerfectTile", "SampleCategorical"):
        return tuple(sorted(range(len(values)), key=lambda i: values[i]))
    return tuple(range(len(values)))


class DropletSearch(SearchStrategy):
    """Coordinate descent on the knob space, faithful to AutoTVM's ``DropletTuner`` but correct.

    Algorithm:
        0. Where to descend. From a given start: in the start's sketch only. Otherwise in
           every sketch of the design space (or in ``sketch`` alone, when given): MetaSchedule's
           sketches differ in where stages are computed, which no knob move changes, so a
           descent never leaves the sketch it starts in. With several, each sketch's origin
           is measured first, and the sketches are descended one after another, fastest origin
           first (on the shipped softmax recording, 9 sketches: the descent in sketch 0 alone
           ended at its best, 0.85 of the recording's best, which lies in sketch 4).
        1. In a sketch: measure its start (the origin, or the given start) and its unit
           neighbours. The first valid measurement is the incumbent.
        2. Neighbours of the incumbent at step ``s``: along every knob, one move of ``+s`` and one
           of ``-s`` positions in that knob's ``coordinate_order``, clamped at the ends (not
           wrapped), skipping points already proposed and points TVM refuses.
        3. A measured point replaces the incumbent when its mean is lower **and**
           ``scipy.stats.ttest_ind(incumbent, candidate).pvalue <= pvalue`` (Student's test on
           the repeats; skipped when either side has a single repeat, and with ``pvalue=1``).
        4. An improvement re-centres the search: step back to 1, queue the new incumbent's
           neighbours (the rest of the old neighbourhood is dropped: it surrounds a point that
           is no longer the best).
        5. When the queue runs dry the step grows (2, 3, ...) up to ``max_step``; once every step
           size has found nothing, the incumbent is a coordinate-wise optimum of its sketch
           (no single knob, moved any distance, improves it) and the descent moves to the next
           sketch; after the last, ``ask`` returns ``[]``.

    Direction set: per-coordinate unit moves (2 per knob and step), the clean coordinate-descent
    reading of the paper. AutoTVM's binary-pattern directions only ever touch the last few knobs
    (the list is cut at ``2*batch`` entries). Within a neighbourhood the order is shuffled with the
    run's generator so no knob is favoured when a batch is smaller than the neighbourhood.

    Known defects of TVM's implementations, fixed by construction here: points are mixed-radix
    ``Point``s of a ``KnobSpace`` whose every value is a perfect tiling (defects (a), (f)); the
    queue is a deque consumed exactly once per point (defect (e): ``next[batch:-1]`` dropped a
    point); an all-invalid neighbourhood does not stall the search, it widens like any other
    round without improvement (the never-incremented ``self.iter`` of (e)).

    Args:
        pvalue: significance level of the t-test; 1.0 accepts any faster mean.
        start: where to begin: a ``Candidate`` (``session.candidate()`` or a record's; a hand-made
            schedule descends from its nearest point, ``explorer.space.nearest_point``, and is
            itself measured first as the run's reference), a ``Point``, or ``None`` for the
            sketches' origins (MetaSchedule's own sketch decisions).
        sketch: without a start, descend in this sketch only, from its origin; ``None``: in
            every sketch, fastest origin first.
        max_step: the widest step; ``None`` means the largest knob domain of the sketch
            (AutoTVM's ``max(dims)``).

    Example:
        >>> Tuner(measurer=m, store=s).run(w, t, "droplet", max_trials=512)  # doctest: +SKIP
    """

    name = "droplet"
    capabilities = Capabilities(start=True)  # a descent on measurements: no model

    def __init__(
        self,
        *,
        pvalue: float = 0.05,
        start: Candidate | Point | None = None,
        sketch: int | None = None,
        max_step: int | None = None,
    ):
        if not 0.0 < pvalue <= 1.0:
            raise ValueError(f"DropletSearch.pvalue must be in (0, 1] (got {pvalue})")
        self.pvalue = pvalue
        self.start = start
        self.sketch = sketch
        self.max_step = max_step

    # -- lifecycle ----------------------------------------------------------------------------
    def _start(self, history: list[TrialRecord]) -> list[TrialRecord]:
        self.knob_space_ = KnobSpace(self.space)
        self.start_plan_: StartPlan | None = plan_start(self.start, self.knob_space_, history)
        self.incumbent_: Incumbent | None = None
        self.step_ = 1
        self._visited: set[str] = set()
        self.num_invalid_ = 0
        self._queue: deque[Point] = deque()
        # A start plan proposes the start point itself (after the user's own schedule).
        self._first = first_candidates(self.start_plan_, history)
        sketches = self._sketches()
        self.start_point_ = (
            self.start_plan_.point
            if self.start_plan_ is not None
            else self.knob_space_.origin(sketches[0])
        )
        if self.start_plan_ is not None:
            self._visited.add(self.start_point_.key())
        # Step 0. Several sketches: survey their origins, then descend in them one by one.
        self._pending: list[int] = sketches
        self._survey: deque[Point] = deque()
        self._awaited: set[str] = set()  # proposed, not yet told
        self._origin_records: dict[int, TrialRecord] = {}
        self._later: dict[int, list[TrialRecord]] = {}  # told before their sketch's turn
        self._sketch: int | None = None
        if len(sketches) > 1:
            self._survey.extend(self.knob_space_.origin(k) for k in sketches)
            return history
        # Step 1. One sketch. Resume: the start's own measurement is the baseline, then the rest
        # is judged against it in stored order, which is the order the search saw them in.
        own = [r for r in history if self._point_of(r) == self.start_point_]
        self._enter(self._pending.pop(0), self.start_point_, queue_start=not own)
        return own + [r for r in history if self._point_of(r) != self.start_point_]

    @property
    def is_converged(self) -> bool:
        """True once every step size up to ``max_step`` failed to improve the incumbent, in
        every sketch the search descends in."""
        return (
            self._sketch is not None
            and not self._queue
            and self.step_ >= self._max_step
            and not self._pending
        )

    # -- ask/tell -----------------------------------------------------------------------------
    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = self._first[:n]
        self._first = self._first[n:]
        while len(out) < n:
            if self._sketch is None:  # step 0: surveying the sketches' origins
                if self._survey:
                    self._propose(self._survey.popleft(), out)
                    continue
                if self._awaited:
                    break  # the descent starts in the fastest sketch: wait for their times
                self._pending.sort(key=self._origin_secs)
                self._next_sketch()
                continue
            if not self._queue:
                if self.step_ < self._max_step:
                    # Speculation: nothing left at this step, so look further along every knob.
                    self.step_ += 1
                    self._queue.extend(self._neighbours(self._centre, self.step_))
                    continue
                if not self._pending or self._awaited:
                    break  # done; or the sketch's last proposals may yet improve it
                self._next_sketch()
                continue
            self._propose(self._queue.popleft(), out)
        return out

    def tell(self, records: Sequence[TrialRecord]) -> None:
        mine: list[TrialRecord] = []  # in the descent's sketch
        for r in records:
            point = self._point_of(r)
            if point is None:
                continue  # outside the knob space: nothing to compare with
            key = point.key()
            self._visited.add(key)
            self._awaited.discard(key)
            if self._sketch is None or point.sketch != self._sketch:
                if point == self.knob_space_.origin(point.sketch):
                    self._origin_records.setdefault(point.sketch, r)
                elif point.sketch in self._pending:
                    self._later.setdefault(point.sketch, []).append(r)
                continue
            mine.append(r)
        self._descend(mine)

    # -- helpers ------------------------------------------------------------------------------
    def _sketches(self) -> list[int]:
        """The sketches to descend in (step 0)."""
        if self.start_plan_ is not None:
            return [self.start_plan_.point.sketch]
        count = self.knob_space_.num_sketches
        if self.sketch is None:
            return list(range(count))
        if not 0 <= self.sketch < count:
            raise SearchError(f"DropletSearch.sketch must be in [0, {count}) (got {self.sketch})")
        return [self.sketch]

    def _origin_secs(self, sketch: int) -> float:
        """A sketch's origin's mean time; sketches whose origin failed or was not measured
        come last, in their order."""
        r = self._origin_records.get(sketch)
        if r is None or not (r.result.is_ok and r.result.run_secs):
            return math.inf
        return statistics.fmean(r.result.run_secs)

    def _next_sketch(self) -> None:
        sketch = self._pending.pop(0)
        self._enter(sketch, self.knob_space_.origin(sketch), queue_start=True)
        origin = self._origin_records.get(sketch)
        self._descend(([origin] if origin is not None else []) + self._later.pop(sketch, []))

    def _enter(self, sketch: int, start: Point, *, queue_start: bool) -> None:
        """Begin the descent in ``sketch`` from ``start`` (step 1)."""
        domains = self.knob_space_.domains[sketch]
        self._order = [coordinate_order(d) for d in domains]
        self._position = [{idx: pos for pos, idx in enumerate(o)} for o in self._order]
        dims = self.knob_space_.dims(sketch)
        self._max_step = self.max_step if self.max_step is not None else max(dims, default=1)
        self._sketch = sketch
        self._sketch_start = start
        self.incumbent_ = None
        self._queue = deque([start] if queue_start else [])
        self._recentre(start)

    def _propose(self, point: Point, out: list[Candidate]) -> None:
        key = point.key()
        if key in self._visited:
            return
        self._visited.add(key)
        candidate = self.knob_space_.materialize(point)
        if candidate is None:
            self.num_invalid_ += 1
            return
        self._awaited.add(key)
        out.append(candidate)

    def _descend(self, records: Sequence[TrialRecord]) -> None:
        """Steps 3-4 for measurements in the descent's sketch, in the order given."""
        improved = False
        for r in records:
            if not (r.result.is_ok and r.result.run_secs):
                continue
            if self.incumbent_ is None or self._is_better(r.result.run_secs):
                point = self._point_of(r)
                assert point is not None
                self.incumbent_ = Incumbent(point, tuple(r.result.run_secs), r.id)
                improved = True
        if improved:
            assert self.incumbent_ is not None
            self._recentre(self.incumbent_.point)

    def _is_better(self, run_secs: Sequence[float]) -> bool:
        assert self.incumbent_ is not None
        best = self.incumbent_.run_secs
        if statistics.fmean(run_secs) >= statistics.fmean(best):
            return False
        if self.pvalue >= 1.0 or len(best) < 2 or len(run_secs) < 2:
            return True
        # scipy.stats takes about a second to import: only a run that tests pays it
        from scipy import stats

        pvalue = stats.ttest_ind(best, run_secs).pvalue
        # Two constant samples with different means give p = 0; NaN only for equal ones.
        return bool(math.isnan(pvalue) or pvalue <= self.pvalue)

    def _recentre(self, point: Point) -> None:
        self._centre = point
        self.step_ = 1
        # an unmeasured start stays queued
        keep = [p for p in self._queue if p == self._sketch_start]
        self._queue = deque(keep + self._neighbours(point, 1))

    def _neighbours(self, point: Point, step: int) -> list[Point]:
        out: dict[str, Point] = {}
        for k, (order, position) in enumerate(zip(self._order, self._position, strict=True)):
            here = position[point.indices[k]]
            for sign in (1, -1):
                there = min(max(here + sign * step, 0), len(order) - 1)
                if there == here:
                    continue
                indices = list(point.indices)
                indices[k] = order[there]
                p = Point(point.sketch, tuple(indices))
                if p.key() not in self._visited:
                    out.setdefault(p.key(), p)
        points = list(out.values())
        self.rng.shuffle(points)
        return points

    def _point_of(self, record: TrialRecord) -> Point | None:
        return self.knob_space_.point_of_candidate(record.candidate)


class EvolutionaryDropletSearch(SearchStrategy):
    """Explore as a storm, exploit as a raindrop: MetaSchedule's evolutionary search for the
    first ``explore_trials`` trials, then Droplet Search from the best of them.

    The best explored trial is the one with the lowest mean over its repeats (Droplet's own
    criterion); a schedule outside the knob space (e.g. a MetaSchedule parallel mutation) is
    projected onto it. Droplet then runs until the budget ends or it converges (``ask`` -> []).

    Args:
        explore_trials: trials given to the evolutionary search (the paper uses 300);
            ``"auto"``: 30% of the run's trial budget, between 8 and 300 (300 without a
            budget), so that a small run also reaches its Droplet phase.
        start: a schedule to start from; it seeds the evolutionary phase (see
            ``EvolutionarySearch``), and Droplet then descends from the best explored trial,
            the start included.
        pvalue: Droplet's t-test level.
        max_step: Droplet's widest step (``None``: the largest knob domain).
        population_size, genetic_num_iters, num_trials_per_iter, num_warmup_samples,
        num_threads, transfer_from: forwarded to ``EvolutionarySearch``; ``"auto"`` scales to
            ``explore_trials``, the evolutionary phase's budget.

    The run's settings record the numbers the ``"auto"`` values came to.
    """

    name = "evolutionary+droplet"
    # The evolutionary phase's model (its predictions); the Droplet phase uses none.
    capabilities = EvolutionarySearch.capabilities

    def __init__(
        self,
        *,
        explore_trials: int | str = AUTO,
        start: Candidate | Point | None = None,
        pvalue: float = 0.05,
        max_step: int | None = None,
        population_size: int | str = AUTO,
        genetic_num_iters: int = 4,
        num_trials_per_iter: int | str = AUTO,
        num_warmup_samples: int | str = AUTO,
        num_threads: int = 1,
        transfer_from: str | None = None,
    ):
        check_transfer_from("EvolutionaryDropletSearch", transfer_from)
        for name, value in (
            ("explore_trials", explore_trials),
            ("population_size", population_size),
            ("num_trials_per_iter", num_trials_per_iter),
            ("num_warmup_samples", num_warmup_samples),
        ):
            check_scaled("EvolutionaryDropletSearch", name, value)
        self.explore_trials = explore_trials
        self.start = start
        self.pvalue = pvalue
        self.max_step = max_step
        self.population_size = population_size
        self.genetic_num_iters = genetic_num_iters
        self.num_trials_per_iter = num_trials_per_iter
        self.num_warmup_samples = num_warmup_samples
        self.num_threads = num_threads
        self.transfer_from = transfer_from

    def _start(self, history: list[TrialRecord]) -> list[TrialRecord]:
        self._history: list[TrialRecord] = history
        self.explore_trials_ = self._scaled("explore_trials", default=300, share=0.3, minimum=8)
        # The evolutionary phase's rounds and warm-up scale to its own share of the budget.
        explore = self.explore_trials_
        per_iter = self._scaled("num_trials_per_iter", default=64, budget=explore)
        warmup = self._scaled("num_warmup_samples", default=100, budget=explore)
        population = population_for(self.population_size, per_iter)
        self.resolved_["population_size"] = population
        self.explorer_ = EvolutionarySearch(
            population_size=population,
            genetic_num_iters=self.genetic_num_iters,
            num_trials_per_iter=per_iter,
            num_warmup_samples=warmup,
            num_threads=self.num_threads,
            transfer_from=self.transfer_from,
            start=self.start,
        )
        self.droplet_: DropletSearch | None = None
        self._droplet_rng, explore_rng = self.rng.spawn(2)
        if len(self._history) < self.explore_trials_:
            self.explorer_.reset(
                self.space, rng=explore_rng, history=self._history, store=self.record_store
            )
            learned = self.explorer_.resolved_.get("transfer_trials")
            if learned is not None:
                self.resolved_["transfer_trials"] = learned
        else:
            self._start_droplet()
        return []  # the delegates were told the history

    @property
    def phase(self) -> str:
        """``"explore"`` (evolutionary) or ``"exploit"`` (Droplet)."""
        return "explore" if self.droplet_ is None else "exploit"

    def ask(self, n: int) -> list[Candidate]:
        if self.droplet_ is None:
            left = self.explore_trials_ - len(self._history)
            batch = self.explorer_.ask(min(n, left))
            if batch:
                return batch
            # The evolutionary search ran dry before its share: exploit what it found.
            self._start_droplet()
        assert self.droplet_ is not None
        return self.droplet_.ask(n)

    def tell(self, records: Sequence[TrialRecord]) -> None:
        self._history.extend(records)
        if self.droplet_ is not None:
            self.droplet_.tell(records)
            return
        self.explorer_.tell(records)
        if len(self._history) >= self.explore_trials_:
            self._start_droplet()

    def predictions(self, candidates: Sequence[Candidate]) -> list[dict[str, float]]:
        if self.droplet_ is None:
            return self.explorer_.predictions(candidates)
        return [{} for _ in candidates]

    def _start_droplet(self) -> None:
        explored = self._history[: self.explore_trials_]
        ok = [r for r in explored if r.result.is_ok and r.result.run_secs]
        best = min(ok, key=lambda r: statistics.fmean(r.result.run_secs), default=None)
        if best is None:
            log.warning("every explored trial failed; Droplet Search starts from the origin")
        self.best_explored_: TrialRecord | None = best
        self.droplet_ = DropletSearch(
            pvalue=self.pvalue,
            start=None if best is None else best.candidate,
            max_step=self.max_step,
        )
        self.droplet_.reset(self.space, rng=self._droplet_rng, history=self._history)
