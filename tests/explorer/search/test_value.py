"""Value-function search: prefix targets, greedy inference, value iteration, a real run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from explorer.cost_models._value import ValueModel, ValueSample
from explorer.errors import SearchError
from explorer.measure import LocalMeasurer, MeasureConfig, MeasureResult, ReplayMeasurer
from explorer.search import ValueSearch, make_strategy
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import get_store
from explorer.tuner import Tuner, strategy_of
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

MM64 = get_workload("matmul", M=64, N=64, K=64)


def landscape_secs(sketch: int, values) -> float:
    """A synthetic latency: best with i-inner 4, j-inner 16, k-inner 8, on sketch 1."""
    i_inner, j_inner, k_inner = values[0][-1], values[1][-1], values[2][-1]
    return 1e-4 * (
        (1 + abs(math.log2(i_inner) - 2))
        * (1 + abs(math.log2(j_inner) - 4))
        * (1 + 0.1 * abs(math.log2(k_inner) - 3))
        * (1.0 if sketch == 1 else 1.3)
    )


def lookup(candidate) -> MeasureResult | None:
    d = candidate.decisions
    if "sketch" not in d:  # the run's unscheduled baseline: not a point of this landscape
        return None
    return MeasureResult(MeasureStatus.OK, run_secs=(landscape_secs(d["sketch"], d["values"]),))


@pytest.fixture(scope="module")
def knob_space(cpu_target):
    return KnobSpace(DesignSpace.of(MM64, cpu_target))


def random_samples(ks: KnobSpace, n: int, seed: int) -> list[ValueSample]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        p = ks.random_point(rng)
        values = ks.decisions(p)
        out.append(
            ValueSample(
                MM64, ks.target, p.sketch, values, MM64.flops() / landscape_secs(p.sketch, values)
            )
        )
    return out


def test_greedy_inference_picks_the_known_best_branch(knob_space):
    model = ValueModel(seed=0).fit(random_samples(knob_space, 300, seed=1))
    s = ValueSearch(model=model, proposals_per_round=1)
    s.reset(knob_space.design, rng=np.random.default_rng(0))
    (cand,) = s.ask(1)
    values = cand.decisions["values"]
    assert values[0][-1] == 4 and values[1][-1] == 16
    assert s.predictions([cand])[0]["value"] > -0.5


def test_value_iteration_improves_over_rounds(cpu_target):
    store = get_store(":memory:")
    measurer = ReplayMeasurer(lookup)
    result = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=0).run(
        MM64, cpu_target, ValueSearch(proposals_per_round=4), max_trials=24, seed=0
    )
    assert result.num_trials == 24 and measurer.num_measured == 24 + 1  # and the baseline
    curve = store.best_so_far(result.run.id).best_secs
    # better after value iteration than after the first round (row 0 is the baseline)
    assert curve[-1] < curve[4]
    assert curve[-1] <= 0.5 * curve[3]


def test_registry_and_settings():
    s = make_strategy("value", beam_width=2)
    assert isinstance(s, ValueSearch) and s.settings()["beam_width"] == 2


def test_real_end_to_end_run_through_the_tuner(tmp_path, cpu_target):
    store = get_store(tmp_path / "r.db")
    w = get_workload("matmul", M=32, N=32, K=32)
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        tuner = Tuner(measurer=m, store=store, batch_size=4, confirm_top=1)
        first = tuner.run(w, cpu_target, "random", max_trials=8, seed=0)
        result = tuner.run(w, cpu_target, ValueSearch(store=store), max_trials=4, seed=0)
    assert first.best is not None and result.num_trials == 4
    # given a store object: the run records that it was, and a resume by name says why not
    assert result.run.settings["store"] == {"object": type(store).__name__}
    with pytest.raises(SearchError, match=r"was given store as Python objects, which its"):
        strategy_of(result.run)
    trials = [t for t in store.trials(run_id=result.run.id) if not t.is_remeasure]  # no baseline
    assert any(t.result.is_ok for t in trials)
    assert all("value" in t.predicted for t in trials[:4])
    store.close()


def test_settings_record_every_hyper_parameter_and_objects_as_such():
    # A list of workloads cannot be stored: it was dropped without a word; the record now
    # says it was given (and a resume by name refuses, see the end-to-end run above).
    s = make_strategy("value", workloads=[get_workload("matmul", M=8, N=8, K=8)])
    settings = s.settings()
    assert settings["workloads"] == {"object": "list"}
    assert json.loads(json.dumps(settings)) == settings
