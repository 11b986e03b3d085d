"""AutoTVM search: the ask/tell contract, the annealer, epsilon-greedy, diversity, transfer
learning, and real runs through the Tuner (local measurements and a replayed recording)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer.errors import SearchError
from explorer.measure import LocalMeasurer, MeasureConfig, MeasureResult, ReplayMeasurer
from explorer.search import AutoTVMSearch, make_strategy
from explorer.search._sa import SimulatedAnnealing, diversity_pick
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import NewTrial, TrialRecord, get_store
from explorer.tuner import Tuner
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

MATMUL = get_workload("matmul", M=64, N=64, K=64)


def latency(candidate) -> float:
    """A synthetic landscape over matmul's knobs, best at inner tiles 4 x 8, no unroll."""
    v = candidate.decisions["values"]
    return 1e-4 * (
        1 + abs(math.log2(v[0][-1]) - 2) + abs(math.log2(v[1][-1]) - 3) + 0.3 * v[3] + v[2][0] / 64
    )


def records(cands, start=0, fail_every=0):
    out = []
    for i, c in enumerate(cands, start):
        if fail_every and i % fail_every == 0:
            result = MeasureResult(MeasureStatus.BUILD_ERROR, error_msg="refused")
        else:
            result = MeasureResult(MeasureStatus.OK, run_secs=(latency(c),))
        out.append(TrialRecord(i, 1, i, c, result, {}, 0.0))
    return out


def key(candidate) -> tuple[int, ...]:
    return (candidate.decisions["sketch"], *candidate.decisions["point"])


def drive(strategy, rounds: int, n: int, fail_every: int = 0):
    """ask/tell ``rounds`` times on the synthetic landscape; returns the batches."""
    batches, seen = [], 0
    for _ in range(rounds):
        batch = strategy.ask(n)
        strategy.tell(records(batch, seen, fail_every))
        seen += len(batch)
        batches.append(batch)
    return batches


@pytest.fixture(scope="module")
def space(cpu_target):
    return DesignSpace.of(MATMUL, cpu_target)


def fresh(space, seed=0, store=None, **kw):
    s = AutoTVMSearch(**kw)
    s.reset(space, rng=np.random.default_rng(seed), store=store)
    return s


def test_ask_respects_n_never_repeats_and_accepts_failures(space):
    s = fresh(space, plan_size=16)
    batches = drive(s, rounds=5, n=8, fail_every=5)
    assert [len(b) for b in batches] == [8] * 5
    keys = [key(c) for b in batches for c in b]
    assert len(set(keys)) == len(keys)
    assert s.num_fits_ == 2  # at 16 and 32 trials
    assert s.ask(0) == []


def test_the_annealer_finds_the_argmax_far_better_than_random():
    dims = [(84, 84, 7, 4)] * 3  # matmul 64^3: about 600,000 points
    target = (2, 61, 17, 5, 3)

    def score(sk, idx):  # peaks at `target`, falls off with the distance to it
        return -(np.abs(idx[:, :4] - np.array(target[1:])).sum(1) + 3 * (sk != target[0]))

    sa = SimulatedAnnealing(dims)
    found = sa.find_maximums(score, 8, set(), np.random.default_rng(0))
    assert found[0] == (target, 0.0)
    assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
    # the same number of uniformly random points gets nowhere near
    sk, idx = sa.random_keys(sa.num_scored, np.random.default_rng(1))
    assert score(sk, idx).max() <= -2
    # visited points are never returned
    again = sa.find_maximums(score, 8, {target}, np.random.default_rng(0))
    assert target not in [k for k, _ in again]


def test_the_model_plans_better_points_than_random(space):
    s = fresh(space, plan_size=32)
    random_phase, planned = drive(s, rounds=2, n=32)
    assert s.num_fits_ == 2
    assert np.mean([latency(c) for c in planned]) < 0.8 * np.mean(
        [latency(c) for c in random_phase]
    )


def test_epsilon_greedy_replaces_the_tail_of_each_plan_with_random_points(space):
    s = fresh(space, plan_size=20, epsilon=0.25)
    first = s.ask(20)
    assert s.plan_ == []  # random until the first fit
    s.tell(records(first))
    assert s.num_fits_ == 1 and len(s.plan_) == 20
    plan = list(s.plan_)
    got = [key(c) for c in s.ask(20)]
    assert got[:15] == plan[:15]  # int(0.25 * 20) = 5 random ones at the end
    assert not set(got[15:]) & set(plan)
    greedy = fresh(space, plan_size=20, epsilon=0.0)
    greedy.tell(records(greedy.ask(20)))
    assert [key(c) for c in greedy.ask(20)] == greedy.plan_


def test_diversity_pick_is_autotvms_greedy_submodular_choice(space):
    keys = [(0, 1, 1), (0, 1, 2), (0, 2, 2), (1, 3, 3)]
    assert diversity_pick(keys, 2) == [0, 3]  # the first covers 3 values, then the disjoint one
    s = fresh(space, plan_size=16, diversity_filter_ratio=2)
    s.tell(records(s.ask(16)))
    assert len(s.plan_) == 16 and len(set(s.plan_)) == 16
    assert not set(s.plan_) & s.visited_


def test_invalid_points_are_skipped_without_measuring_and_counted(space):
    s = fresh(space, plan_size=8)
    s.ask(s.knobs_.num_sketches)  # the sketches' first points, drawn when the search starts
    invalid_before = s.num_invalid_
    real, calls = s.knobs_.materialize, []

    def every_third_invalid(point):
        calls.append(point)
        return None if len(calls) % 3 == 0 else real(point)

    s.knobs_.materialize = every_third_invalid
    batch = s.ask(6)
    assert len(batch) == 6 and s.num_invalid_ - invalid_before == 2 and len(calls) == 8
    assert {(p.sketch, *p.indices) for p in calls} <= s.visited_


def test_the_first_trials_are_one_point_of_each_sketch_and_a_resume_skips_the_measured(space):
    # A uniform draw weighs sketches by their size: on ResNet-18 C7 the packed sketches, where
    # every other strategy found its best, never got a trial in 64.
    n = space.num_sketches
    assert n >= 3
    s = fresh(space, plan_size=16)
    first = s.ask(n)
    assert sorted(c.decisions["sketch"] for c in first) == list(range(n))
    resumed = AutoTVMSearch(plan_size=16)
    history = [r for r in records(first) if r.candidate.decisions["sketch"] != 1]
    resumed.reset(space, rng=np.random.default_rng(1), history=history)
    assert [c.decisions["sketch"] for c in resumed.ask(1)] == [1]
    # with a start, the search begins there instead
    started = fresh(space, plan_size=16, start=first[0])
    assert [key(c) for c in started.ask(1)] == [key(first[0])]


@pytest.mark.parametrize("loss", ["rank", "reg"])
def test_predictions_are_reported_once_the_model_is_fitted(space, loss):
    s = fresh(space, plan_size=8, loss=loss)
    first = s.ask(8)
    assert s.predictions(first) == [{}] * 8
    s.tell(records(first))
    second = s.ask(4)
    preds = s.predictions(second)
    name = f"xgb-{loss}"
    assert all(set(p) == {name} and math.isfinite(p[name]) for p in preds)


def test_perstore_features_anneal_over_materialized_schedules(space):
    # Slow per point (a replay and TVM's extractor), so a small annealer.
    s = fresh(space, plan_size=8, features="perstore", parallel_size=8, n_iter=4)
    s.tell(records(s.ask(8)))
    assert s.num_fits_ == 1 and s.model_.features == "perstore"
    assert 0 < len(s.plan_) <= 8 and not set(s.plan_) & s.visited_
    assert all(p for p in s.predictions(s.ask(4)))


def _store_with_other_workloads(cpu_target, per_workload=24):
    store = get_store(":memory:")
    rng = np.random.default_rng(11)
    for shape in ({"M": 32, "N": 32, "K": 32}, {"M": 48, "N": 64, "K": 32}):
        other = get_workload("matmul", **shape)
        ks = KnobSpace(DesignSpace.of(other, cpu_target))
        cands = [
            c for c in (ks.materialize(ks.random_point(rng)) for _ in range(per_workload)) if c
        ]
        run = store.create_run(other, cpu_target, "random")
        store.add_trials(
            run.id,
            [NewTrial(c, MeasureResult(MeasureStatus.OK, run_secs=(latency(c),))) for c in cands],
        )
    return store


def test_transfer_learning_trains_a_base_on_other_workloads_and_plans_the_first_batch(
    space, cpu_target
):
    store = _store_with_other_workloads(cpu_target)
    kw = dict(plan_size=8, transfer_pool_size=64)
    s = fresh(space, 1, store, transfer_from="auto", min_seed_records=40, **kw)
    assert s.base_model_ is not None and s.base_model_.is_fitted
    assert s.base_model_.features == "perstore" and s.model_.base_model is not None
    assert len(s.plan_) == 8
    survey = s.ask(space.num_sketches)  # one point of each sketch first, scored by the base
    assert all("xgb-rank" in p for p in s.predictions(survey))
    first = s.ask(8)
    assert [key(c) for c in first] == s.plan_  # then the base model's plan, not random points
    assert all("xgb-rank" in p for p in s.predictions(first))
    plain = fresh(space, 1, **kw)
    plain.ask(space.num_sketches)
    assert [key(c) for c in plain.ask(8)] != [key(c) for c in first]
    # after its own first fit the local model still leans on the base (discount 2^(-n/64))
    s.tell(records(survey + first))
    assert s.model_.base_model_ is not None
    assert s.model_.base_discount_ == pytest.approx(2 ** (-(len(survey) + 8) / 64))
    # too few records to transfer from: plain AutoTVM
    few = fresh(space, 1, store, transfer_from="auto", min_seed_records=1000, **kw)
    assert few.base_model_ is None and few.plan_ == []
    with pytest.raises(SearchError, match="record store"):
        fresh(space, transfer_from="auto")


def test_registry_and_settings():
    s = make_strategy("autotvm", plan_size=16, loss="reg")
    assert isinstance(s, AutoTVMSearch) and s.model_name == "xgb-reg"
    assert s.settings()["plan_size"] == 16 and s.settings()["transfer_from"] is None
    with pytest.raises(ValueError, match="loss"):
        AutoTVMSearch(loss="hinge")
    with pytest.raises(ValueError, match="diversity_filter_ratio"):
        AutoTVMSearch(diversity_filter_ratio=0.5)


def test_a_real_run_through_the_tuner_stores_predictions_after_the_first_fit(cpu_target):
    workload = get_workload("matmul", M=32, N=32, K=32)
    strategy = AutoTVMSearch(plan_size=8)
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        store = get_store(":memory:")
        result = Tuner(measurer=m, store=store, batch_size=4, confirm_top=0).run(
            workload, cpu_target, strategy, max_trials=12, seed=0
        )
    # the run's unscheduled baseline is stored too, as a measurement that is not a trial
    trials = [t for t in store.trials(run_id=result.run.id) if not t.is_remeasure]
    assert result.num_trials == 12 and len(trials) == 12
    assert sum(t.result.is_ok for t in trials) >= 10
    assert strategy.num_fits_ == 1
    assert all(t.predicted == {} for t in trials[:8])
    assert all(set(t.predicted) == {"xgb-rank"} for t in trials[8:])


REDUCE = get_workload("reduce_sum", D0=4, D1=8)  # 36 points in 3 sketches


@pytest.fixture(scope="module")
def recording(cpu_target):
    """Every point of REDUCE's knob space, measured once: (candidate, result) pairs."""
    ks = KnobSpace(DesignSpace.of(REDUCE, cpu_target))
    cands = []
    for sketch in range(ks.num_sketches):
        for flat in range(ks.size(sketch)):
            idx = np.unravel_index(flat, ks.dims(sketch))
            c = ks.materialize(type(ks.origin())(sketch, tuple(int(i) for i in idx)))
            if c is not None:
                cands.append(c)
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        results = m.measure(cands)
    return list(zip(cands, results, strict=True))


def test_replayed_run_visits_every_point_once_and_finds_the_recorded_best(recording, cpu_target):
    store = get_store(":memory:")
    replay = ReplayMeasurer.from_pairs(recording)
    strategy = AutoTVMSearch(plan_size=8)
    result = Tuner(measurer=replay, store=store, batch_size=4, confirm_top=0).run(
        REDUCE, cpu_target, strategy, max_trials=100, seed=2
    )
    assert result.stopped_because == "exhausted"
    trials = [t for t in store.trials(run_id=result.run.id) if not t.is_remeasure]  # no baseline
    assert len(trials) == len(recording)
    assert len({key(t.candidate) for t in trials}) == len(recording)
    assert all(t.predicted for t in trials[8:]) and not any(t.predicted for t in trials[:8])
    ok = [r.median_secs for _, r in recording if r.is_ok]
    assert result.best_secs == min(ok)
    # The Tuner hands its store to the strategy: a later run on another workload transfers.
    other = get_workload("matmul", M=16, N=16, K=16)
    transfer = AutoTVMSearch(plan_size=8, transfer_from="auto", min_seed_records=20)
    synthetic = ReplayMeasurer(lambda c: MeasureResult(MeasureStatus.OK, run_secs=(1e-5,)))
    Tuner(measurer=synthetic, store=store, batch_size=4, confirm_top=0).run(
        other, cpu_target, transfer, max_trials=4, seed=0
    )
    assert transfer.base_model_ is not None
    assert all(t.predicted for t in store.trials(workload=other) if not t.is_remeasure)
