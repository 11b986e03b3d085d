"""Knob values against latency, and per-knob importance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer.analysis import TrialTable, knob_effects_info, omega_squared

UNROLL = 3  # position of "categorical #0" (the unroll depth) in the matmul sketches


def unroll_latency(candidate) -> float:
    """A landscape where only the unroll knob matters."""
    return 1.0 + 2.0 * candidate.decisions["values"][UNROLL]


def test_the_knob_that_matters_ranks_first(store, add_run, candidates, space):
    lat = [unroll_latency(c) for c in candidates]
    _, records = add_run("autotvm", lat, batch=60)
    info = knob_effects_info(records, space)
    assert info.num_used == len(candidates) and info.num_failed == 0
    assert info.sketches == (0, 1, 2)  # matmul's sketches share one knob layout
    top = info.knobs[0]
    assert top.label == "categorical #0"
    assert top.importance > 0.9
    assert all(k.importance < 0.3 for k in info.knobs[1:] if not math.isnan(k.importance))
    # Shipped columns line up: each trial's code names its own unroll value.
    by_id = {r.id: r for r in records}
    for tid, code, ms in zip(info.trial_ids, top.codes, info.latency_ms, strict=True):
        value = by_id[tid].candidate.decisions["values"][UNROLL]
        assert top.value_labels[code] == str(value)
        assert ms == pytest.approx(unroll_latency(by_id[tid].candidate))
    tile = next(k for k in info.knobs if k.label == "tile #0")
    assert "×" in tile.value_labels[0]  # tiles read as factor products


def test_bare_value_decisions_are_mapped_too(store, add_run, candidates, space):
    # DesignSpace.sample (random search) records only the list of values.
    lat = [unroll_latency(c) for c in candidates]
    _, records = add_run("random", lat, decisions=lambda c: c.decisions["values"])
    info = knob_effects_info(records, space)
    assert info.num_unmapped == 0 and info.num_used == len(candidates)
    assert info.knobs[0].label == "categorical #0"


def test_failures_and_unknown_decisions_are_counted_not_drawn(store, add_run, space):
    _, ok = add_run("autotvm", [1.0, 2.0, 3.0])
    _, failed = add_run("autotvm", [None, None])
    _, manual = add_run("manual", [1.5], decisions=lambda c: None)
    info = knob_effects_info([*ok, *failed, *manual], space)
    assert info.num_trials == 6
    assert info.num_used == 3 and info.num_failed == 2 and info.num_unmapped == 1
    assert set(info.trial_ids) == {r.id for r in ok}


def test_lines_are_capped_and_the_fastest_kept(store, add_run, candidates, space):
    lat = [float(i + 1) for i in range(len(candidates))]
    _, records = add_run("autotvm", lat, batch=60)
    info = knob_effects_info(TrialTable.from_records(records), space, max_lines=10)
    assert len(info.trial_ids) == len(info.latency_ms) == 10
    assert all(len(k.codes) == 10 for k in info.knobs)
    assert min(info.latency_ms) == pytest.approx(1.0)
    assert info.num_points == 10 * (len(info.knobs) + 1)
    with pytest.raises(ValueError, match="sketch"):
        knob_effects_info(records, space, sketch=99)


def test_no_trials(space):
    info = knob_effects_info([], space)
    assert info.num_used == 0 and info.trial_ids == ()
    assert all(math.isnan(k.importance) for k in info.knobs)


def test_omega_squared():
    groups = np.repeat([0, 1, 2], 10)
    separated = np.repeat([1.0, 2.0, 3.0], 10) + np.tile(np.linspace(-0.01, 0.01, 10), 3)
    assert omega_squared(groups, separated) > 0.99
    noise = np.random.default_rng(0).normal(size=30)
    assert omega_squared(groups, noise) < 0.2
    assert math.isnan(omega_squared(np.zeros(5, dtype=int), noise[:5]))  # one group
    assert math.isnan(omega_squared(np.arange(5), noise[:5]))  # a group per trial


def test_a_remeasured_schedule_weighs_once(store, add_run, candidates, space):
    _, records = add_run("autotvm", [1.0, 2.0, 3.0, 1.1, 1.2], traces=[0, 1, 2, 0, 0])
    info = knob_effects_info(records, space)
    assert info.num_trials == 3 and info.num_remeasured == 2
    assert info.num_used == 3 and set(info.trial_ids) == {r.id for r in records[:3]}
