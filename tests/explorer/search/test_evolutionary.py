"""MetaSchedule's evolutionary search through ask/tell, and the tune_tir streaming adapter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer import _tvm
from explorer.core._records import TrialRecord
from explorer.measure import (
    LocalMeasurer,
    MeasureConfig,
    MeasureResult,
    ReplayMeasurer,
    trace_key,
)
from explorer.search import EvolutionarySearch, make_strategy
from explorer.search._evolutionary import PREDICTION_NAME
from explorer.search._feature_cache import cached_per_store_feature
from explorer.search._metaschedule import run_metaschedule
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import get_store
from explorer.tuner import Tuner
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

MATMUL32 = get_workload("matmul", M=32, N=32, K=32)


def _small(**kw):
    params = dict(
        population_size=48,
        genetic_num_iters=1,
        init_min_unmeasured=16,
        num_trials_per_iter=6,
        num_warmup_samples=6,
    )
    return EvolutionarySearch(**{**params, **kw})


def _synthetic(candidate):
    """Faster the closer the innermost i-tile is to 8; every 5th schedule fails to run."""
    values = candidate.decisions["values"]
    inner = values[0][-1]
    if sum(sum(v) if isinstance(v, list) else v for v in values) % 5 == 0:
        return MeasureResult(MeasureStatus.RUN_ERROR, error_msg="synthetic crash")
    secs = 1e-4 * (1 + abs(math.log2(inner) - 3))
    return MeasureResult(MeasureStatus.OK, run_secs=(secs, secs * 1.01, secs * 0.99), flops=1)


def _record(candidate, i, result):
    return TrialRecord(i, 1, i, candidate, result, {}, 0.0)


@pytest.fixture(scope="module")
def space(cpu_target):
    return DesignSpace.of(MATMUL32, cpu_target)


def _drive(strategy, space, *, trials, seed, history=(), batch=4, budget=None):
    strategy.reset(space, rng=np.random.default_rng(seed), history=list(history), budget=budget)
    measurer = ReplayMeasurer(_synthetic)
    told = list(history)
    while len(told) < trials:
        cands = strategy.ask(min(batch, trials - len(told)))
        assert cands
        preds = strategy.predictions(cands)
        recs = [
            TrialRecord(len(told) + i, 1, len(told) + i, c, r, p, 0.0)
            for i, (c, r, p) in enumerate(zip(cands, measurer.measure(cands), preds, strict=True))
        ]
        strategy.tell(recs)
        told += recs
    return told


def test_proposes_valid_unique_candidates_with_predictions(space):
    s = _small()
    first = space.num_sketches  # one random schedule of each sketch, then MetaSchedule's rounds
    told = _drive(s, space, trials=first + 18, seed=0)
    keys = [trace_key(r.candidate.trace) for r in told]
    assert len(set(keys)) == len(keys)
    for r in told[:4]:  # each trace replays onto the workload
        _tvm.apply_trace_json(r.candidate.trace, _tvm.Schedule(MATMUL32.mod()))
    assert all(math.isfinite(r.predicted[PREDICTION_NAME]) for r in told)
    knobs = KnobSpace(space)
    assert sum(knobs.point_of_candidate(r.candidate) is not None for r in told) >= len(told) // 2
    # Three MetaSchedule rounds: every round committed and learned from, failures as 1e10.
    # (a round of fresh traces may come short: MetaSchedule re-proposed a first draw)
    assert s.num_rounds_ >= 3 and first + 12 <= len(s.database_) <= first + 18
    assert s.cost_model_.data_size == len(s.database_)
    worst = max(float(rec.run_secs[0]) for rec in s.database_.get_all_tuning_records())
    assert worst == pytest.approx(1e10)


def test_resume_replays_history_and_never_repeats_it(space):
    first = _drive(_small(), space, trials=12, seed=3)
    s = _small()
    s.reset(space, rng=np.random.default_rng(3), history=first)
    assert len(s.database_) == 12 and s.cost_model_.data_size == 12
    more = _drive(s, space, trials=24, seed=3, history=first)
    assert len(s.database_) >= 12 + 6  # at least one new round closed on top of the history
    old = {trace_key(r.candidate.trace) for r in first}
    assert not old & {trace_key(r.candidate.trace) for r in more[12:]}


def test_a_search_measures_each_sketch_first_and_a_resumed_one_those_not_measured(space):
    """At a small budget MetaSchedule's evolution stays with the sketches its first random
    draws measured; one schedule of each goes first, and a model tune's next chunk (a run
    resumed on the task's earlier trials) draws only those its history lacks."""
    n = space.num_sketches
    assert n >= 3  # MetaSchedule's sketches and the packed ones
    first = _drive(_small(), space, trials=n, seed=0, batch=n)
    assert sorted(r.candidate.decisions["sketch"] for r in first) == list(range(n))
    assert all(math.isfinite(r.predicted[PREDICTION_NAME]) for r in first)
    history = first[:2]
    s = _small()
    more = _drive(s, space, trials=n, seed=1, history=history, batch=n - 2)
    drawn = {r.candidate.decisions["sketch"] for r in more[2:]}
    assert drawn == set(range(n)) - {r.candidate.decisions["sketch"] for r in history}


def test_a_chunk_carried_over_gets_each_round_from_one_evolution(space):
    """A model tune's chunk is told its task's earlier trials; MetaSchedule's evolution, which
    skips only what it proposed itself, ranked the best of them first, and a round of
    ``per_iter`` came back short or all measured: a BERT chunk of 16 trials with 624 carried
    over ran MetaSchedule's evolution 12 times for 4 rounds, and three fell back to random
    points.
    A round asks for the carried-over ones on top (``carried_slots``) and keeps the
    ``per_iter`` best it would have proposed knowing them."""
    history = _drive(_small(), space, trials=36, seed=0)
    s = _small()
    more = _drive(s, space, trials=36 + 12, seed=1, history=history, batch=6)[36:]
    assert (s.num_rounds_, s.num_empty_rounds_, s.num_random_rounds_) == (2, 0, 0)
    old = {trace_key(r.candidate.trace) for r in history}
    assert len({trace_key(r.candidate.trace) for r in more} - old) == 12


def test_a_chunk_carried_over_is_one_round_when_its_history_is_large(space):
    """``"auto"`` rounds are a quarter of the trials the search knows of: a chunk of 16 told
    48 earlier trials is one round of 16 (one evolution, one retraining), where it ran four
    rounds of 4 (its budget's quarter) whatever it had been told; without history, or with an
    explicit size, nothing changes."""
    history = _drive(_small(), space, trials=48, seed=0)
    auto = dict(num_trials_per_iter="auto", num_warmup_samples="auto")
    s = _small(**auto)
    more = _drive(s, space, trials=48 + 16, seed=1, history=history, batch=8, budget=16)[48:]
    assert s.resolved_["num_trials_per_iter"] == 16 and s.num_rounds_ == 1
    assert len({trace_key(r.candidate.trace) for r in more}) == 16
    few = _small(**auto)
    _drive(few, space, trials=8 + 16, seed=1, history=history[:8], budget=16)
    assert few.resolved_["num_trials_per_iter"] == 6  # a quarter of 8 + 16
    fresh = _small(**auto)
    _drive(fresh, space, trials=16, seed=1, budget=16)
    assert fresh.resolved_["num_trials_per_iter"] == 4
    fixed = _small()  # num_trials_per_iter=6
    _drive(fixed, space, trials=48 + 12, seed=1, history=history, budget=12)
    assert fixed.resolved_["num_trials_per_iter"] == 6


def test_a_chunk_whose_evolution_offers_only_measured_schedules_draws_random_ones(space):
    """MetaSchedule's evolution counts as measured only what it proposed itself: carried over
    from earlier runs (a model tune's chunk), a converged population re-proposed their
    schedules round after round, and the run stopped with its budget unspent (a 2000-trial BERT
    tune ended at 1500: each task's chunk got 0-2 of 16). A search that evolves nothing and
    starts from the measured ones only re-proposes them every round: it goes on with random
    points of the space, ranked by its model, and never repeats one."""
    history = _drive(_small(), space, trials=24, seed=0)
    s = _small(init_measured_ratio=1.0, init_min_unmeasured=0, genetic_num_iters=0, eps_greedy=0)
    more = _drive(s, space, trials=24 + 12, seed=1, history=history)[24:]
    assert s.num_random_rounds_ >= 2 and s.num_rounds_ == 0
    old = {trace_key(r.candidate.trace) for r in history}
    new = [trace_key(r.candidate.trace) for r in more]
    assert len(set(new)) == 12 and not old & set(new)
    assert all(math.isfinite(r.predicted[PREDICTION_NAME]) for r in more)
    assert all(r.candidate.decisions.get("sketch") is not None for r in more)
    assert s.cost_model_.data_size == 24 + 12  # each random round's results learned from


def test_registry_and_settings():
    s = make_strategy("evolutionary", population_size=64)
    assert isinstance(s, EvolutionarySearch)
    assert s.settings()["population_size"] == 64 and s.settings()["eps_greedy"] == 0.05
    assert make_strategy("evolutionary").settings()["population_size"] == "auto"
    with pytest.raises(ValueError, match="population_size must be a whole number >= 1"):
        make_strategy("evolutionary", population_size=0)


@pytest.fixture(scope="module")
def measurer():
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        yield m


def test_end_to_end_on_matmul32(measurer, tmp_path, cpu_target):
    with get_store(tmp_path / "r.db") as store:
        result = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=1).run(
            MATMUL32, cpu_target, _small(num_trials_per_iter=4), max_trials=8, seed=0
        )
        assert result.num_trials == 8 and result.run.strategy == "evolutionary"
        # the run's trials (its unscheduled baseline is not one)
        trials = [t for t in store.trials(run_id=result.run.id) if not t.is_remeasure]
        assert sum(t.status is MeasureStatus.OK for t in trials) >= 6
        assert all(PREDICTION_NAME in t.predicted for t in trials[:8])
        assert result.best is not None and math.isfinite(result.best_secs)


def test_tune_tir_streams_every_trial_and_stops_when_asked(tmp_path, cpu_target):
    # One real tune_tir run (about 20 s, mostly builder start-up): two batches of 4 are
    # streamed into the store, then the callback stops it well before max_trials.
    with get_store(tmp_path / "r.db") as store:
        batches = []
        run = run_metaschedule(
            MATMUL32,
            cpu_target,
            store,
            max_trials=64,
            num_trials_per_iter=4,
            population_size=48,
            genetic_num_iters=1,
            min_repeat_ms=2,
            on_batch=batches.append,
            should_stop=lambda: len(batches) >= 2,
        )
        assert run.status == "cancelled" and run.strategy == "metaschedule"
        trials = store.trials(run_id=run.id)
        assert len(trials) == 8 and [len(b) for b in batches] == [4, 4]
        # MetaSchedule's runner never checks outputs: its timings are stored unchecked.
        assert sum(t.status is MeasureStatus.UNCHECKED for t in trials) >= 6
        assert not any(t.result.is_ok for t in trials)
        assert all(len(t.result.run_secs) == 3 for t in trials if t.result.run_secs)
        assert len({trace_key(t.candidate.trace) for t in trials}) == 8


def test_cached_features_are_metaschedules_own_and_each_program_is_read_once(space):
    """The evolution scores the same programs again and again; their features are read once a
    process and are exactly what MetaSchedule's extractor gives (so a run proposes the same)."""
    s = _small()
    _drive(s, space, trials=12, seed=5)
    programs = list(s._round.values()) or [
        _tvm.ms.MeasureCandidate(sch, s._args_info) for sch in s.context_.space_generator
        .generate_design_space(s._mod)
    ]  # fmt: skip
    cached, own = cached_per_store_feature(), _tvm.ms.feature_extractor.PerStoreFeature()
    reads = []
    inner = cached.inner

    class Counting:
        def extract_from(self, context, candidates):
            reads.extend(candidates)
            return inner.extract_from(context, candidates)

    cached.inner = Counting()
    twice = [*programs, *programs]
    got = cached.extract_from(s.context_, twice)
    expected = own.extract_from(s.context_, twice)
    assert len(got) == len(expected) == 2 * len(programs)
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert len(reads) <= len(programs)  # the second copy of each came from the cache
    before = len(reads)
    cached.extract_from(s.context_, programs)
    assert len(reads) == before  # read once a process, whichever extractor asks


def test_the_first_round_draws_packed_sketches_and_only_tiles_that_fit(cpu_target):
    """MetaSchedule's evolution picks a sketch, then its decisions, and drops what a
    postprocessor refuses: a packed sketch of a 7x7 layer fits in under half its draws, so it
    is listed as often as that asks; packed schedules reach the first round, and only tiles
    that fit."""
    from explorer.space._packing import register_tile, vector_registers

    w = get_workload("conv2d", N=1, CI=16, H=7, W=7, CO=32, padding=1)
    space = DesignSpace.of(w, cpu_target)
    packed = range(space.num_metaschedule_sketches, space.num_sketches)
    assert all(space.sampling_copies[k] >= 2 for k in packed)
    assert all(space.sampling_copies[k] == 1 for k in range(space.num_metaschedule_sketches))
    s = _small(population_size=64, num_trials_per_iter=16, num_warmup_samples=16)
    s.reset(space, rng=np.random.default_rng(0), history=[])
    assert len(s.ask(space.num_sketches)) == space.num_sketches  # one of each sketch first
    lanes = cpu_target.vector_lanes_f32
    tiles = []
    for candidate in s.ask(16):
        sch = _tvm.Schedule(w.mod())
        _tvm.apply_trace_json(candidate.trace, sch)
        tiles.append(register_tile(sch.trace, lanes))
    fitting = [t for t in tiles if t is not None]
    # Some packed schedules in the round (seeds 0-5 on a Zen 3 with AVX2: 1 to 6 of 16; the
    # model picks the 16 from the population), and none whose tile spills.
    assert fitting
    assert all(t.fits(vector_registers(lanes)) for t in fitting)
