"""``explorer nas`` (issue 12) under bad input, with a real database file: every row through
``main()`` in-process, and a sample of rows as real processes (exit code and stderr).

A whole search, stored and run again from the database, is tested with its networks built
whole (test_whole_network.py): one search serves both, the suite's slowest pair of tests
when they ran it twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from explorer import cli

pytest.importorskip("jax")

TINY = ["resnet18_cifar", "--width", "2", "--kinds", "keep,group", "--batch-size", "16"]


def run(*args: str, db: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "explorer", "nas", *args, "--db", str(db)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


BAD = [
    (["resnet99"], "unknown network 'resnet99'; valid names: resnet18_cifar"),
    (["resnet18_cifr"], "did you mean 'resnet18_cifar'"),
    (["resnet18_imagenet", "--width", "8"], "--width does not apply to resnet18_imagenet"),
    ([*TINY, "--tau", "-1"], "--tau: must be a finite number above 0 (got -1)"),
    ([*TINY, "--tau", "nan"], "--tau: must be a finite number above 0 (got nan)"),
    ([*TINY, "--tau", "0"], "at 0 every candidate is legal"),
    (["resnet18_cifar", "--width", "100000"], "--width must be an integer from 1 to 512"),
    ([*TINY, "--samples", "99999999999"], "--samples must be an integer from 0 to 100000"),
    ([*TINY, "--budget", "99999999999"], "--budget: must be at most 1000000"),
    (["resnet18_cifar", "--kinds", "group,warp"], "'warp' is not a kind"),
    (["resnet18_cifar", "--kinds", "group,,depthwise"], "an empty kind in 'group,,depthwise'"),
    (["resnet18_cifar", "--kinds", ""], "expected kinds separated by commas"),
    (["resnet18_cifar", "--kinds", "keep"], "needs a transformation besides keep"),
    ([*TINY, "--tune-seed", "-2"], "--tune-seed: must be 0 or more"),
    ([*TINY, "--strategy", "randm"], "did you mean 'random'"),
    ([*TINY, "--budget", "0"], "--budget: must be at least 1"),
    (["resnet18_cifar", "--batch-size", "5000"], "the data set has 1797 digits"),
    ([*TINY, "--whole-network", "0"], "--whole-network: must be at least 1"),
    (
        [*TINY, "--whole-network", "4", "--tracker", "127.0.0.1:9"],
        "--whole-network builds and races networks on this machine, not on a fleet's",
    ),
]


def _one_sentence(stderr: str, message: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_is_one_sentence_and_stores_nothing(tmp_path, capsys, args, message) -> None:
    db = tmp_path / "records.db"
    assert cli.main(["nas", *args, "--db", str(db)]) == 2
    out, err = capsys.readouterr()
    _one_sentence(err, message)
    assert out == ""
    assert not db.exists()


# a name the registry refuses, a width the network refuses, a pairing the command refuses
@pytest.mark.parametrize(("args", "message"), [BAD[0], BAD[6], BAD[-1]])
def test_bad_input_as_a_real_process(tmp_path, args, message) -> None:
    db = tmp_path / "records.db"
    out = run(*args, db=db, timeout=120)
    assert out.returncode == 2, out.stderr
    _one_sentence(out.stderr, message)
    assert not db.exists()
