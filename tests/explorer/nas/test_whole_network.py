"""``explorer nas --whole-network`` (issue 23, NAS on real networks): the search's original and
fastest legal networks built whole from their ONNX export, each tuned as a model and raced
against ONNX Runtime, beside the search's sum of convolutions. The same search also carries
``explorer nas``'s own checks (issue 12): its tunings stored, its front printed, and a second
run served from the database. Run as a user runs it: a real process, a real database, real
TVM builds and a real ONNX Runtime."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_cli_nas import TINY, run

from explorer.model import MAX_ERROR, ONNXRUNTIME, TUNED
from explorer.storage import RunStatus, get_store
from explorer.target import Target
from explorer.text import format_secs
from explorer.whole_network import model_name
from explorer.workloads import TASK

pytest.importorskip("jax")
pytest.importorskip("onnxruntime")

ROW = r"^  (original|candidate \d+) .* model (\S+)$"  # a network built whole, and its model


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_search_stores_its_tunings_builds_its_networks_whole_and_runs_again_from_the_database(
    tmp_path,
):
    db = tmp_path / "records.db"
    out_json = tmp_path / "nas.json"
    args = [*TINY, "--samples", "3", "--budget", "1", "--whole-network", "4"]
    args += ["--json", str(out_json)]
    first = run(*args, db=db, timeout=1200)
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert "Pareto front" in out and "  original " in out
    assert "found in the database" not in first.stderr
    data = json.loads(out_json.read_text())
    assert data["network"] == "resnet18_cifar(width=2)" and data["budget"] == 1
    assert [p["name"] for p in data["points"]] == [
        "original",
        *(f"candidate {i}" for i in (1, 2, 3)),
    ]
    with get_store(db) as store:
        runs = {r.id: r for r in store.runs() if r.workload.family != TASK}  # not the models'
    # Every distinct convolution's tuning is a finished run of one trial in the database.
    assert sorted(runs) == sorted(t["run"] for t in data["tunings"])
    assert {r.workload.key() for r in runs.values()} == {t["workload"] for t in data["tunings"]}
    assert all(
        r.status is RunStatus.FINISHED and r.settings["max_trials"] == 1 for r in runs.values()
    )
    front = [p for p in data["points"] if p["on_front"]]
    assert front and all(p["legal"] and p["latency_secs"] for p in front)
    for p in front:
        assert f"  {p['name']} " in out
    if data["speedup"] > 1:
        assert "x faster than the original" in out

    # The original, and the fastest legal network when a candidate beat it, built whole.
    assert "built whole (4 trials a network with random" in out, out
    rows = re.findall(ROW, out, re.MULTILINE)
    assert rows and rows[0][0] == "original", out
    fastest = re.search(r"fastest legal: (candidate \d+)", out)
    assert [name for name, _ in rows] == ["original", *([fastest.group(1)] if fastest else [])]
    with get_store(db) as store:
        for point, name in rows:
            model = store.get_model(name)
            assert model.name.startswith("nas.resnet18cifarwidth2.")
            (race,) = store.model_races(model.id)
            assert race.trials == 4  # the budget, spent in full on this network's tasks
            tuned, ort = race.entry(TUNED), race.entry(ONNXRUNTIME)
            assert tuned is not None and tuned.error is None, (point, tuned)
            assert tuned.max_error is not None and tuned.max_error <= MAX_ERROR
            assert ort is not None and ort.error is None and ort.fastest_secs
            # the printed row is the stored race's reading
            row = next(line for line in out.splitlines() if line.endswith(f"model {name}"))
            assert f"tuned {format_secs(tuned.fastest_secs)}" in row, row
            assert f"ONNX Runtime {format_secs(ort.fastest_secs)}" in row, row
            assert "sum of convolutions " in row
        stored, all_runs = store.count_trials(), sorted(r.id for r in store.runs())
    written = data["whole_network"]
    assert [(w["point"], w["model"], w["trials"]) for w in written] == [
        (point, name, 4) for point, name in rows
    ]
    assert all(w["tuned_secs"] and w["onnxruntime_secs"] for w in written)

    # Again: no convolution is tuned, every shape is found in the database with the same best;
    # the bests are re-timed together again (networks are compared with readings taken at
    # once). Every network's model and tune are found, nothing is tuned again; each is raced
    # once more (a race is a reading of now). Nothing is added to the database but the races.
    second = run(*args, "-q", db=db, timeout=1200)
    assert second.returncode == 0, second.stderr
    assert "0 tuned in" in second.stdout
    again = json.loads(out_json.read_text())
    assert all(t["cached"] for t in again["tunings"])
    assert [t["best_secs"] for t in again["tunings"]] == [t["best_secs"] for t in data["tunings"]]
    assert all(t["paired_secs"] for t in again["tunings"])
    for before, after in zip(data["points"], again["points"], strict=True):
        assert (after["latency_secs"] is None) == (before["latency_secs"] is None)
    assert re.findall(ROW, second.stdout, re.MULTILINE) == rows, second.stdout
    with get_store(db) as store:
        assert store.count_trials() == stored
        assert sorted(r.id for r in store.runs()) == all_runs
        assert len(store.models()) == len(rows)
        assert all(len(store.model_races(m.id)) == 2 for m in store.models())


@given(st.text(), st.text(), st.binary(max_size=64))
def test_a_built_network_s_model_name_is_one_a_model_may_have(network, point, source):
    """Whatever the network and point are called, the name passes ``import_model``'s rule and
    says which file it was: another file, or another target, gets another name."""
    target = Target.local_cpu(num_cores=2)
    name = model_name(network, point, source, target)
    assert re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name), name
    assert model_name(network, point, source, target) == name
    assert model_name(network, point, source + b"x", target) != name
    assert model_name(network, point, source, Target.local_cpu(num_cores=1)) != name
