"""`explorer model` from the command line: write, import, list, show, and tune a task."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from explorer.storage import get_store


def explorer(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args], capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    onnx_file, db = folder / "tiny.onnx", folder / "records.db"
    out = explorer("model", "example", "tiny", "-o", str(onnx_file))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("wrote tiny to ") and "input x 1x3x32x32" in out.stdout
    out = explorer("model", "import", str(onnx_file), "--db", str(db))
    assert out.returncode == 0, out.stdout + out.stderr
    return onnx_file, db, out


def test_import_prints_the_tasks_costliest_first(imported):
    _, db, out = imported
    lines = out.stdout.splitlines()
    assert lines[0].startswith("model 1: tiny, 6 tasks, untuned "), out.stdout
    tasks = [ln for ln in lines[1:] if ln.startswith("  ")]  # a busy machine's note follows
    shares = [float(ln.split("%")[0]) for ln in tasks]
    assert len(tasks) == 6 and lines[1:7] == tasks, out.stdout
    assert shares == sorted(shares, reverse=True) and 99 <= sum(shares) <= 101, out.stdout
    assert "tiny:fused_conv2d1_add_add1_relu" in tasks[0], out.stdout  # the 16-channel conv
    assert "timing 6 tasks unscheduled..." in out.stderr


def test_list_and_show_read_what_was_stored(imported):
    _, db, first = imported
    out = explorer("model", "list", "--db", str(db))
    assert out.returncode == 0 and out.stdout.startswith("1  tiny  6 tasks, untuned "), out.stdout
    out = explorer("model", "show", "tiny", "--db", str(db))
    assert out.returncode == 0 and out.stdout == first.stdout
    out = explorer("model", "show", "resnet", "--db", str(db))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "no model 'resnet'" in out.stderr and "models: tiny" in out.stderr
    assert "did you mean" not in out.stderr  # nothing close
    # a slip of the keyboard is named with the README's "did you mean"
    out = explorer("model", "show", "tini", "--db", str(db))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.rstrip().endswith("did you mean 'tiny'?"), out.stderr


def test_importing_again_says_the_model_is_stored_without_converting_it(imported):
    onnx_file, db, first = imported
    out = explorer("model", "import", str(onnx_file), "--db", str(db))
    assert out.returncode == 0 and out.stdout == first.stdout, out.stdout + out.stderr
    assert out.stderr == "tiny is already stored (the same file, the same input sizes)\n"


def test_a_tune_or_race_on_a_mistyped_database_creates_nothing(imported, tmp_path):
    typo = tmp_path / "typo" / "records.db"
    for args in (["tune", "tiny", "--trials", "4"], ["race", "tiny"]):
        out = explorer("model", *args, "--db", str(typo))
        assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
        assert f"no record database at {typo}" in out.stderr, out.stderr
        assert not typo.parent.exists()


def test_a_task_tunes_as_model_colon_task(imported):
    _, db, _ = imported
    out = explorer(
        "tune", "tiny:fused_conv2d1_add_add1_relu", "--strategy", "random", "--trials", "4",
        "--db", str(db), "-q",
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "best: trial" in out.stdout and "faster than unscheduled" in out.stdout, out.stdout
    with get_store(db, read_only=True) as store:
        (run,) = store.runs()
        task = store.get_model("tiny").task("fused_conv2d1_add_add1_relu")
        assert run.workload == task.workload
    out = explorer("show", "tiny:mean", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("workload: task(name=mean,tir=sha256:"), out.stdout
    assert "output:   T_divide [1, 1, 1, 16] float32" in out.stdout
    out = explorer("tune", "tiny:no_such_task", "--trials", "4", "--db", str(db))
    assert out.returncode == 2 and "has no task 'no_such_task'" in out.stderr, out.stderr
    out = explorer("tune", "tiny:mean", "-p", "M=4", "--trials", "4", "--db", str(db))
    assert out.returncode == 2 and "its model fixes it" in out.stderr, out.stderr


def test_tune_then_race_from_the_command_line(imported):
    _, db, _ = imported
    out = explorer(
        "model", "tune", "tiny", "--trials", "10", "--strategy", "random", "--chunk", "6",
        "--rounds", "1", "--db", str(db),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    # first chunks of 4 (10 trials hold two of them), the costliest task first
    assert lines[0].startswith("[4/10] fused_conv2d1_add_add1_relu: best "), out.stdout
    assert lines[1].startswith("[8/10] "), out.stdout
    assert "tune random/seed0/gradient: 10 trials in all" in lines, out.stdout
    # each chunk is told as it starts, on stderr
    assert "tuning fused_conv2d1_add_add1_relu (4 trials; 0 of 10 spent)..." in out.stderr
    race = lines[lines.index("tune random/seed0/gradient: 10 trials in all") + 1 :]
    assert race[0].startswith("race 1 on ") and "10 trials spent" in race[0], out.stdout
    assert [ln.split()[0] for ln in race[1:4]] == ["untuned", "tuned", "onnxruntime"]
    assert "output within" in race[2] and race[4].startswith("tuned / ONNX Runtime: ")
    out = explorer("model", "show", "tiny", "--db", str(db))
    assert "tune random/seed0/gradient: 10 trials" in out.stdout and "race 1 on " in out.stdout
    out = explorer("model", "race", "tiny", "--tune", "nope", "--db", str(db))
    assert out.returncode == 2 and "has no tune 'nope'" in out.stderr, out.stderr
    # --trials is the tune's total: the same budget again tunes nothing, and says so
    out = explorer(
        "model", "tune", "tiny", "--trials", "10", "--strategy", "random", "--no-race",
        "--db", str(db),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "has spent 10 trials already and --trials is its total: nothing to tune" in out.stderr
    assert out.stdout.splitlines() == ["tune random/seed0/gradient: 10 trials in all"]


def test_a_tune_stopped_by_sigterm_says_how_to_go_on_and_the_same_command_does(imported):
    """A new user stopped `explorer model tune` (exit 143, "every stored trial is kept") and
    was not told how to go on, as `explorer tune` tells its --resume."""
    _, db, _ = imported
    argv = [sys.executable, "-m", "explorer", "model", "tune", "tiny", "--trials", "8"]
    argv += ["--strategy", "random", "--seed", "5", "--chunk", "4", "--no-race", "--db", str(db)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the first chunk's line: a trial is stored
    assert first.startswith("[4/8] "), first
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (proc.returncode, out, err)
    assert "Traceback" not in err, err
    said = "interrupted; tune random/seed5/gradient keeps every stored trial: run the same "
    assert said + "command again to go on from there" in err, err
    again = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines()[-1] == "tune random/seed5/gradient: 8 trials in all"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["model", "import", "{bad}"], "is not an ONNX model"),
        (["model", "import", "{bad}", "--input", "x=1x0"], "every dimension must be in"),
        (["model", "import", "{bad}", "--input", "x"], "must be NAME=DIMxDIMx"),
        (["model", "import", "{dir}"], "is a folder: give the path of an ONNX file in it"),
        (["model", "example", "resnet19", "-o", "{bad}"], "resnet18"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(args, message, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a network")
    db = tmp_path / "records.db"
    db_args = ["--db", str(db)] if args[1] == "import" else []
    args = [a.replace("{bad}", str(bad)).replace("{dir}", str(tmp_path)) for a in args]
    out = explorer(*args, *db_args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and out.stderr.count("\n") == 1, out.stderr
    assert not db.exists() or get_store(db, read_only=True).models() == []
