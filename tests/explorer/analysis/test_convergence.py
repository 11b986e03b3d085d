"""Convergence and strategy comparison infos, read from a real store."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.analysis import (
    ConvergenceInfo,
    TrialTable,
    convergence_info,
    run_curve,
    run_curves,
    strategy_comparison_info,
)
from explorer.analysis._convergence import RunSeries, _spread_by_secs, _spread_by_trials
from explorer.target import Target
from explorer.testing.recordings import TINY, open_recording, replay_measurer
from explorer.tuner import Tuner
from explorer.workloads import get_workload

FAIL = None  # a trial that failed to build


def gflops(workload, ms):
    return workload.flops() / (ms / 1e3) / 1e9


def test_a_run_keeps_only_its_improvements(store, add_run):
    run, records = add_run("random", [FAIL, 4.0, 5.0, 3.0, 3.0, 6.0, 2.0])
    curve = run_curve(store, run)
    assert curve.num_trials == 7
    assert curve.seqs == (1, 3, 6)
    assert curve.best_secs == pytest.approx((4e-3, 3e-3, 2e-3))
    assert len(curve.elapsed_secs) == 3
    assert list(curve.elapsed_secs) == sorted(curve.elapsed_secs)
    assert curve.best_within(1) == math.inf  # the only trial failed
    assert curve.best_within(4) == pytest.approx(3e-3)
    assert curve.best_within(100) == pytest.approx(2e-3)


def test_a_long_run_ships_few_points(store, add_run):
    lat = [10.0 - 0.001 * i if i % 250 == 0 else 20.0 for i in range(1000)]
    run, _ = add_run("random", lat, batch=500)
    info = convergence_info(store)
    (group,) = info.groups
    (series,) = group.runs
    assert series.trials == (1, 251, 501, 751)
    assert series.num_trials == 1000
    # The median is a step function too: 4 changes and the end, not 200 grid points.
    assert len(group.by_trials.x) == 5
    assert group.by_trials.x[-1] == 1000
    assert info.num_points < 100


def test_groups_per_strategy_with_median_and_spread(store, add_run, workload):
    add_run("random", [FAIL, 4.0, 2.0, 3.0])  # best: -, 4, 2, 2
    add_run("random", [8.0, 1.0, 9.0])  # best: 8, 1, 1 (shorter)
    add_run("droplet", [5.0, 5.0])
    info = convergence_info(store, num_grid=50)
    assert isinstance(info, ConvergenceInfo)
    assert [g.label for g in info.groups] == ["random", "droplet"]
    assert info.metric_label == "GFLOPS"
    rnd = info.groups[0]
    assert len(rnd.runs) == 2
    assert rnd.runs[0].values == pytest.approx((gflops(workload, 4.0), gflops(workload, 2.0)))
    s = rnd.by_trials
    assert s.x == (1.0, 2.0, 3.0, 4.0)
    # Trial 1: only the second run has a success; trial 4: the second run has ended, and its
    # best still votes.
    assert s.num_runs == (2, 2, 2, 1)
    assert math.isnan(s.median[0]) and math.isnan(s.lo[0])  # the lower median found nothing
    assert s.hi[0] == pytest.approx(gflops(workload, 8.0))
    assert s.lo[1] == pytest.approx(gflops(workload, 4.0))
    assert s.hi[1] == pytest.approx(gflops(workload, 1.0))
    assert s.median[1] == pytest.approx(gflops(workload, 4.0))  # a value a run reached
    assert s.median[3] == pytest.approx(gflops(workload, 2.0))
    assert s.hi[3] == pytest.approx(gflops(workload, 1.0))  # the ended run's best stays
    assert len(rnd.by_secs.x) == len(rnd.by_secs.median) == len(rnd.by_secs.num_runs)


def test_latency_metric_is_in_milliseconds(store, add_run):
    add_run("random", [3.0, 2.0, 5.0])
    info = convergence_info(store, metric="latency_ms")
    assert info.metric_label == "latency (ms)"
    assert info.groups[0].runs[0].values == pytest.approx((3.0, 2.0))
    with pytest.raises(ValueError, match="metric"):
        convergence_info(store, metric="speed")


def test_filters_and_curves_input(store, add_run, workload, target):
    add_run("random", [3.0])
    add_run("droplet", [2.0])
    add_run("random", [1.0], workload=get_workload("matmul", M=32, N=32, K=64))
    assert [g.label for g in convergence_info(store, workload).groups] == ["random", "droplet"]
    only = convergence_info(store, workload, target, strategies=["droplet"])
    assert [g.strategy for g in only.groups] == ["droplet"]
    curves = run_curves(store, workload, target)
    assert len(curves) == 2
    assert convergence_info(curves).num_runs == 2
    with pytest.raises(TypeError, match="filters"):
        convergence_info(curves, workload)


def test_empty_store(store):
    info = convergence_info(store)
    assert info.groups == () and info.num_runs == 0
    cmp = strategy_comparison_info(store)
    assert cmp.groups == () and cmp.budget == 0


def test_comparison_at_an_equal_budget(store, add_run, workload):
    a, _ = add_run("random", [5.0, 4.0, 1.0, 1.0])
    b, _ = add_run("random", [FAIL, FAIL, FAIL])
    c, _ = add_run("droplet", [3.0, 2.0, 0.5, 0.1, 0.1])
    info = strategy_comparison_info(store)
    assert info.budget == 3  # the shortest run
    rnd, drop = info.groups
    assert rnd.run_ids == (a.id, b.id)
    assert rnd.values[0] == pytest.approx(gflops(workload, 1.0))
    assert math.isnan(rnd.values[1]) and rnd.num_without_success == 1
    assert rnd.median == pytest.approx(gflops(workload, 1.0))
    assert drop.values == pytest.approx((gflops(workload, 0.5),))

    explicit = strategy_comparison_info(store, budget=4, metric="latency_ms")
    assert explicit.num_short_runs == 1  # the failed 3-trial run
    assert [g.values for g in explicit.groups] == [
        pytest.approx((1.0,)),
        pytest.approx((0.1,)),
    ]
    with pytest.raises(ValueError, match="budget"):
        strategy_comparison_info(store, budget=0)


def test_labels_name_the_target_when_runs_span_several(store, add_run, target):
    other = Target(kind="llvm", mcpu="generic", num_cores=1, name="generic")
    add_run("random", [1.0])
    add_run("random", [2.0], target=other)
    labels = [g.label for g in convergence_info(store).groups]
    assert labels == [f"random @ {target.name or target.key()}", "random @ generic"]


def test_remeasurements_are_off_the_trials_axis_and_out_of_budgets(store, add_run, workload):
    # 4 trials, then the best two re-timed: a faster re-timing (0.5 ms) does not move the curve.
    run, records = add_run("random", [4.0, 3.0, 5.0, 2.0, 0.5, 2.5], traces=[0, 1, 2, 3, 3, 1])
    curve = run_curve(store, run)
    assert curve.num_trials == 4 and curve.num_remeasured == 2
    assert curve.trials == (1, 2, 4) and curve.seqs == (0, 1, 3)
    assert curve.best_secs == pytest.approx((4e-3, 3e-3, 2e-3))
    assert curve.best_within(4) == pytest.approx(2e-3) == curve.best_within(100)
    assert curve.last_elapsed_secs <= records[-1].created_at - run.started_at

    other, _ = add_run("droplet", [1.0, 1.0, 1.0, 1.0, 1.0], traces=[0, 1, 2, 3, 4])
    info = convergence_info(store)
    assert info.num_trials == 9 and info.num_remeasured == 2
    series = info.groups[0].runs[0]
    assert series.num_trials == 4 and series.num_remeasured == 2
    assert info.groups[0].by_trials.x[-1] == 4  # the axis ends at the last trial
    # Both runs have 4+ trials: the budget is 4, not the 6 records of the first run.
    assert strategy_comparison_info(store).budget == 4


def test_a_curve_from_a_table_equals_the_curve_from_the_store(store, add_run):
    a, ra = add_run("random", [FAIL, 4.0, 3.0, 3.5], traces=[0, 1, 2, 1])
    b, rb = add_run("random", [2.0, 1.0])
    table = TrialTable.from_records(ra + rb)
    assert run_curve(table, a) == run_curve(store, a)
    assert run_curve(table, b) == run_curve(store, b)


def test_a_tuner_run_counts_its_budget_not_its_confirmations(tmp_path):
    store = open_recording(tmp_path)
    target = store.runs(workload=TINY)[0].target
    tuner = Tuner(measurer=replay_measurer(store, TINY), store=store, confirm_top=3)
    result = tuner.run(TINY, target, "random", max_trials=8, seed=0)
    assert result.num_trials == 8
    # 8 trials, the baseline (unrecorded here: no timing, so not re-timed), then the 3 best
    # re-timed side by side in 3 rounds (a replay reads the same every round: all 3 take part)
    assert store.count_trials(run_id=result.run.id) == 8 + 1 + 3 * 3
    curve = run_curve(store, result.run)
    assert curve.num_trials == 8 and curve.num_remeasured == 10 and curve.baseline_secs is None
    info = convergence_info([curve])
    assert info.groups[0].by_trials.x[-1] == 8
    store.close()


# -- the summary is a best-so-far curve (issue 10: "best so far" medians went down) -------------
@st.composite
def run_series(draw, metric):
    """One run's improvement points: trials increasing, values getting better."""
    n = draw(st.integers(1, 40))
    steps = sorted(draw(st.sets(st.integers(1, n), max_size=8)))
    gains = draw(st.lists(st.floats(0.01, 100), min_size=len(steps), max_size=len(steps)))
    gflops = np.cumsum(gains)  # better and better
    values = gflops if metric == "gflops" else 1.0 / gflops
    return RunSeries(
        run_id=draw(st.integers(1, 10**6)),
        seqs=tuple(t - 1 for t in steps),
        trials=tuple(steps),
        elapsed_secs=tuple(0.37 * t for t in steps),
        values=tuple(float(v) for v in values),
        num_trials=n,
        last_elapsed_secs=0.37 * n + draw(st.floats(0, 3)),
        num_remeasured=0,
    )


@given(st.sampled_from(["gflops", "latency_ms"]).flatmap(
    lambda m: st.tuples(st.just(m), st.lists(run_series(m), min_size=1, max_size=7))
), st.integers(2, 60))  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_every_statistic_only_gets_better(metric_and_runs, num_grid):
    metric, runs = metric_and_runs
    sign = 1 if metric == "gflops" else -1  # latencies go down
    for spread in (
        _spread_by_trials(runs, num_grid, metric),
        _spread_by_secs(runs, num_grid, metric),
    ):
        for name in ("lo", "q25", "median", "q75", "hi"):
            values = np.asarray(getattr(spread, name))
            found = ~np.isnan(values)
            # "nothing found yet" comes first, then values that never get worse
            assert not np.any(found[:-1] & ~found[1:]), (name, values)
            assert np.all(sign * np.diff(values[found]) >= -1e-12), (name, values)
        # numerically ordered (min to max) where each is found
        order = np.asarray([spread.lo, spread.q25, spread.median, spread.q75, spread.hi])
        both = ~np.isnan(order[:-1]) & ~np.isnan(order[1:])
        assert np.all(np.diff(order, axis=0)[both] >= 0), order
