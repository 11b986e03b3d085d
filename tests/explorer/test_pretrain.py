"""`explorer pretrain`: random schedules of presets measured for transfer learning, the least
covered preset first, going on where it stopped; then `explorer tune --transfer` learns from
them. Real measurements of two quick presets (a row reduction and an elementwise chain)."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from explorer.errors import ExplorerError
from explorer.pretrain import coverage, pretrain, pretrain_presets
from explorer.storage import RunStatus, get_store
from explorer.workloads import get_workload

QUICK = ["reduce_rows_1024", "reduce_cols_1024"]  # two reductions, 60 schedules each


def test_the_least_covered_preset_goes_first_and_a_second_pretraining_goes_on(
    measurer, store, cpu_target
):
    told = []
    first = pretrain(
        store,
        measurer,
        cpu_target,
        seconds=600,
        names=QUICK,
        per_preset=4,
        trials_per_run=3,
        on_progress=told.append,
    )
    assert [(name, trials) for name, _, trials in first.runs] == [
        ("reduce_rows_1024", 3),
        ("reduce_cols_1024", 3),
        ("reduce_rows_1024", 1),
        ("reduce_cols_1024", 1),
    ]
    assert first.why_stopped == "every preset has 4 trials" and first.trials == 8
    assert first.covered == coverage(store, cpu_target, QUICK) == dict.fromkeys(QUICK, 4)
    assert told and told[-1].trials == 8 and told[-1].preset == "reduce_cols_1024"
    assert all(p.elapsed_secs <= 600 and p.budget_secs == 600 for p in told)
    runs = {r.id: r for r in store.runs()}
    assert all(runs[run_id].strategy == "random" for _, run_id, _ in first.runs)
    assert all(runs[run_id].status == RunStatus.FINISHED for _, run_id, _ in first.runs)
    # Started again with more to do: it goes on, and draws schedules it did not measure.
    again = pretrain(store, measurer, cpu_target, seconds=600, names=QUICK, per_preset=6)
    assert [(name, trials) for name, _, trials in again.runs] == [
        ("reduce_rows_1024", 2),
        ("reduce_cols_1024", 2),
    ]
    for name in QUICK:
        trials = store.trials(workload=get_workload(name))
        traces = [str(t.candidate.trace) for t in trials if not t.is_remeasure]
        assert len(traces) == 6 == len(set(traces)), name


def test_a_stopped_pretraining_keeps_what_it_measured(measurer, store, cpu_target):
    def stop_after_a_batch(progress):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pretrain(
            store,
            measurer,
            cpu_target,
            seconds=600,
            names=QUICK,
            trials_per_run=4,
            on_progress=stop_after_a_batch,
        )
    (run,) = store.runs()
    assert run.status == RunStatus.INTERRUPTED and run.workload.family == "reduce_sum"
    kept = coverage(store, cpu_target, QUICK)
    assert kept["reduce_rows_1024"] > 0 and kept["reduce_cols_1024"] == 0
    # the next pretraining starts with the preset that has none
    more = pretrain(store, measurer, cpu_target, seconds=600, names=QUICK, per_preset=1)
    assert [name for name, _, _ in more.runs] == ["reduce_cols_1024"]
    # a preset whose every schedule is measured leaves the rotation (an elementwise chain and a
    # transpose have one schedule each)
    tiny = pretrain(store, measurer, cpu_target, seconds=600, names=["chain_1m", "transpose_1024"])
    assert [(name, trials) for name, _, trials in tiny.runs] == [
        ("chain_1m", 1),
        ("transpose_1024", 1),
    ]
    assert tiny.why_stopped == "every schedule measured"
    # so does should_stop (checked by each run between batches): here before the first batch
    calls = []
    stopped = pretrain(
        store, measurer, cpu_target, seconds=600, names=QUICK,
        should_stop=lambda: bool(calls.append(1) or len(calls) > 1),
    )  # fmt: skip
    assert stopped.why_stopped == "stopped" and stopped.trials == 0 and len(stopped.runs) == 1
    # a deadline ends it too
    late = pretrain(store, measurer, cpu_target, seconds=1e-9, names=QUICK)
    assert late.runs == () and late.why_stopped == "time budget reached"


def test_bad_input_is_one_sentence():
    with pytest.raises(ExplorerError, match="no preset named nope, zzz"):
        pretrain_presets(["nope"], ["zzz"])
    with pytest.raises(ExplorerError, match="no preset left"):
        pretrain_presets(["chain_1m"], ["chain_1m"])
    assert pretrain_presets(skip=["reduce_cols_1024"])[:2] == ["matmul_512", "matmul_1024"]
    assert "reduce_cols_1024" not in pretrain_presets(skip=["reduce_cols_1024"])
    for seconds in (0, -1, math.nan, math.inf, "60"):
        with pytest.raises(ValueError, match="seconds must be > 0 and finite"):
            pretrain(None, None, None, seconds=seconds)  # type: ignore[arg-type]
    with pytest.raises(ExplorerError, match="no preset given"):
        pretrain(None, None, None, seconds=1, names=[])  # type: ignore[arg-type]
    with pytest.raises(ExplorerError, match="no preset named matmul"):
        pretrain(None, None, None, seconds=1, names=["matmul"])  # type: ignore[arg-type]


def run(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "explorer", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def test_pretrain_then_tune_with_transfer_from_the_command_line(tmp_path):
    db = str(tmp_path / "records.db")
    only = ["--only", QUICK[0], "--only", QUICK[1]]
    out = run("pretrain", "--db", db, "--minutes", "10", *only, "--per-preset", "3", "-q")
    assert out.returncode == 0, out.stderr
    said = out.stdout.splitlines()
    assert said[0].startswith("pretraining on 2 presets for llvm")
    assert said[0].endswith(": the database holds 0 trials of them")
    assert said[1:] == [
        "6 trials in 2 runs (every preset has 3 trials)",
        "the database now holds 3 trials of each preset on this target; "
        "`explorer tune ... --transfer` learns from them",
    ]
    tune = ["tune", "matmul", "-p", "M=32", "-p", "N=32", "-p", "K=32", "--db", db, "-q"]
    out = run(*tune, "--strategy", "evolutionary", "--transfer", "--trials", "4")
    assert out.returncode == 0, out.stderr
    # six trials and the two presets' unscheduled baselines
    assert "transfer: its model learned first from 8 trials of other workloads" in out.stdout
    (run_info,) = [r for r in get_store(db).runs() if r.strategy == "evolutionary"]
    assert run_info.settings["transfer_from"] == "auto"
    out = run(*tune, "--strategy", "autotvm", "--transfer", "--trials", "4")
    assert out.returncode == 0, out.stderr
    assert "transfer: nothing learned from other workloads (it needs at least 500)" in out.stdout
    # refused in one sentence, before anything is measured
    for args, says in (
        (["--strategy", "random", "--transfer"], "strategy 'random' cannot learn from other"),
        (["--resume", str(run_info.id), "--transfer"], None),
        (["--replay", db, "--transfer"], "it takes no --transfer"),
    ):
        out = run(*tune, *args)
        if says is None:  # the run began with --transfer: repeating it is allowed
            assert out.returncode in (0, 1), out.stderr
            continue
        assert out.returncode == 2 and says in out.stderr and out.stderr.count("\n") == 1
    for args, says in (
        (["--minutes", "0"], "must be a positive, finite number"),
        (["--minutes", "1", "--only", "nope"], "no preset named nope"),
        (["--minutes", "1", "--per-preset", "0"], "--per-preset"),
    ):
        out = run("pretrain", "--db", db, *args)
        assert out.returncode == 2 and says in out.stderr, out.stderr
