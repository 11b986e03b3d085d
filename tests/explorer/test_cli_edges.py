"""The command line at the edges of its input (issue 21): numbers far too large, an option
before the command, a device that is missing, progress where work takes long. Each case is one
sentence and the exit code the README promises, or the work shown as it happens."""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
from _terminal import EXPLORER
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import cli
from explorer.cli._args import MAX_INT, MAX_REPEAT, file_name
from explorer.errors import SettingError
from explorer.storage import get_store
from explorer.target import cuda_available
from explorer.testing import recordings
from explorer.tuner import Tuner
from explorer.types import MAX_SECS, MAX_TRIALS

SMALL = ["matmul", "-p", "M=16", "-p", "N=16", "-p", "K=16"]


def _options() -> list[tuple[str, argparse.Action]]:
    """Every option of every command (fleet's actions too) whose value is a number."""
    found = []

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{prefix} {name}".strip())
            elif action.option_strings and callable(action.type) and action.type is not str:
                found.append((f"{prefix} {max(action.option_strings, key=len)}", action))

    walk(cli._main.build_parser(), "")
    return found


NUMERIC = [(name, action) for name, action in _options() if action.type is not file_name]
BOUNDS = {
    "--trials": MAX_TRIALS,
    "--batch": MAX_TRIALS,
    "--budget": MAX_TRIALS,
    "--port": 65535,
    "--repeat": MAX_REPEAT,
    "--seconds": MAX_SECS,
    "--tau": math.inf,  # a ratio: any finite one above 0 is a line to draw
}


def test_the_numeric_options_are_found() -> None:
    names = {name for name, _ in NUMERIC}
    for expected in ("tune --trials", "tune --resume", "fleet up --port", "nas --budget"):
        assert expected in names, names


@settings(max_examples=400, deadline=None)
@given(
    option=st.sampled_from(NUMERIC),
    value=st.integers(-(10**30), 10**30).map(str)
    | st.sampled_from(["99999999999999999999", str(MAX_INT), str(MAX_INT + 1), "1e300"]),
)
def test_every_number_option_is_bounded_or_refused_in_words(option, value) -> None:
    """Seen: `--trials 99999999999999999999` started a run with an ETA of 8e16 hours, and a run
    id that large was an internal error (OverflowError) in `tune --resume` and `check --run`."""
    name, action = option
    try:
        parsed = action.type(value)
    except argparse.ArgumentTypeError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert parsed <= BOUNDS.get(name.split()[-1], MAX_INT), (name, value)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(run_id=st.integers(1, 10**25))
def test_a_run_id_of_any_size_is_not_found_or_refused(run_id, tmp_path_factory, capsys) -> None:
    db = str(tmp_path_factory.mktemp("ids") / "records.db")
    with get_store(db):
        pass  # an empty database
    for argv in (["tune", "--resume", str(run_id)], ["check", "--run", str(run_id)],
                 ["export", "--run", str(run_id), db + ".csv"]):  # fmt: skip
        assert cli.main([*argv, "--db", db]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and "internal error" not in err, err


def test_budgets_are_bounded_from_python_too(tmp_path) -> None:
    store = get_store(tmp_path / "records.db")
    folder = tmp_path / "recording"
    folder.mkdir()
    recording = recordings.open_recording(str(folder))
    try:
        tuner = Tuner(measurer=recordings.replay_measurer(recording, recordings.TINY), store=store)
        target = recordings.recorded_trials(recording, recordings.TINY)[0].candidate.target
        for kwargs, words in (
            ({"max_trials": MAX_TRIALS + 1}, f"max_trials must be at most {MAX_TRIALS}"),
            ({"max_trials": 8, "max_secs": 1e300}, f"max_secs must be at most {MAX_SECS:.0f}"),
        ):
            with pytest.raises(SettingError, match=words):
                tuner.run(recordings.TINY, target, "random", **kwargs)
        assert store.runs() == []  # refused before any run existed
    finally:
        recording.close()
        store.close()


def test_db_before_the_command_is_the_commands_db(tmp_path, capsys) -> None:
    """Seen: `explorer --db X runs` said "unknown command 'X'"."""
    db = str(tmp_path / "records.db")
    with get_store(db):
        pass
    assert cli.main(["--db", db, "runs"]) == 0
    assert f"no runs in {db}" in capsys.readouterr().out
    assert cli.main(["--db", db, "runs", "--db", db]) == 2
    assert "--db is given twice" in capsys.readouterr().err
    assert cli.main(["--db", db, "workloads"]) == 2
    assert "workloads uses no database: remove --db" in capsys.readouterr().err


@pytest.mark.skipif(cuda_available(), reason="this machine has a GPU")
def test_a_missing_gpu_is_the_environments_fault(tmp_path, capsys) -> None:
    """Seen: `--target cuda` without a GPU exited 2 (bad usage), not 3 (the environment)."""
    assert cli.main(["measure", *SMALL, "--target", "cuda", "--db", str(tmp_path / "r")]) == 3
    assert capsys.readouterr().err == "error: no CUDA device 0 on this machine\n"


def _explorer(*args: str, db) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_resuming_a_finished_run_shows_its_trials_done(tmp_path) -> None:
    """Seen: the bar of a resumed finished run read 0%."""
    db = tmp_path / "records.db"
    done = _explorer("tune", *SMALL, "--trials", "2", "--batch", "2", "-q", db=db)
    assert done.returncode == 0, done.stderr
    again = _explorer("tune", "--resume", "1", db=db)
    assert again.returncode == 0, again.stderr
    bars = re.findall(r"(\d+)%\|[^|]*\| (\d+)/2", again.stderr)
    assert bars and all(percent == "100" and n == "2" for percent, n in bars), again.stderr


def test_static_says_what_it_does_before_its_first_measurement(tmp_path) -> None:
    """Seen: `--strategy static --trials 1` showed a 0% bar for minutes (it scores about a
    thousand candidates with its model before measuring any)."""
    proc = subprocess.Popen(
        [
            *EXPLORER,  # with Ctrl-C's default action, as in a terminal
            "tune",
            *SMALL,
            "--strategy",
            "static",
            "--trials",
            "1",
            "--db",
            str(tmp_path / "records.db"),
        ],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen = bytearray()

    def read() -> None:
        assert proc.stderr is not None
        while chunk := os.read(proc.stderr.fileno(), 4096):
            seen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300
        while b"static model: scoring up to" not in seen:
            assert proc.poll() is None and time.monotonic() < deadline, seen.decode()
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(timeout=10)
    assert b"0/1" in seen  # on the bar, before the first trial
