"""Tuna's static search: top-k only, nothing measured while searching, reproducible, real run."""

from __future__ import annotations

import numpy as np

from explorer.cost_models._static import StaticCostModel
from explorer.measure import LocalMeasurer, MeasureConfig, ReplayMeasurer
from explorer.search import StaticSearch, make_strategy
from explorer.space import DesignSpace
from explorer.storage import get_store
from explorer.tuner import Tuner
from explorer.workloads import get_workload

MM64 = get_workload("matmul", M=64, N=64, K=64)
TINY = {"num_parents": 4, "num_offspring": 8, "num_generations": 2}


def test_proposes_at_most_k_then_nothing_and_measures_nothing_while_searching(cpu_target):
    measurer = ReplayMeasurer(lambda c: None)  # counts every candidate it is asked to measure
    s = StaticSearch(top_k=3, model=StaticCostModel(), **TINY)
    s.reset(DesignSpace.of(MM64, cpu_target), rng=np.random.default_rng(0))
    first = s.ask(2)
    assert measurer.num_measured == 0 and s.num_scored_ >= 8
    rest = s.ask(8)
    assert len(first) == 2 and len(rest) == 1 and s.ask(8) == []
    preds = s.predictions(first + rest)
    scores = [p["static"] for p in preds]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_registry_and_settings():
    s = make_strategy("static", top_k=2)
    assert isinstance(s, StaticSearch) and s.settings()["top_k"] == 2


def test_real_end_to_end_run_through_the_tuner(tmp_path, cpu_target):
    store = get_store(tmp_path / "r.db")
    w = get_workload("matmul", M=32, N=32, K=32)
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        result = Tuner(measurer=m, store=store, batch_size=2, confirm_top=1).run(
            w, cpu_target, StaticSearch(top_k=3, **TINY), max_trials=8, seed=0
        )
    assert result.num_trials == 3 and result.stopped_because == "exhausted"
    trials = [t for t in store.trials(run_id=result.run.id) if not t.is_remeasure]  # no baseline
    assert all(t.predicted.get("static", 0) > 0 for t in trials[:3])
    assert result.best is not None and result.best_secs > 0
    store.close()


def test_it_says_how_far_its_scoring_got_before_the_first_measurement(cpu_target):
    """Seen: `--strategy static --trials 1` showed nothing for minutes (issue 21)."""
    notes: list[str] = []
    s = StaticSearch(top_k=1, model=StaticCostModel(), **TINY)
    s.on_working = notes.append
    s.reset(DesignSpace.of(MM64, cpu_target), rng=np.random.default_rng(0))
    assert s.ask(1) and notes
    assert notes[0] == "static model: scoring up to 24 candidates before measuring"
    counts = [int(n.split()[2]) for n in notes[1:]]
    assert counts == sorted(counts) and counts[-1] == s.num_scored_ and len(counts) == 3


def test_a_model_the_caller_passed_stays_open_and_its_own_is_closed(cpu_target):
    """The ownership rule of measurers, for cost models: what the caller passed, the caller
    closes (StaticSearch used to close it after its search)."""
    mine = StaticCostModel()
    for model in (mine, None):
        s = StaticSearch(top_k=1, model=model, **TINY)
        s.reset(DesignSpace.of(MM64, cpu_target), rng=np.random.default_rng(0))
        assert s.ask(1)
        assert (s.model_._pool is not None) == (model is mine), model
    assert mine._pool is not None  # still the caller's, open
    mine.close()
