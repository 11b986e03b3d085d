"""Ranking metrics on small hand-computed cases, failures included."""

from __future__ import annotations

import math

import pytest

from explorer.cost_models import (
    XGBCostModel,
    average_recall_curve,
    evaluate,
    kendall,
    spearman,
    top_k_recall,
    top_k_score,
)

INF = math.inf
# throughputs 1, 0.25, 0.5, 0 (the last one failed)
SCORES = [0.9, 0.1, 0.5, 0.3]
LATENCIES = [1.0, 4.0, 2.0, INF]


def test_rank_correlations_match_hand_computed_values():
    # score ranks (4, 1, 3, 2) vs throughput ranks (4, 2, 3, 1): sum d^2 = 2 -> 1 - 12/60
    assert spearman(SCORES, LATENCIES) == pytest.approx(0.8)
    # 5 concordant pairs, 1 discordant (candidate 1 vs the failed 3)
    assert kendall(SCORES, LATENCIES) == pytest.approx(4 / 6)
    assert spearman([1, 2, 3], [3.0, 2.0, 1.0]) == pytest.approx(1.0)
    assert kendall([3, 2, 1], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)


def test_top_k_recall_counts_only_successful_trials_as_the_truth():
    assert top_k_recall(SCORES, LATENCIES, 1) == 1.0
    assert top_k_recall(SCORES, LATENCIES, 2) == 1.0  # {0, 2} both ways
    assert top_k_recall(SCORES, LATENCIES, 3) == pytest.approx(2 / 3)  # {0,2,3} vs {0,2,1}
    # k beyond the successes: the truth is the 3 successes, all of them predicted
    assert top_k_recall(SCORES, LATENCIES, 4) == 1.0
    assert math.isnan(top_k_recall([1, 2], [INF, INF], 1))


def test_top_k_score_is_the_best_found_over_the_best_overall():
    assert top_k_score(SCORES, LATENCIES, 1) == 1.0
    reversed_scores = [0.1, 0.9, 0.5, 0.3]
    assert top_k_score(reversed_scores, LATENCIES, 1) == pytest.approx(0.25)
    assert top_k_score(reversed_scores, LATENCIES, 2) == pytest.approx(0.5)
    assert top_k_score([0, 0, 1], [1.0, 2.0, INF], 1) == 0.0  # the favourite failed
    assert math.isnan(top_k_score([1, 2], [INF, float("nan")], 1))


def test_undefined_correlations_are_nan_and_bad_input_raises():
    assert math.isnan(spearman([1.0], [1.0]))
    assert math.isnan(spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))  # constant prediction
    assert math.isnan(kendall([1.0, 2.0], [INF, INF]))
    with pytest.raises(ValueError, match="equal length"):
        spearman([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="k must be"):
        top_k_recall(SCORES, LATENCIES, 0)


def test_average_recall_curve_is_autotvms_a_recall():
    assert average_recall_curve([3.0, 2.0, 1.0], [3.0, 2.0, 1.0], 3) == 1.0
    # picks in order 0, 1, 2 have true ranks 2, 0, 1: recalls 0, 1/2, 1
    assert average_recall_curve([3.0, 2.0, 1.0], [1.0, 3.0, 2.0], 3) == pytest.approx(0.5)
    assert average_recall_curve([3.0, 2.0, 1.0], [1.0, 3.0, 2.0], 1) == 0.0


def test_evaluate_trains_then_scores_the_held_out_trials(measured):
    acc = evaluate(XGBCostModel(features="knob", seed=0), measured[:16], measured[16:], k=3)
    assert (acc.num_train, acc.num_test, acc.k) == (16, 8, 3)
    for value in (acc.spearman, acc.kendall, acc.top_k_recall, acc.top_k_score):
        assert math.isnan(value) or -1.0 <= value <= 1.0
    assert 0.0 <= acc.top_k_score <= 1.0
