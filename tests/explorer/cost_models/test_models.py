"""The CostModel contract for every registered model, and that the XGBoost models learn."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cm_helpers import make_records, tile_latency

from explorer.cost_models import (
    COST_MODELS,
    CostModel,
    MetaScheduleXGBCostModel,
    XGBCostModel,
    make_cost_model,
    spearman,
)
from explorer.cost_models._metrics import record_latency
from explorer.errors import UnknownPluginError

MODELS = {
    "xgb-rank": lambda seed: XGBCostModel(loss="rank", seed=seed),
    "xgb-reg": lambda seed: XGBCostModel(loss="reg", seed=seed),
    "xgb-rank-knob": lambda seed: XGBCostModel(loss="rank", features="knob", seed=seed),
    "metaschedule-xgb": lambda seed: MetaScheduleXGBCostModel(seed=seed),
}


@pytest.fixture(params=sorted(MODELS))
def make(request):
    return MODELS[request.param]


@pytest.fixture(scope="module")
def synthetic(candidates):
    """Training trials on a known landscape, plus two failures."""
    lat = [tile_latency(c) for c in candidates[:22]] + [math.inf, math.inf]
    return make_records(candidates[:24], lat)


def test_predict_returns_finite_float64_scores_before_and_after_update(
    make, candidates, synthetic
):
    model = make(0)
    before = model.predict(candidates)
    assert before.shape == (len(candidates),) and before.dtype == np.float64
    assert np.isfinite(before).all()
    assert model.predict([]).shape == (0,)
    model.update(synthetic)
    after = model.predict(candidates)
    assert after.shape == (len(candidates),) and after.dtype == np.float64
    assert np.isfinite(after).all()


def test_update_with_no_records_changes_nothing(make, candidates):
    model = make(0)
    before = model.predict(candidates[:5])
    model.update([])
    np.testing.assert_array_equal(model.predict(candidates[:5]), before)


def test_higher_means_faster_on_a_known_landscape(make, candidates, synthetic):
    model = make(0)
    model.update(synthetic)
    scores = model.predict(candidates[:22])
    order = np.argsort([tile_latency(c) for c in candidates[:22]], kind="stable")
    fastest, slowest = order[:6], order[-6:]
    assert scores[fastest].mean() > scores[slowest].mean()


def test_save_load_round_trip_gives_identical_predictions(make, candidates, synthetic, tmp_path):
    model = make(0)
    model.update(synthetic)
    path = str(tmp_path / "model")
    model.save(path)
    fresh = make(0)
    fresh.load(path)
    np.testing.assert_array_equal(fresh.predict(candidates), model.predict(candidates))


def test_untrained_model_round_trips_too(make, candidates, tmp_path):
    model = make(3)
    path = str(tmp_path / "model")
    model.save(path)
    fresh = make(3)
    fresh.load(path)
    np.testing.assert_array_equal(fresh.predict(candidates), model.predict(candidates))


def test_a_seed_reproduces_predictions(make, candidates, synthetic):
    a, b = make(5), make(5)
    np.testing.assert_array_equal(a.predict(candidates), b.predict(candidates))
    np.testing.assert_array_equal(a.predict(candidates), a.predict(candidates))  # stable
    a.update(synthetic)
    b.update(synthetic)
    np.testing.assert_array_equal(a.predict(candidates), b.predict(candidates))


@pytest.mark.parametrize(
    "model",
    [
        XGBCostModel(loss="rank", seed=0),
        XGBCostModel(loss="reg", seed=0),
        XGBCostModel(loss="rank", features="knob", seed=0),
    ],
    ids=["rank-perstore", "reg-perstore", "rank-knob"],
)
def test_xgb_learns_real_measurements(model, measured):
    ok = [r for r in measured if r.result.is_ok]
    assert len(ok) >= 20, [r.result.error_msg for r in measured if not r.result.is_ok]
    model.update(measured)
    scores = model.predict([r.candidate for r in measured])
    assert spearman(scores, [record_latency(r) for r in measured]) > 0.5


def test_transfer_base_fades_with_data(candidates, synthetic):
    base = XGBCostModel(loss="rank", features="knob", seed=1)
    base.update(synthetic)
    model = XGBCostModel(loss="rank", features="knob", seed=2, base_model=base)
    # Before any data of its own, the model is its base.
    np.testing.assert_array_equal(model.predict(candidates), base.predict(candidates))
    model.update(synthetic[:8])
    assert model.base_model_ is base and model.base_discount_ == pytest.approx(2 ** (-8 / 64))
    many = synthetic * 13  # 312 samples: discount 2^(-312/64) < 0.05, the base is dropped
    dropped = XGBCostModel(loss="rank", features="knob", seed=2, base_model=base)
    dropped.update(many)
    assert dropped.base_model_ is None and dropped.base_discount_ == 0.0
    with pytest.raises(ValueError, match="same features"):
        XGBCostModel(features="perstore", base_model=base)


def test_all_failed_records_do_not_train(candidates):
    model = XGBCostModel(features="knob")
    model.update(make_records(candidates[:4], [math.inf] * 4))
    assert not model.is_fitted


def test_registry_builds_by_name_and_refuses_unknown_names_and_arguments():
    assert {"xgb-rank", "xgb-reg", "metaschedule-xgb"} <= set(COST_MODELS)
    rank = make_cost_model("xgb-rank", seed=4, features="knob")
    assert isinstance(rank, XGBCostModel) and (rank.loss, rank.seed) == ("rank", 4)
    assert make_cost_model("xgb-reg").loss == "reg"
    assert make_cost_model(rank) is rank
    assert isinstance(make_cost_model("metaschedule-xgb"), CostModel)
    with pytest.raises(UnknownPluginError, match="xgb-rank"):
        make_cost_model("no-such-model")
    with pytest.raises(TypeError, match="fixed by the name"):
        make_cost_model("xgb-rank", loss="reg")
    with pytest.raises(TypeError, match="bogus"):
        make_cost_model("xgb-reg", bogus=1)
    with pytest.raises(TypeError, match="instance"):
        make_cost_model(rank, seed=1)
    with pytest.raises(ValueError, match="loss must be"):
        XGBCostModel(loss="hinge")
