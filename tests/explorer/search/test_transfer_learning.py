"""Transfer learning: model-guided strategies learn from other workloads' trials in the record
store before their first round (``transfer_from="auto"``), and only from those."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer import _tvm
from explorer.errors import SearchError
from explorer.measure import MeasureResult
from explorer.search import EvolutionarySearch, ValueSearch, make_strategy
from explorer.search._transfer import transfer_records
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import NewTrial, get_store
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

HERE = get_workload("matmul", M=32, N=32, K=32)
OTHERS = [get_workload("matmul", M=48, N=64, K=32), get_workload("matmul", M=64, N=32, K=48)]


def synthetic(candidate) -> MeasureResult:
    """Faster the closer the innermost i-tile is to 8, on every matmul shape."""
    inner = candidate.decisions["values"][0][-1]
    secs = 1e-4 * (1 + abs(math.log2(inner) - 3))
    return MeasureResult(MeasureStatus.OK, run_secs=(secs, secs * 1.01, secs * 0.99))


@pytest.fixture(scope="module")
def store(cpu_target):
    """Random points of two other matmuls and of HERE, each with the synthetic latency; one
    other point measured twice (the latest counts) and one timing nobody checked."""
    store = get_store(":memory:")
    rng = np.random.default_rng(5)
    for workload in [*OTHERS, HERE]:
        ks = KnobSpace(DesignSpace.of(workload, cpu_target))
        cands = [c for c in (ks.materialize(ks.random_point(rng)) for _ in range(30)) if c]
        run = store.create_run(workload, cpu_target, "random")
        store.add_trials(run.id, [NewTrial(c, synthetic(c)) for c in cands])
    other = store.trials(workload=OTHERS[0])[0]
    run = store.create_run(OTHERS[0], cpu_target, "random")
    unchecked = MeasureResult(MeasureStatus.UNCHECKED, run_secs=(1.0,))
    store.add_trials(run.id, [NewTrial(other.candidate, unchecked)])
    store.add_trials(run.id, [NewTrial(other.candidate, synthetic(other.candidate))])
    return store


def _space(cpu_target):
    return DesignSpace.of(HERE, cpu_target)


def test_the_trials_taken_are_other_workloads_each_schedule_once_checked_only(store, cpu_target):
    taken = transfer_records("S", store, _space(cpu_target))
    mine = store.trials(workload=HERE)
    assert mine and not any(t.candidate.workload == HERE for t in taken)
    distinct = {(t.candidate.workload.key(), str(t.candidate.trace)) for t in taken}
    assert len(distinct) == len(taken) == len(store.trials()) - len(mine) - 2
    assert not any(t.status.is_inconclusive for t in taken)
    assert taken[-1].id == store.trials()[-1].id  # the latest measurement of the repeated one
    assert len(transfer_records("S", store, _space(cpu_target), limit=5)) == 5
    with pytest.raises(SearchError, match=r"S\(transfer_from='auto'\) needs the record store"):
        transfer_records("S", None, _space(cpu_target))


def _measure_candidates(candidates):
    mod = HERE.mod()
    args = _tvm.ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    out = []
    for c in candidates:
        sch = _tvm.Schedule(mod)
        _tvm.apply_trace_json(c.trace, sch)
        out.append(_tvm.ms.MeasureCandidate(sch, args))
    return out


def _evolutionary(**kw):
    params = dict(population_size=48, genetic_num_iters=1, num_trials_per_iter=6)
    return EvolutionarySearch(**{**params, "num_warmup_samples": 6, **kw})


def test_evolutionary_ranks_its_first_round_with_what_other_workloads_taught(store, cpu_target):
    space = _space(cpu_target)
    learned = len(transfer_records("S", store, space))
    s = _evolutionary(transfer_from="auto")
    s.reset(space, rng=np.random.default_rng(0), store=store, budget=24)
    # every other workload's trial is in the model, as its own group, before any measurement
    assert s.settings()["transfer_trials"] == learned
    assert s.cost_model_.data_size == learned and len(s.cost_model_.data) == len(OTHERS)
    assert s.cost_model_.booster is not None
    drawn = s.ask(space.num_sketches)  # one of each sketch first, ranked by the model too
    first = s.ask(6)
    for cands in (drawn, first):
        scores = [p["metaschedule-xgb"] for p in s.predictions(cands)]
        # The model's scores, not the warm-up's random draws: the trees give them again.
        assert np.allclose(s.cost_model_.predict(s.context_, _measure_candidates(cands)), scores)
        assert len(set(scores)) > 1
    # Then the model retrains after every round, on everything (no adaptive-training wait).
    told = [*drawn, *first]
    s.tell(
        [
            type(t)(i, 1, i, c, synthetic(c), {}, 0.0)
            for i, (t, c) in enumerate(zip(store.trials()[: len(told)], told, strict=True))
        ]
    )
    s.ask(6)
    assert s.cost_model_.data_size == learned + len(told) == s.cost_model_.last_train_size
    # without transfer the model knows nothing before its first round
    plain = _evolutionary()
    plain.reset(space, rng=np.random.default_rng(0), store=store, budget=24)
    assert plain.cost_model_.data_size == 0 and "transfer_trials" not in plain.settings()
    cands = plain.ask(6)
    warm_up = [p["metaschedule-xgb"] for p in plain.predictions(cands)]
    # before its warm-up ends TVM's model draws random scores: asked again, it draws others
    assert not np.allclose(
        plain.cost_model_.predict(plain.context_, _measure_candidates(cands)), warm_up
    )
    with pytest.raises(SearchError, match="needs the record store"):
        _evolutionary(transfer_from="auto").reset(space, rng=np.random.default_rng(0))


def test_evolutionary_then_droplet_hands_transfer_to_its_evolutionary_phase(store, cpu_target):
    s = make_strategy("evolutionary+droplet", transfer_from="auto", num_trials_per_iter=6)
    s.reset(_space(cpu_target), rng=np.random.default_rng(1), store=store, budget=32)
    assert s.explorer_.transfer_from == "auto"
    assert s.settings()["transfer_trials"] == s.explorer_.cost_model_.data_size > 0


def test_value_search_learns_from_every_workload_unless_told_not_to(store, cpu_target):
    space = _space(cpu_target)
    mine = len(store.trials(workload=HERE))
    auto = ValueSearch()
    auto.reset(space, rng=np.random.default_rng(0), store=store)
    others = auto.settings()["transfer_trials"]
    assert others == len(store.trials()) - mine - 1  # every measurement but the unchecked one
    alone = ValueSearch(transfer_from=None)
    alone.reset(space, rng=np.random.default_rng(0), store=store)
    assert alone.settings()["transfer_trials"] == 0
    assert len(alone.model_.samples_) == mine < len(auto.model_.samples_)
