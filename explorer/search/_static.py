"""Tuna's search: an evolution strategy scored only by the static model, then a few measurements.

Tuna (Wang et al., arXiv 2104.14641) searches with an evolution strategy whose fitness is the
static analytical score, so nothing runs on the hardware during the search; only the final best
candidates are measured for the reported number. The paper's ES variant and hyper-parameters are
unknown here; ours:

* Individuals are ``KnobSpace`` points (a sketch plus one index per knob).
* Generation 0: ``num_offspring`` random points. Each later generation draws ``num_offspring``
  children from the ``num_parents`` parents, each a uniformly chosen parent with **one random
  knob changed** (AutoTVM's ``random_walk`` step), never a point scored before.
* Selection is (mu, lambda) with elitism: the next parents are the best ``num_parents`` of the
  children plus the ``num_elites`` best parents, so the best point found is never lost.
* Unbuildable points (TVM refuses the replay or the postprocessors) score 0.
* After ``num_generations``, the ``top_k`` best distinct points ever scored, minus any already
  measured, are the only proposals: ``ask`` hands them out (at most ``n`` per call) and then
  returns ``[]``. ``tell`` does not change them (the static model does not learn).

The whole ES runs on the first ``ask`` (compiling ~16 + 64 x 20 candidates costs minutes on 2
cores, in one worker process per core; scores are cached per trace).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from explorer.core import Candidate, TrialRecord, trace_key
from explorer.cost_models import StaticCostModel
from explorer.search._base import Capabilities, SearchStrategy
from explorer.space import KnobSpace, Point


class StaticSearch(SearchStrategy):
    """Evolve points under the static model, measure only the final top-k (Tuna).

    Args:
        top_k: how many of the best-scored points are proposed for measurement in total.
        num_parents: mu, parents kept per generation.
        num_offspring: lambda, children per generation (and the random initial population).
        num_generations: generations after the initial population.
        num_elites: best parents that survive into the next generation.
        model: the static model (default: a ``StaticCostModel`` with default weights, closed
            once the search has its proposals); pass a calibrated one to use per-target
            weights: it stays the caller's, who closes it.

    Example:
        >>> tuner.run(workload, target, StaticSearch(top_k=8), max_trials=8)  # doctest: +SKIP
    """

    name = "static"
    # Ranks the space by its static model alone and measures only the top k: a start point
    # would not change what it proposes. Its one model is the static one (``model=`` takes a
    # calibrated instance of it).
    capabilities = Capabilities(start=False, cost_models=("static",))

    def __init__(
        self,
        *,
        top_k: int = 8,
        num_parents: int = 16,
        num_offspring: int = 64,
        num_generations: int = 20,
        num_elites: int = 4,
        model: StaticCostModel | None = None,
    ):
        if min(top_k, num_parents, num_offspring) < 1 or num_generations < 0:
            raise ValueError("StaticSearch: sizes must be positive and generations >= 0")
        self.top_k = top_k
        self.num_parents = num_parents
        self.num_offspring = num_offspring
        self.num_generations = num_generations
        self.num_elites = num_elites
        self.model = model
        self._told: set[str] = set()
        self._proposals: list[Candidate] | None = None
        self._scores: dict[str, float] = {}  # trace key -> static score of proposed candidates

    def _start(self, history: list[TrialRecord]) -> list[TrialRecord]:
        self.model_ = self.model if self.model is not None else StaticCostModel()
        self.knob_space_ = KnobSpace(self.space)
        self._proposals = None
        self._told = set()
        self._scores = {}
        self.num_scored_ = 0
        return history

    def tell(self, records: Sequence[TrialRecord]) -> None:
        for r in records:
            self._told.add(trace_key(r.candidate.trace))

    def ask(self, n: int) -> list[Candidate]:
        if self._proposals is None:
            try:
                self._proposals = self._evolve()
            finally:
                if self.model is None:  # ours: its compile workers are not needed any more
                    self.model_.close()  # (a model the caller passed is the caller's to close)
        out, rest = self._proposals[:n], self._proposals[n:]
        self._proposals = rest
        return out

    def predictions(self, candidates: Sequence[Candidate]) -> list[dict[str, float]]:
        return [
            {"static": self._scores[k]} if (k := trace_key(c.trace)) in self._scores else {}
            for c in candidates
        ]

    # -- the evolution strategy -----------------------------------------------------------------
    def _evolve(self) -> list[Candidate]:
        ks = self.knob_space_
        archive: dict[Point, tuple[float, Candidate | None]] = {}

        most = self.num_offspring * (self.num_generations + 1)

        def score(points: list[Point]) -> None:
            fresh = [p for p in dict.fromkeys(points) if p not in archive]
            cands = [ks.materialize(p) for p in fresh]
            built = [c for c in cands if c is not None]
            values = iter(self.model_.predict(built)) if built else iter(())
            for p, c in zip(fresh, cands, strict=True):
                archive[p] = (float(next(values)) if c is not None else 0.0, c)
            self.num_scored_ += len(fresh)
            self._working(f"static model: {self.num_scored_} of up to {most} candidates scored")

        self._working(f"static model: scoring up to {most} candidates before measuring")

        # Step 1. Random initial population.
        initial = self._fresh(lambda: ks.random_point(self.rng), archive, self.num_offspring)
        score(initial)
        parents = self._best(initial, archive, self.num_parents)
        # Step 2. Generations of one-knob mutations; (mu, lambda) selection plus elites.
        for _ in range(self.num_generations):
            if not parents:
                break

            def mutant(ps: list[Point] = parents) -> Point:
                return self._mutate(ps[int(self.rng.integers(len(ps)))])

            children = self._fresh(mutant, archive, self.num_offspring)
            if not children:
                break  # the neighbourhood of the parents is exhausted
            score(children)
            pool = list(dict.fromkeys([*children, *parents[: self.num_elites]]))
            parents = self._best(pool, archive, self.num_parents)
        # Step 3. The best distinct, buildable, not yet measured points ever scored.
        ranked = sorted(archive.items(), key=lambda kv: (-kv[1][0], kv[0].key()))
        out: list[Candidate] = []
        for _, (value, cand) in ranked:
            if len(out) >= self.top_k:
                break
            if cand is None or value <= 0:
                continue
            key = trace_key(cand.trace)
            if key in self._told or key in self._scores:
                continue
            self._scores[key] = value
            out.append(cand)
        return out

    def _fresh(
        self, draw: Callable[[], Point], archive: Mapping[Point, object], count: int
    ) -> list[Point]:
        out: list[Point] = []
        seen: set[Point] = set()
        for _ in range(count * 10):  # small spaces run out of new points
            if len(out) >= count:
                break
            p = draw()
            if p in archive or p in seen:
                continue
            seen.add(p)
            out.append(p)
        return out

    def _mutate(self, point: Point) -> Point:
        dims = self.knob_space_.dims(point.sketch)
        free = [i for i, d in enumerate(dims) if d > 1]
        if not free:
            return point
        i = free[int(self.rng.integers(len(free)))]
        new = int(self.rng.integers(dims[i] - 1))
        new += new >= point.indices[i]  # any value but the current one
        indices = list(point.indices)
        indices[i] = new
        return Point(point.sketch, tuple(indices))

    @staticmethod
    def _best(
        points: list[Point], archive: Mapping[Point, tuple[float, object]], k: int
    ) -> list[Point]:
        good = [p for p in points if archive[p][0] > 0]
        return sorted(good, key=lambda p: (-archive[p][0], p.key()))[:k]
