"""CSV and JSON Lines exports."""

from __future__ import annotations

import csv
import json

import pytest

from explorer.core import Candidate, MeasureResult
from explorer.storage import export_csv, export_jsonl
from explorer.types import CacheFlush, MeasureStatus


@pytest.fixture
def filled(store, workload, other_workload, target, make_trial):
    a = store.create_run(workload, target, "random")
    b = store.create_run(other_workload, target, "grid")
    store.add_trials(a.id, [
        make_trial(workload, target, (3e-3, 1e-3, 2e-3), predicted={"xgb": 0.5},
                   build_secs=0.125, cache_flush=CacheFlush.ARGUMENTS),
        make_trial(workload, target, None, status=MeasureStatus.BUILD_ERROR,
                   error_msg='line 1, "quoted"\nline 2'),
    ])  # fmt: skip
    store.add_trials(b.id, [make_trial(other_workload, target, (0.1 / 3,),
                                       predicted={"random": -1.25, "xgb": 2.0})])  # fmt: skip
    return store, a, b


def test_csv_has_one_row_per_trial_joined_with_its_run(filled, tmp_path, workload, target):
    store, a, b = filled
    path = tmp_path / "trials.csv"
    assert export_csv(store, path) == 3
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [
        "trial_id", "run_id", "strategy", "workload", "target", "seq", "status", "median_secs",
        "gflops", "build_secs", "num_repeats", "is_remeasure", "is_baseline", "device",
        "cache_flush", "run_secs_0", "run_secs_1", "run_secs_2",
        "pred_random", "pred_xgb", "error_msg", "created_at",
    ]  # fmt: skip
    ok, failed, other = rows
    trials = store.trials()
    assert ok["trial_id"] == str(trials[0].id) and ok["run_id"] == str(a.id)
    assert ok["strategy"] == "random" and other["strategy"] == "grid"
    assert ok["workload"] == workload.key() and ok["target"] == target.key()
    assert ok["status"] == "ok" and failed["status"] == "build_error"
    assert [float(ok[f"run_secs_{i}"]) for i in range(3)] == [3e-3, 1e-3, 2e-3]
    assert float(ok["median_secs"]) == 2e-3 and ok["num_repeats"] == "3"
    assert float(ok["gflops"]) == trials[0].result.gflops  # full precision
    assert float(ok["build_secs"]) == 0.125
    assert ok["pred_xgb"] == "0.5" and ok["pred_random"] == ""
    assert float(other["run_secs_0"]) == 0.1 / 3 and other["run_secs_1"] == ""
    assert other["pred_random"] == "-1.25"
    assert failed["median_secs"] == "" and failed["num_repeats"] == "0"
    assert ok["is_remeasure"] == failed["is_remeasure"] == "0"
    assert ok["is_baseline"] == failed["is_baseline"] == "0"  # no unscheduled program here
    assert ok["device"] == ""  # measured on this machine, not on a fleet device
    assert ok["cache_flush"] == "arguments" and failed["cache_flush"] == "none"
    assert failed["error_msg"] == 'line 1, "quoted"\nline 2'  # quoting survives
    assert float(ok["created_at"]) == trials[0].created_at


def test_csv_filters(filled, tmp_path, workload):
    store, a, b = filled
    assert export_csv(store, tmp_path / "a.csv", run_id=a.id) == 2
    assert export_csv(store, tmp_path / "w.csv", workload=workload) == 2
    assert export_csv(store, tmp_path / "b.csv", run_id=b.id, workload=workload) == 0
    with open(tmp_path / "b.csv", newline="") as fh:
        (header,) = list(csv.reader(fh))
    assert "run_secs_0" not in header and header[-2:] == ["error_msg", "created_at"]


def test_jsonl_lines_read_back_as_candidates_and_results(filled, tmp_path):
    store, a, _ = filled
    path = tmp_path / "trials.jsonl"
    assert export_jsonl(store, path) == 3
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line, trial in zip(lines, store.trials(), strict=True):
        assert line["id"] == trial.id and line["seq"] == trial.seq
        assert line["run_id"] == trial.run_id and line["predicted"] == trial.predicted
        assert Candidate.from_json(line["candidate"]) == trial.candidate
        assert MeasureResult.from_json(line["result"]) == trial.result
    assert lines[0]["strategy"] == "random" and lines[2]["strategy"] == "grid"
    assert export_jsonl(store, path, run_id=a.id) == 2
    assert len(path.read_text().splitlines()) == 2


def test_exports_flag_re_measurements(store, workload, target, make_trial, tmp_path):
    run = store.create_run(workload, target, "random")
    store.add_trials(run.id, [make_trial(workload, target, 2e-3)])
    again = make_trial(workload, target, 1e-3)
    store.add_trials(run.id, [type(again)(again.candidate, again.result, is_remeasure=True)])
    export_csv(store, tmp_path / "t.csv")
    with open(tmp_path / "t.csv", newline="") as fh:
        assert [row["is_remeasure"] for row in csv.DictReader(fh)] == ["0", "1"]
    export_jsonl(store, tmp_path / "t.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    assert [line["is_remeasure"] for line in lines] == [False, True]
