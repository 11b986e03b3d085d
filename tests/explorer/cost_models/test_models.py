"""Every registered model passes the shipped CostModelContract; the XGBoost models learn
real measurements and transfer."""

from __future__ import annotations

import math

import numpy as np
import pytest
from cm_helpers import make_records, tile_latency

from explorer.cost_models import (
    COST_MODELS,
    CostModel,
    XGBCostModel,
    make_cost_model,
)
from explorer.errors import UnknownPluginError
from explorer.testing.contracts import CostModelContract


class TestXGBRank(CostModelContract):
    def make_model(self, seed):
        return make_cost_model("xgb-rank", seed=seed)


class TestXGBReg(CostModelContract):
    def make_model(self, seed):
        return make_cost_model("xgb-reg", seed=seed)


class TestXGBRankOnKnobs(CostModelContract):
    def make_model(self, seed):
        return XGBCostModel(loss="rank", features="knob", seed=seed)


class TestMetaScheduleXGB(CostModelContract):
    def make_model(self, seed):
        return make_cost_model("metaschedule-xgb", seed=seed)


class TestStatic(CostModelContract):
    def make_model(self, seed):
        return make_cost_model("static")  # analytical: nothing random to seed


class TestValue(CostModelContract):
    def make_model(self, seed):
        return make_cost_model("value", seed=seed)


def test_every_registered_model_has_a_contract_test():
    names = {"xgb-rank", "xgb-reg", "metaschedule-xgb", "static", "value"}
    assert set(COST_MODELS) == names


@pytest.fixture(scope="module")
def synthetic(candidates):
    """Training trials on a known landscape, plus two failures."""
    lat = [tile_latency(c) for c in candidates[:22]] + [math.inf, math.inf]
    return make_records(candidates[:24], lat)


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
