"""Cost-model predictions against measurements: pairs, rank correlations, decimation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer.analysis import MIN_POINTS, TrialTable, predicted_vs_measured_info
from explorer.cost_models import kendall, spearman

FAIL = None


def test_correlations_per_model_and_failures_counted(store, add_run):
    lat = [5.0, 1.0, 3.0, FAIL, 2.0, 4.0, FAIL, 6.0]
    predicted = []
    for ms in lat:
        p: dict[str, float] = {}
        if ms is not None:
            p["good"] = -ms  # higher = faster: a perfect ranking
            p["bad"] = ms  # exactly backwards
        else:
            p["good"] = 0.0
        predicted.append(p)
    predicted[2] = {}  # one trial nobody predicted
    _, records = add_run("autotvm", lat, predicted=predicted)

    info = predicted_vs_measured_info(records)
    assert [m.model for m in info.models] == ["bad", "good"]
    bad, good = info.models
    assert good.spearman == pytest.approx(1.0) and good.kendall == pytest.approx(1.0)
    assert bad.spearman == pytest.approx(-1.0) and bad.kendall == pytest.approx(-1.0)
    assert good.num_points == 5 and good.num_failed == 2
    assert bad.num_points == 5 and bad.num_failed == 0
    assert info.num_trials == 8 and info.num_failed == 2 and info.num_unpredicted == 1
    # Each pair is (prediction, the same trial's latency).
    by_id = {r.id: r for r in records}
    for tid, pred, ms in zip(good.trial_ids, good.predicted, good.latency_ms, strict=True):
        assert by_id[tid].predicted["good"] == pred
        assert by_id[tid].median_secs * 1e3 == pytest.approx(ms)
    # The rank axis: 1 = predicted fastest, which (for "good") is the fastest trial.
    assert max(good.predicted_rank) == 1.0
    fastest = good.latency_ms[good.predicted_rank.index(1.0)]
    assert fastest == pytest.approx(1.0)


def test_uses_the_cost_model_metrics(store, add_run):
    rng = np.random.default_rng(1)
    lat = list(rng.uniform(1, 10, 40))
    scores = [-x + rng.normal(0, 2) for x in lat]
    _, records = add_run("autotvm", lat, predicted=[{"m": s} for s in scores])
    (m,) = predicted_vs_measured_info(records).models
    secs = [x / 1e3 for x in lat]
    assert m.spearman == pytest.approx(spearman(scores, secs))
    assert m.kendall == pytest.approx(kendall(scores, secs))
    assert 0 < m.spearman < 1


def test_points_are_capped_but_correlations_use_all(store, add_run):
    lat = [float(i + 1) for i in range(50)]
    noisy = [-x if i % 3 else x for i, x in enumerate(lat)]
    _, records = add_run("autotvm", lat, predicted=[{"m": s} for s in noisy], batch=50)
    full = predicted_vs_measured_info(records).models[0]
    capped_info = predicted_vs_measured_info(records, max_points=10)
    capped = capped_info.models[0]
    assert len(capped.trial_ids) == len(capped.latency_ms) == len(capped.predicted_rank) == 10
    assert capped_info.num_points == 10
    assert capped.num_points == 50
    assert capped.spearman == full.spearman
    assert min(capped.latency_ms) == pytest.approx(1.0)  # the fastest is always kept
    with pytest.raises(ValueError, match="max_points"):
        predicted_vs_measured_info(records, max_points=0)


def test_records_and_table_agree_and_nothing_is_nan_safe(store, add_run):
    _, records = add_run("autotvm", [1.0, 2.0], predicted=[{"m": 1.0}, {"m": 1.0}])
    a = predicted_vs_measured_info(records)
    b = predicted_vs_measured_info(TrialTable.from_records(records))
    assert a == b
    assert math.isnan(a.models[0].spearman)  # constant predictions: undefined, not an error
    empty = predicted_vs_measured_info([])
    assert empty.models == () and empty.num_trials == 0


def test_remeasurements_are_counted_apart(store, add_run):
    # 3 predicted trials, 1 unpredicted, then the best two timed again (no prediction stored).
    predicted = [{"m": 1.0}, {"m": 2.0}, {"m": 3.0}, {}, {}, {}]
    _, records = add_run(
        "autotvm", [3.0, 2.0, 1.0, 4.0, 1.1, 2.1], predicted=predicted, traces=[0, 1, 2, 3, 2, 1]
    )
    info = predicted_vs_measured_info(records)
    assert info.num_trials == 4 and info.num_remeasured == 2
    assert info.num_unpredicted == 1 and info.num_predicted == 3
    assert info.models[0].num_points == 3


def test_too_few_points_get_no_correlation(store, add_run):
    # Issue 10: three presses of Measure showed "Spearman 1.00" for n=3.
    lat = [3.0, 1.0, 2.0, 4.0, 5.0]
    _, records = add_run("manual", lat, predicted=[{"m": -x} for x in lat])
    few = predicted_vs_measured_info(records[: MIN_POINTS - 1]).models[0]
    assert few.num_points == MIN_POINTS - 1 and math.isnan(few.spearman)
    assert math.isnan(few.kendall)
    enough = predicted_vs_measured_info(records).models[0]
    assert enough.num_points == MIN_POINTS and enough.spearman == pytest.approx(1.0)
