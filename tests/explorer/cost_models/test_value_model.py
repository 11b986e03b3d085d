"""The value model: exact prefix targets, store fitting, contract, save/load."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer.cost_models import COST_MODELS, make_cost_model
from explorer.cost_models._value import (
    FAILED_VALUE,
    ValueModel,
    ValueSample,
    encode,
    knob_space,
    prefix_targets,
)
from explorer.measure import MeasureResult
from explorer.storage import NewTrial, get_store
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

MM64 = get_workload("matmul", M=64, N=64, K=64)
MM32 = get_workload("matmul", M=32, N=32, K=32)


def test_prefix_targets_are_the_best_completion_normalised_per_workload(cpu_target):
    t = cpu_target
    a, b = [2, 2, 4, 4], [4, 1, 4, 4]
    samples = [
        ValueSample(MM64, t, 0, (a, [1, 1, 1, 64], [8, 8], 0), 100.0),
        ValueSample(MM64, t, 0, (a, [1, 1, 1, 64], [8, 8], 1), 50.0),
        ValueSample(MM64, t, 0, (b, [1, 1, 1, 64], [8, 8], 0), 25.0),
        ValueSample(MM64, t, 1, (b, [1, 1, 1, 64], [8, 8], 0), 0.0),  # failed
        ValueSample(MM32, t, 0, (a, [1, 1, 1, 32], [8, 4], 0), 7.0),  # its own best: 0
    ]
    got = prefix_targets(samples)
    w64, w32 = f"{MM64.key()}@{t.key()}", f"{MM32.key()}@{t.key()}"
    assert got[(w64, 0, "[]")] == 0.0
    assert got[(w64, 0, f"[{a}]".replace("'", ""))] == 0.0
    assert got[(w64, 0, "[[4, 1, 4, 4]]")] == pytest.approx(math.log(0.25))
    assert got[(w64, 0, "[[2, 2, 4, 4], [1, 1, 1, 64], [8, 8], 1]")] == pytest.approx(
        math.log(0.5)
    )
    assert got[(w64, 1, "[]")] == FAILED_VALUE
    assert got[(w32, 0, "[]")] == 0.0
    assert len(got) == 5 + 1 + 4 + 5 + 5  # shared prefixes counted once


def test_encoding_masks_undecided_knobs(cpu_target):
    ks = knob_space(MM64, cpu_target)
    root = encode(ks, 0, [])
    one = encode(ks, 0, [ks.domains[0][0].values[0]])
    assert root.shape == one.shape and not np.array_equal(root, one)
    assert encode(ks, 0, []).tolist() == root.tolist()


def test_fit_from_store_predict_and_save_load(cpu_target, tmp_path):
    ks = knob_space(MM64, cpu_target)
    store = get_store(":memory:")
    run = store.create_run(MM64, cpu_target, "random")
    rng = np.random.default_rng(0)
    trials = []
    for _ in range(12):
        c = ks.materialize(ks.random_point(rng))
        secs = 1e-4 * (1 + abs(math.log2(c.decisions["values"][1][-1]) - 4))
        trials.append(NewTrial(c, MeasureResult(MeasureStatus.OK, run_secs=(secs,))))
    store.add_trials(run.id, trials)
    model = ValueModel(num_rounds=30).fit_from_store(store, target=cpu_target)
    assert len(model.samples_) == 12
    cands = [t.candidate for t in trials[:4]]
    a = model.predict(cands)
    assert a.dtype == np.float64 and a.shape == (4,) and np.all(np.isfinite(a))
    assert np.array_equal(a, ValueModel(num_rounds=30).fit_from_store(store).predict(cands))
    path = str(tmp_path / "value.json")
    model.save(path)
    loaded = ValueModel()
    loaded.load(path)
    assert np.array_equal(loaded.predict(cands), a) and len(loaded.samples_) == 12
    assert np.all(ValueModel().predict(cands) == 0.0)  # untrained: finite, all alike
    assert isinstance(make_cost_model("value"), ValueModel) and "value" in COST_MODELS


def test_locate_reads_every_decision_form_the_strategies_store(cpu_target):
    from explorer.cost_models._value import locate
    from explorer.measure import Candidate
    from explorer.space import DesignSpace, KnobSpace

    space = KnobSpace(DesignSpace.of(get_workload("matmul", M=32, N=32, K=32), cpu_target))
    cand = space.materialize(space.random_point(np.random.default_rng(1)))
    sketch, values = locate(space, cand)  # KnobSpace form: {"sketch", "point", "values"}
    assert sketch == cand.decisions["sketch"]
    # evolutionary's form for a trace it could not map to a point: no sketch, values only
    bare = Candidate(
        cand.workload,
        cand.target,
        cand.trace,
        {"sketch": None, "values": cand.decisions["values"]},
    )
    assert locate(space, bare)[1] == values
    # random search's form: the plain list of values
    plain = Candidate(cand.workload, cand.target, cand.trace, list(cand.decisions["values"]))
    assert locate(space, plain)[1] == values
    # a hand-written schedule carries no decisions at all
    assert locate(space, Candidate(cand.workload, cand.target, cand.trace, None)) is None
