"""Value-function search: decide knobs one at a time with a learned ``V``, measure only results.

Steiner et al. (MLSys 2021) schedule greedily with a model of the best
performance reachable from a partial schedule, with no hardware runs during the decisions, and
train that model by value iteration (beam search with the current model, benchmark the resulting
schedules, refit). Here, over the shared knob space:

* **Inference.** A beam search over knob prefixes in instruction order. The roots are the empty
  prefixes of every sketch; a step expands each beam state by every value of its next knob and
  keeps the ``beam_width`` children with the highest ``V``. ``beam_width=1`` is the paper's
  greedy policy. The complete children met on the way are ranked by ``V``.
* **Value iteration.** Every ``ask`` is one round: run the beam search with the current model and
  propose the ``proposals_per_round`` best complete points not measured yet (at most ``n``),
  taking the best completion of each final beam state first; the beam is at least
  ``proposals_per_round`` wide so that one round's proposals are not near-copies. The first
  proposal of a round is the noiseless greedy/beam choice; the others explore, ranking by ``V``
  plus Gaussian noise (``exploration``), because a model fitted on a few dozen points rates most
  unexplored states alike (our addition: the paper's exploration is not known here). Before the
  model has ``min_samples`` samples a round proposes random points instead.
  ``tell`` adds the measurements to the model's data and refits, so the next round searches with
  a better ``V``. When the beam only reaches measured points, the beam is widened (doubling, up
  to ``max_beam_width``); failing that, random points ranked by ``V`` keep the run going.
* **Data.** The strategy trains on the record database given as its ``store`` constructor
  argument (or, when that is ``None``, the one the ``Tuner`` passes to ``reset``): every trial on
  the target (this and other workloads, any strategy) before the first round, as the paper
  trains its model offline: ``transfer_from="auto"`` by default; ``None`` keeps to this
  workload's trials. A model fitted beforehand (``ValueModel.fit_from_store``) can be passed as
  ``model`` instead.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from explorer.core import Candidate, RecordStore, TrialRecord, trace_key
from explorer.cost_models import ValueModel, samples_from_records
from explorer.search._base import Capabilities, SearchStrategy
from explorer.search._start import StartPlan, first_candidates, plan_start
from explorer.search._transfer import check_transfer_from
from explorer.space import KnobSpace, Point
from explorer.workloads import Workload


class ValueSearch(SearchStrategy):
    """Greedy/beam decisions under a learned value function, refined by value iteration.

    Args:
        store: the record database to train on before the first round (``None``: only ``model``
            and what this run measures).
        model: the value model (default: a fresh ``ValueModel``); refitted after every batch.
        workloads: restrict the store's trials to these workloads (default: all, or this one
            without transfer).
        transfer_from: ``"auto"`` (default): learn from the store's trials of every workload
            on the target; ``None``: of this workload only.
        beam_width: states kept per step (1 = greedy).
        max_beam_width: widest beam tried when the beam only reaches measured points.
        proposals_per_round: complete points proposed per ``ask`` (one value-iteration round).
        num_random_fallback: random points ranked by ``V`` when the beam is exhausted.
        min_samples: below this many training samples the model knows nothing yet, so a round
            proposes random points instead (the paper initialises ``V`` from benchmarked random
            schedules).
        exploration: standard deviation of the noise added to ``V`` (normalised log-throughput)
            for a round's proposals after the first; 0 = pure beam search.
        start: a schedule to start from (``session.candidate()``, a record's candidate or a
            ``Point``): measured first as the run's reference, then its nearest knob-space
            point; the random points of the rounds before the model knows anything are then
            random walks of one to three knob changes from that point, not uniform draws.

    Example:
        >>> tuner.run(w, target, ValueSearch(store=store), max_trials=32)  # doctest: +SKIP
    """

    name = "value"
    capabilities = Capabilities(start=True, cost_models=("value",), transfer=True)

    def __init__(
        self,
        *,
        store: RecordStore | None = None,
        model: ValueModel | None = None,
        workloads: Sequence[Workload] | None = None,
        beam_width: int = 1,
        max_beam_width: int = 16,
        proposals_per_round: int = 4,
        num_random_fallback: int = 64,
        min_samples: int = 8,
        exploration: float = 0.1,
        transfer_from: str | None = "auto",
        start: Candidate | Point | None = None,
    ):
        check_transfer_from("ValueSearch", transfer_from)
        if min(beam_width, max_beam_width, proposals_per_round) < 1:
            raise ValueError("ValueSearch: beam widths and proposals_per_round must be >= 1")
        self.store = store
        self.model = model
        self.workloads = workloads
        self.beam_width = beam_width
        self.max_beam_width = max_beam_width
        self.proposals_per_round = proposals_per_round
        self.num_random_fallback = num_random_fallback
        self.min_samples = min_samples
        self.exploration = exploration
        self.transfer_from = transfer_from
        self.start = start
        self._seen: set[str] = set()
        self._predicted: dict[str, float] = {}

    def _start(self, history: list[TrialRecord]) -> list[TrialRecord]:
        self.knob_space_ = KnobSpace(self.space)
        self.model_ = self.model if self.model is not None else ValueModel()
        train_on = self.store if self.store is not None else self.record_store
        if train_on is not None:
            workloads = self.workloads
            if workloads is None and self.transfer_from is None:
                workloads = [self.space.workload]
            self.model_.fit_from_store(train_on, workloads=workloads, target=self.space.target)
            here = self.space.workload
            self.resolved_["transfer_trials"] = sum(
                s.workload != here for s in self.model_.samples_
            )
        self._seen = set()
        self._predicted = {}
        self.num_rounds_ = 0
        self.start_plan_: StartPlan | None = plan_start(self.start, self.knob_space_, history)
        self._first = first_candidates(self.start_plan_, history)
        return history

    def tell(self, records: Sequence[TrialRecord]) -> None:
        for r in records:
            self._seen.add(trace_key(r.candidate.trace))
            d = r.candidate.decisions
            if isinstance(d, dict) and "point" in d:
                self._seen.add(f"p:{d['sketch']}:{list(d['point'])}")
        self.model_.add(samples_from_records(records))

    def predictions(self, candidates: Sequence[Candidate]) -> list[dict[str, float]]:
        return [
            {"value": self._predicted[k]} if (k := trace_key(c.trace)) in self._predicted else {}
            for c in candidates
        ]

    # -- one round of value iteration -----------------------------------------------------------
    def ask(self, n: int) -> list[Candidate]:
        if self._first:
            out, self._first = self._first[:n], self._first[n:]
            for cand in out:
                self._seen.add(trace_key(cand.trace))
                point = self.knob_space_.point_of_candidate(cand)
                if point is not None:
                    self._seen.add(f"p:{point.sketch}:{list(point.indices)}")
            return out
        want = min(n, self.proposals_per_round)
        out = []
        if len(self.model_.samples_) >= self.min_samples:
            # Step 1. The model's own choice: the greedy (or beam) schedule, no noise.
            self._take(self.beam_search(self.beam_width), min(1, want), out)
            # Step 2. The rest of the round explores: a beam at least one state per proposal
            # wide (else a round measures near-copies differing in the last knob), over V plus
            # Gaussian noise, so that states the few data rate alike are tried in turn.
            width = max(self.beam_width, want)
            while len(out) < want:
                ranked = self.beam_search(width, noise=self.exploration)
                self._take(_diverse(ranked), want, out)
                if len(out) >= want or width >= self.max_beam_width:
                    break
                width = min(2 * width, self.max_beam_width)
        if len(out) < want:
            # Step 3. No data yet (the paper initialises V from benchmarked random schedules),
            # or the beams only reach measured points: random points, best V first (walks
            # from the start point first, when there is one).
            if self.start_plan_ is not None:
                self._take(self._rank(self._walks_from_start()), want, out)
            points = list(
                dict.fromkeys(
                    self.knob_space_.random_point(self.rng)
                    for _ in range(self.num_random_fallback)
                )
            )
            self._take(self._rank(points), want, out)
        self.num_rounds_ += 1
        return out

    def _walks_from_start(self) -> list[Point]:
        """Random points one to three knob changes away from the start point."""
        assert self.start_plan_ is not None
        start = self.start_plan_.point
        dims = self.knob_space_.dims(start.sketch)
        points = []
        for _ in range(self.num_random_fallback if dims else 0):
            indices = list(start.indices)
            for _ in range(int(self.rng.integers(1, 4))):
                k = int(self.rng.integers(len(dims)))
                indices[k] = int(self.rng.integers(dims[k]))
            points.append(Point(start.sketch, tuple(indices)))
        return list(dict.fromkeys(points))

    def _take(self, ranked: list[tuple[float, Point]], want: int, out: list[Candidate]) -> None:
        for value, point in ranked:
            if len(out) >= want:
                return
            pkey = f"p:{point.sketch}:{list(point.indices)}"
            if pkey in self._seen:
                continue
            self._seen.add(pkey)
            cand = self.knob_space_.materialize(point)
            if cand is None:
                continue  # unbuildable: skipped (it is never measured, so never learned)
            key = trace_key(cand.trace)
            if key in self._seen:
                continue
            self._seen.add(key)
            self._predicted[key] = float(value)
            out.append(cand)

    def beam_search(self, width: int, *, noise: float = 0.0) -> list[tuple[float, Point]]:
        """Complete points reached by a beam of ``width`` states, best ``V`` first (``V`` plus
        Gaussian noise of standard deviation ``noise`` when exploring)."""
        ks = self.knob_space_
        frontier: list[tuple[int, tuple[int, ...]]] = [(s, ()) for s in range(ks.num_sketches)]
        complete: list[tuple[float, Point]] = []
        for s, _ in frontier:
            if not ks.domains[s]:  # a sketch without knobs is complete at the root
                complete.append((float(self._values(s, [()])[0]), Point(s, ())))
        frontier = [(s, p) for s, p in frontier if ks.domains[s]]
        while frontier:
            children: list[tuple[float, int, tuple[int, ...]]] = []
            for s, prefix in frontier:
                size = ks.domains[s][len(prefix)].size
                kids = [(*prefix, i) for i in range(size)]
                values = self._values(s, kids)
                if noise > 0:
                    values = values + self.rng.normal(0.0, noise, len(values))
                for v, kid in zip(values, kids, strict=True):
                    children.append((float(v), s, kid))
            # Stable order on ties (e.g. an untrained model): sketch, then index 0 first, which
            # is the sketch's own decision for every knob.
            children.sort(key=lambda c: (-c[0], c[1], c[2]))
            frontier = []
            for v, s, kid in children:
                if len(kid) == len(ks.domains[s]):
                    complete.append((v, Point(s, kid)))
                elif len(frontier) < width:
                    frontier.append((s, kid))
        complete.sort(key=lambda c: (-c[0], c[1].sketch, c[1].indices))
        return complete

    def _values(self, sketch: int, prefixes: list[tuple[int, ...]]) -> np.ndarray:
        domains = self.knob_space_.domains[sketch]
        decided = [[domains[i].values[j] for i, j in enumerate(p)] for p in prefixes]
        return self.model_.values(self.knob_space_, sketch, decided)

    def _rank(self, points: list[Point]) -> list[tuple[float, Point]]:
        scored = []
        for sketch in sorted({p.sketch for p in points}):
            mine = [p for p in points if p.sketch == sketch]
            values = self._values(sketch, [p.indices for p in mine])
            scored += [(float(v), p) for v, p in zip(values, mine, strict=True)]
        order = {p: i for i, p in enumerate(points)}
        # Ties (an untrained model) keep the random draw order, so the fallback stays random.
        scored.sort(key=lambda c: (-c[0], order[c[1]]))
        return scored


def _diverse(ranked: list[tuple[float, Point]]) -> list[tuple[float, Point]]:
    """The best completion of every parent state first (by ``V``), then the rest."""
    first: list[tuple[float, Point]] = []
    rest: list[tuple[float, Point]] = []
    parents: set[tuple[int, tuple[int, ...]]] = set()
    for value, point in ranked:
        parent = (point.sketch, point.indices[:-1])
        (rest if parent in parents else first).append((value, point))
        parents.add(parent)
    return first + rest
