"""``explorer nas --whole-network`` (issue 23, NAS on real networks): the search's original and
fastest legal networks built whole from their ONNX export, each tuned as a model and raced
against ONNX Runtime, beside the search's sum of convolutions. Run as a user runs it: a real
process, a real database, real TVM builds and a real ONNX Runtime."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_cli_nas import TINY, run

from explorer.model import MAX_ERROR, ONNXRUNTIME, TUNED
from explorer.storage import get_store
from explorer.target import Target
from explorer.text import format_secs
from explorer.whole_network import model_name

pytest.importorskip("jax")
pytest.importorskip("onnxruntime")

ROW = r"^  (original|candidate \d+) .* model (\S+)$"  # a network built whole, and its model


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_original_and_the_fastest_legal_network_are_built_whole_tuned_and_raced(tmp_path):
    db = tmp_path / "records.db"
    out_json = tmp_path / "nas.json"
    args = [*TINY, "--samples", "3", "--budget", "1", "--whole-network", "4", "-q"]
    args += ["--json", str(out_json)]
    first = run(*args, db=db, timeout=1200)
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert "built whole (4 trials a network with random" in out, out
    rows = re.findall(ROW, out, re.MULTILINE)
    assert rows and rows[0][0] == "original", out
    fastest = re.search(r"fastest legal: (candidate \d+)", out)
    # the original, and the fastest legal network when a candidate beat it
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
        stored = store.count_trials()
    written = json.loads(out_json.read_text())["whole_network"]
    assert [(w["point"], w["model"], w["trials"]) for w in written] == [
        (point, name, 4) for point, name in rows
    ]
    assert all(w["tuned_secs"] and w["onnxruntime_secs"] for w in written)
    # Again: every network's model and tune are found, nothing is tuned again; each is raced
    # once more (a race is a reading of now).
    second = run(*args, db=db, timeout=1200)
    assert second.returncode == 0, second.stderr
    assert re.findall(ROW, second.stdout, re.MULTILINE) == rows, second.stdout
    with get_store(db) as store:
        assert store.count_trials() == stored
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
