"""Droplet Search and the evolutionary+droplet hybrid, on synthetic landscapes and for real."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from explorer.core._records import TrialRecord
from explorer.measure import (
    LocalMeasurer,
    MeasureConfig,
    MeasureResult,
    ReplayMeasurer,
    trace_key,
)
from explorer.search import DropletSearch, EvolutionaryDropletSearch, make_strategy
from explorer.search._droplet import coordinate_order
from explorer.space import DesignSpace, KnobSpace, Point
from explorer.storage import get_store
from explorer.tuner import Tuner
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

SMALL = get_workload("matmul", M=16, N=16, K=16)
MATMUL32 = get_workload("matmul", M=32, N=32, K=32)


@pytest.fixture(scope="module")
def space(cpu_target):
    return DesignSpace.of(SMALL, cpu_target)


@pytest.fixture(scope="module")
def knobs(space):
    return KnobSpace(space)


def _positions(knobs: KnobSpace, point: Point) -> list[int]:
    """The point in Droplet's coordinates (rank of each index in its knob's walk order)."""
    orders = [coordinate_order(d) for d in knobs.domains[point.sketch]]
    return [o.index(i) for o, i in zip(orders, point.indices, strict=True)]


def _bowl(knobs: KnobSpace, optimum: list[int], *, noise: float = 0.01, repeats: int = 5):
    """A separable convex landscape in Droplet's coordinates, with seeded per-point noise."""

    def lookup(candidate):
        point = knobs.point_of_candidate(candidate)
        pos = _positions(knobs, point)
        dims = knobs.dims(point.sketch)
        base = 1e-3 * (1 + sum(abs(p - o) / d for p, o, d in zip(pos, optimum, dims, strict=True)))
        seed = int(hashlib.sha1(point.key().encode()).hexdigest()[:8], 16)
        rng = np.random.default_rng(seed)
        run_secs = tuple(float(x) for x in base * (1 + noise * rng.standard_normal(repeats)))
        return MeasureResult(MeasureStatus.OK, run_secs=run_secs, flops=1)

    return lookup


def _record(candidate, i, run_secs=(), status=MeasureStatus.OK):
    return TrialRecord(
        i, 1, i, candidate, MeasureResult(status, run_secs=tuple(run_secs)), {}, 0.0
    )


def _drive(strategy, space, lookup, *, batch=6, max_trials=2000, seed=0, history=()):
    """A minimal Tuner loop without a store: returns every told record."""
    strategy.reset(space, rng=np.random.default_rng(seed), history=list(history))
    measurer = ReplayMeasurer(lookup)
    told = list(history)
    while len(told) < max_trials:
        batch_cands = strategy.ask(min(batch, max_trials - len(told)))
        if not batch_cands:
            break
        results = measurer.measure(batch_cands)
        recs = [
            _record(c, len(told) + i, r.run_secs)
            for i, (c, r) in enumerate(zip(batch_cands, results, strict=True))
        ]
        strategy.tell(recs)
        told += recs
    return told


def test_ask_respects_n_never_repeats_and_starts_at_the_origin(space, knobs):
    s = DropletSearch(sketch=0)
    s.reset(space, rng=np.random.default_rng(0))
    first = s.ask(5)
    assert len(first) == 5
    assert knobs.point_of_candidate(first[0]) == knobs.origin(0)
    # Untold, the search keeps proposing fresh unit neighbours of the origin, then wider ones.
    seen = {knobs.point_of_candidate(c).key() for c in first}
    for _ in range(4):
        batch = s.ask(3)
        assert len(batch) <= 3
        keys = {knobs.point_of_candidate(c).key() for c in batch}
        assert not keys & seen
        seen |= keys


def test_converges_to_the_optimum_and_stops_itself(space, knobs):
    optimum = [7, 25, 3, 2]
    s = DropletSearch(sketch=0)
    # One step gains about 1/35 (3%) here; with noise this much smaller the t-test sees it.
    told = _drive(s, space, _bowl(knobs, optimum, noise=0.002))
    assert s.ask(8) == [] and s.is_converged
    assert _positions(knobs, s.incumbent_.point) == optimum
    assert len(told) < knobs.size(0) / 20  # coordinate descent, not enumeration
    keys = [knobs.point_of_candidate(r.candidate).key() for r in told]
    assert len(keys) == len(set(keys))


def test_the_t_test_rejects_a_noisy_non_improvement(space, knobs):
    def run(pvalue):
        s = DropletSearch(pvalue=pvalue, sketch=0)
        s.reset(space, rng=np.random.default_rng(1))
        origin, neighbour = s.ask(2)
        s.tell([_record(origin, 0, [1.0e-3, 1.2e-3, 0.8e-3, 1.1e-3, 0.9e-3])])
        # 2% faster on average, but the spread is 20%: not significant.
        s.tell([_record(neighbour, 1, [0.98e-3, 1.18e-3, 0.78e-3, 1.08e-3, 0.88e-3])])
        return (
            s.incumbent_.point,
            knobs.point_of_candidate(origin),
            knobs.point_of_candidate(neighbour),
        )

    best, origin, _ = run(0.05)
    assert best == origin
    best, _, neighbour = run(1.0)
    assert best == neighbour


def test_a_clear_improvement_passes_the_t_test(space, knobs):
    s = DropletSearch(pvalue=0.05, sketch=0)
    s.reset(space, rng=np.random.default_rng(1))
    origin, neighbour = s.ask(2)
    s.tell([_record(origin, 0, [1.0e-3, 1.01e-3, 0.99e-3])])
    s.tell([_record(neighbour, 1, [0.5e-3, 0.51e-3, 0.49e-3])])
    assert s.incumbent_.point == knobs.point_of_candidate(neighbour)
    assert s.step_ == 1


def test_failures_and_invalid_points_are_skipped(space, knobs):
    s = DropletSearch(sketch=0)
    s.reset(space, rng=np.random.default_rng(0))
    first = s.ask(4)
    s.tell([_record(c, i, status=MeasureStatus.BUILD_ERROR) for i, c in enumerate(first)])
    assert s.incumbent_ is None
    more = s.ask(4)  # the origin failed, its other neighbours are still tried
    assert more and not {trace_key(c.trace) for c in more} & {trace_key(c.trace) for c in first}


def test_starts_from_a_given_candidate_and_resumes(space, knobs):
    start_point = Point(0, tuple(min(3, n - 1) for n in knobs.dims(0)))
    start = knobs.materialize(start_point)
    # A candidate without a point (e.g. from a manual session) is located through its trace.
    bare = type(start)(workload=start.workload, target=start.target, trace=start.trace)
    s = DropletSearch(start=bare)
    s.reset(space, rng=np.random.default_rng(0))
    assert s.start_point_ == start_point
    first = s.ask(3)
    assert knobs.point_of_candidate(first[0]) == start_point
    # A schedule is not a setting: the run records a digest (the start trial holds the trace).
    assert set(s.settings()["start"]) == {"trace_sha256"}

    lookup = _bowl(knobs, [5, 20, 2, 3])
    told = _drive(DropletSearch(sketch=0), space, lookup, max_trials=12)
    resumed = DropletSearch(sketch=0)
    resumed.reset(space, rng=np.random.default_rng(0), history=told)
    assert resumed.incumbent_ is not None
    new = resumed.ask(6)
    assert new and not {trace_key(c.trace) for c in new} & {
        trace_key(r.candidate.trace) for r in told
    }


def _bowls(knobs: KnobSpace, base: dict[int, float]):
    """Per sketch, a bowl centred in the middle of its coordinates, ``base[sketch]`` deep at
    the origin's corner: the sketches' origins rank as ``base`` does."""

    def lookup(candidate):
        point = knobs.point_of_candidate(candidate)
        dims = knobs.dims(point.sketch)
        pos = _positions(knobs, point)
        far = sum(abs(p - d // 2) / d for p, d in zip(pos, dims, strict=True))
        secs = base[point.sketch] * (1 + far)
        return MeasureResult(
            MeasureStatus.OK, run_secs=(secs, secs * 1.001, secs * 0.999), flops=1
        )

    return lookup


def _origins(num_sketches: int) -> dict[int, float]:
    """Origin times: sketch 2 fastest, then 0, 1 and the packed sketches in order."""
    return {0: 2e-3, 1: 3e-3, 2: 1e-3} | {k: (k + 1) * 1e-3 for k in range(3, num_sketches)}


def test_without_a_start_every_sketch_is_descended_fastest_origin_first(space, knobs):
    """MetaSchedule's sketches differ in where stages are computed, which no knob move
    changes: a descent in the first sketch alone ended at 0.85 of the shipped softmax
    recording's best, which lies in another sketch. (Sketches 3 on are the packed ones: one
    with AVX-512's 16 lanes, two with AVX2's 8.)"""
    n = knobs.num_sketches
    assert n == space.num_sketches > space.num_metaschedule_sketches == 3
    s = DropletSearch()
    lookup = _bowls(knobs, _origins(n))
    s.reset(space, rng=np.random.default_rng(0))
    first = s.ask(2 * n)  # the survey: each sketch's origin, and the descent waits for their times
    assert [knobs.point_of_candidate(c) for c in first] == [knobs.origin(k) for k in range(n)]
    told = _drive(
        s, space, lookup, history=[_record(c, i, lookup(c).run_secs) for i, c in enumerate(first)]
    )
    sketches = [knobs.point_of_candidate(r.candidate).sketch for r in told[n:]]
    # sketch 2 (fastest origin) to its end, then 0, 1 and the packed ones: each once, in turn
    assert [k for i, k in enumerate(sketches) if i == 0 or sketches[i - 1] != k] == [
        2,
        0,
        1,
        *range(3, n),
    ]
    assert s.ask(4) == [] and s.is_converged
    keys = [knobs.point_of_candidate(r.candidate).key() for r in told]
    assert len(keys) == len(set(keys))


def test_a_resumed_survey_descends_where_it_left_off(space, knobs):
    lookup = _bowls(knobs, _origins(knobs.num_sketches))
    part = _drive(DropletSearch(), space, lookup, max_trials=20)
    assert knobs.point_of_candidate(part[-1].candidate).sketch == 2  # mid-descent
    resumed = DropletSearch()
    rest = _drive(resumed, space, lookup, history=part)[len(part) :]
    assert knobs.point_of_candidate(rest[0].candidate).sketch == 2  # not the survey again
    told = part + rest
    keys = [knobs.point_of_candidate(r.candidate).key() for r in told]
    assert len(keys) == len(set(keys))
    assert resumed.ask(4) == [] and resumed.is_converged


def test_hybrid_switches_after_n_trials_and_continues_from_the_best(space, knobs):
    s = EvolutionaryDropletSearch(
        explore_trials=8, population_size=32, genetic_num_iters=1, num_trials_per_iter=4
    )
    lookup = _bowl(knobs, [5, 20, 2, 3])
    s.reset(space, rng=np.random.default_rng(0))
    told = []
    measurer = ReplayMeasurer(lookup)
    while len(told) < 8:
        assert s.phase == "explore"
        batch = s.ask(4)
        recs = [
            _record(c, len(told) + i, r.run_secs)
            for i, (c, r) in enumerate(zip(batch, measurer.measure(batch), strict=True))
        ]
        s.tell(recs)
        told += recs
    assert s.phase == "exploit"
    ok = [r for r in told if knobs.point_of_candidate(r.candidate) is not None]
    best = min(ok, key=lambda r: np.mean(r.result.run_secs))
    assert s.best_explored_.id == best.id
    assert s.droplet_.incumbent_.point == knobs.point_of_candidate(best.candidate)
    nxt = s.ask(4)
    assert nxt and not {trace_key(c.trace) for c in nxt} & {
        trace_key(r.candidate.trace) for r in told
    }
    # Droplet proposes unit neighbours of the explored best.
    centre = _positions(knobs, knobs.point_of_candidate(best.candidate))
    for c in nxt:
        pos = _positions(knobs, knobs.point_of_candidate(c))
        assert sum(abs(a - b) for a, b in zip(pos, centre, strict=True)) == 1


def test_registry_names():
    assert isinstance(make_strategy("droplet", pvalue=1.0), DropletSearch)
    assert isinstance(
        make_strategy("evolutionary+droplet", explore_trials=10), EvolutionaryDropletSearch
    )
    with pytest.raises(ValueError, match="pvalue"):
        DropletSearch(pvalue=0.0)


@pytest.fixture(scope="module")
def measurer():
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        yield m


@pytest.mark.parametrize(
    "strategy",
    [
        DropletSearch(),
        EvolutionaryDropletSearch(
            explore_trials=4, population_size=32, genetic_num_iters=1, num_trials_per_iter=4
        ),
    ],
    ids=["droplet", "evolutionary+droplet"],
)
def test_end_to_end_on_matmul32(strategy, measurer, tmp_path, cpu_target):
    with get_store(tmp_path / "r.db") as store:
        result = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=1).run(
            MATMUL32, cpu_target, strategy, max_trials=8, seed=0
        )
        assert result.num_trials == 8 and result.stopped_because == "budget"
        trials = store.trials(run_id=result.run.id)
        assert sum(t.status is MeasureStatus.OK for t in trials) >= 6
        assert result.run.strategy == strategy.name
        assert result.best is not None and math.isfinite(result.best_secs)
