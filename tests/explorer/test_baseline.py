"""Every run measures the unscheduled program as its baseline (issue 9): real TVM, real
measurement, real SQLite file."""

from __future__ import annotations

import subprocess
import sys

import pytest

from explorer.analysis import convergence_info, run_curve
from explorer.search import make_strategy
from explorer.search._baseline import baseline_candidate
from explorer.storage import get_store, summarize_run
from explorer.tuner import Tuner, strategy_of
from explorer.workloads import get_workload

# Timing-sensitive: run alone after the parallel part of `make test` (the `serial` marker).
pytestmark = pytest.mark.serial

WORKLOAD = get_workload("matmul", M=32, N=32, K=32)
ISSUE_EXPR = "D[i, j] = A[i, j] * B[j] + C[i]"
ISSUE_SHAPES = ["--shape", "A=100x200", "--shape", "B=200", "--shape", "C=100"]
BASELINE = {"baseline": True}


def _baselines(store, run_id):
    return [t for t in store.trials(run_id=run_id) if t.candidate.decisions == BASELINE]


def test_the_issues_expression_ends_no_slower_than_the_re_timed_baseline(tmp_path, burners):
    # A one-point knob space whose parallel + vectorize kernel was 15-100 us against 1-3 us
    # unscheduled: the run must not call the slower one its best.
    db = tmp_path / "records.db"
    cmd = [sys.executable, "-m", "explorer", "tune", "expr", "--expr", ISSUE_EXPR, *ISSUE_SHAPES]
    out = subprocess.run(
        [*cmd, "--db", str(db), "-q"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    said = "no schedule beat the unscheduled program" in out.stdout
    assert said or "x faster than unscheduled" in out.stdout, out.stdout
    with get_store(db, read_only=True) as store:
        (run,) = store.runs()
        rows = store.trial_rows(run_id=run.id)
        summary = summarize_run(run.id, rows)
        baseline = [r for r in rows if r.decisions == BASELINE]
        # measured before the search, re-timed beside the best at the end (1 to 3 rounds)
        assert 2 <= len(baseline) <= 4 and all(r.is_remeasure for r in baseline)
        assert summary.num_trials == 1 and summary.best_secs is not None
        assert summary.baseline_secs is not None and summary.is_confirmed
        assert summary.best_secs <= summary.baseline_secs
        assert said == (summary.best_trial_id == baseline[0].id)


@pytest.mark.parametrize("strategy", ["random", "autotvm", "evolutionary+droplet"])
def test_every_run_stores_one_baseline_that_is_not_a_trial(measurer, store, cpu_target, strategy):
    tuner = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=1)
    result = tuner.run(WORKLOAD, cpu_target, strategy, max_trials=4, seed=0)
    trials = store.trials(run_id=result.run.id)
    (first, *again) = _baselines(store, result.run.id)
    assert first.seq == 0 and first.is_remeasure  # measured before any trial
    assert first.candidate.trace == baseline_candidate(WORKLOAD, cpu_target).trace
    # its final re-timing: up to one reading per round of the confirmation
    assert len(again) <= tuner.confirm_rounds and all(t.is_remeasure for t in again)
    assert result.num_trials == 4 == store.count_trials(run_id=result.run.id, remeasures=False)
    assert result.baseline is not None and result.baseline.id == first.id
    searched = [t for t in trials if not t.is_remeasure]
    assert len(searched) == 4 and all(t.candidate.decisions != BASELINE for t in searched)
    assert result.baseline_secs is not None and result.best_secs is not None
    assert result.speedup_over_baseline == pytest.approx(result.baseline_secs / result.best_secs)
    assert result.best_secs <= result.baseline_secs


def test_resume_replays_without_the_baseline_and_never_measures_it_again(
    measurer, store, cpu_target, caplog
):
    def interrupt(progress) -> None:
        if progress.num_trials >= 6:
            raise KeyboardInterrupt

    tuner = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0)
    with pytest.raises(KeyboardInterrupt):
        tuner.run(WORKLOAD, cpu_target, "autotvm", max_trials=10, seed=4, on_progress=interrupt)
    (run,) = store.runs()
    before = _baselines(store, run.id)
    with caplog.at_level("WARNING", logger="explorer.tuner"):
        result = tuner.resume(run.id)
    assert result.num_trials == 10
    assert _baselines(store, run.id) == before and len(before) == 1  # confirm_top=0: no re-timing
    # The stored batches (a model fit among them: plan_size 4) replay exactly: the baseline is
    # not among them and was never told to the strategy.
    assert "diverged" not in caplog.text


def test_autotvm_fits_its_model_inside_16_trials(measurer, store, cpu_target):
    strategy = make_strategy("autotvm")
    result = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=0).run(
        WORKLOAD, cpu_target, strategy, max_trials=16, seed=0
    )
    assert result.num_trials == 16
    # plan_size="auto": a quarter of the budget; the run's settings say what was used
    assert result.run.settings["plan_size"] == strategy.plan_size_ == 4
    assert strategy.num_fits_ >= 2 and strategy.model_.is_fitted
    predicted = [t for t in store.trials(run_id=result.run.id) if t.predicted.get("xgb-rank")]
    assert len(predicted) >= 4  # model-guided proposals, stored with their predictions
    # A resumed run is rebuilt with the same plan size.
    assert strategy_of(result.run).plan_size == 4


def test_evolutionary_scales_its_rounds_and_warm_up_to_the_budget(measurer, store, cpu_target):
    result = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=0).run(
        WORKLOAD, cpu_target, "evolutionary+droplet", max_trials=20, seed=0
    )
    settings = result.run.settings
    # 30% of 20 trials explored (at least 8), in rounds of a quarter of that (at least 4)
    assert settings["explore_trials"] == 8
    assert settings["num_trials_per_iter"] == settings["num_warmup_samples"] == 4
    # and a population of 8 per candidate of a round, at least 64 (MetaSchedule: 512 for 64)
    assert settings["population_size"] == 64
    assert strategy_of(result.run).explore_trials == 8


def test_the_convergence_analysis_returns_the_baseline(measurer, store, cpu_target):
    result = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0).run(
        WORKLOAD, cpu_target, "random", max_trials=4, seed=0
    )
    (first,) = _baselines(store, result.run.id)
    curve = run_curve(store, result.run)
    assert curve.num_trials == 4 and curve.num_remeasured == 1  # the baseline: not a trial
    assert first.result.is_ok  # a busy machine no longer makes it inconclusive (issue 21)
    assert curve.baseline_secs == first.median_secs
    info = convergence_info(store, metric="latency_ms")
    assert info.baseline == pytest.approx(first.median_secs * 1e3)
    assert info.groups[0].runs[0].baseline == info.baseline
