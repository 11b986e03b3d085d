"""``explorer nas`` (issue 12), run as a user runs it: a real process, a real database file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.storage import RunStatus, get_store

pytest.importorskip("jax")

TINY = ["resnet18_cifar", "--width", "2", "--kinds", "keep,group", "--batch-size", "16"]


def run(*args: str, db: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "explorer", "nas", *args, "--db", str(db)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.timeout(900)
def test_a_search_stores_its_tunings_prints_the_front_and_runs_again_from_the_database(
    tmp_path,
) -> None:
    db, out = tmp_path / "records.db", tmp_path / "nas.json"
    first = run(*TINY, "--samples", "3", "--budget", "1", "--json", str(out), db=db)
    assert first.returncode == 0, first.stderr
    assert "Pareto front" in first.stdout and "  original " in first.stdout
    assert "found in the database" not in first.stderr
    data = json.loads(out.read_text())
    assert data["network"] == "resnet18_cifar(width=2)" and data["budget"] == 1
    assert [p["name"] for p in data["points"]] == [
        "original",
        *(f"candidate {i}" for i in (1, 2, 3)),
    ]
    with get_store(db) as store:
        runs = {r.id: r for r in store.runs()}
    # Every distinct convolution's tuning is a finished run of one trial in the database.
    assert sorted(runs) == sorted(t["run"] for t in data["tunings"])
    assert {r.workload.key() for r in runs.values()} == {t["workload"] for t in data["tunings"]}
    assert all(
        r.status is RunStatus.FINISHED and r.settings["max_trials"] == 1 for r in runs.values()
    )
    front = [p for p in data["points"] if p["on_front"]]
    assert front and all(p["legal"] and p["latency_secs"] for p in front)
    for p in front:
        assert f"  {p['name']} " in first.stdout
    if data["speedup"] > 1:
        assert "x faster than the original" in first.stdout
    # Again: nothing is tuned, every shape is found in the database with the same best; the
    # bests are re-timed together again (networks are compared with readings taken at once),
    # and nothing is added to the database.
    with get_store(db) as store:
        stored = store.count_trials()
    second = run(*TINY, "--samples", "3", "--budget", "1", "--json", str(out), "-q", db=db)
    assert second.returncode == 0, second.stderr
    assert "0 tuned in" in second.stdout
    again = json.loads(out.read_text())
    assert all(t["cached"] for t in again["tunings"])
    assert [t["best_secs"] for t in again["tunings"]] == [t["best_secs"] for t in data["tunings"]]
    assert all(t["paired_secs"] for t in again["tunings"])
    with get_store(db) as store:
        assert store.count_trials() == stored
        assert sorted(r.id for r in store.runs()) == sorted(runs)
    for before, after in zip(data["points"], again["points"], strict=True):
        assert (after["latency_secs"] is None) == (before["latency_secs"] is None)
    with get_store(db) as store:
        assert len(store.runs()) == len(runs)


@pytest.mark.parametrize(
    ("args", "message"),
    [
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
    ],
)
def test_bad_input_is_one_sentence_and_stores_nothing(tmp_path, args, message) -> None:
    db = tmp_path / "records.db"
    out = run(*args, db=db, timeout=120)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not db.exists()
