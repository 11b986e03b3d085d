"""Feature rows: fixed width, cached PerStore extraction, knob rows straight from points."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.cost_models import FeatureExtractor, KnobTable, _features
from explorer.measure import Candidate
from explorer.space import DesignSpace, KnobSpace
from explorer.workloads import get_workload


def test_perstore_rows_are_pooled_finite_and_cached(candidates, monkeypatch):
    calls = []
    real = _features._extract_perstore
    monkeypatch.setattr(
        _features, "_extract_perstore", lambda f, cs: calls.append(len(cs)) or real(f, cs)
    )
    fx = FeatureExtractor("perstore")
    x = fx(candidates[:6])
    assert x.shape == (6, _features.PERSTORE_DIM) and x.dtype == np.float64
    assert np.isfinite(x).all() and np.abs(x).sum() > 0
    again = fx(candidates[:8])  # six cached, two new: one extraction call of two
    assert calls == [6, 2]
    np.testing.assert_array_equal(again[:6], x)


def test_a_trace_that_does_not_replay_gets_zeros(candidates):
    good = candidates[0]
    broken = Candidate(good.workload, good.target, [[["NoSuchInstruction", [], [], []]], []])
    x = FeatureExtractor("perstore")([broken, good])
    assert not x[0].any() and x[1].any()


def test_knob_table_rows_equal_the_rows_of_materialized_candidates(cpu_target):
    # softmax: 9 sketches with 4, 6 or 8 knobs, compute-location knobs included
    space = KnobSpace(DesignSpace.of(get_workload("softmax", M=4, N=8), cpu_target))
    table = KnobTable(space)
    rng = np.random.default_rng(0)
    points = [space.random_point(rng) for _ in range(12)]
    cands = [space.materialize(p) for p in points]
    keep = [i for i, c in enumerate(cands) if c is not None]
    assert len(keep) >= 6
    sk = np.array([points[i].sketch for i in keep])
    idx = np.zeros((len(keep), 8), dtype=np.int64)
    for r, i in enumerate(keep):
        idx[r, : len(points[i].indices)] = points[i].indices
    from_table = table.rows(sk, idx)
    from_cands = FeatureExtractor("knob")([cands[i] for i in keep])
    width = max(from_table.shape[1], from_cands.shape[1])
    np.testing.assert_array_equal(
        _features.fit_width(from_table, width), _features.fit_width(from_cands, width)
    )


def test_knob_rows_log2_the_tile_factors():
    row = _features.knob_row(2, [[1, 4, 8], 3])
    np.testing.assert_array_equal(row, [2.0, 0.0, 2.0, 3.0, 3.0])
    with pytest.raises(ValueError, match="features must be"):
        FeatureExtractor("itervar")


def test_knob_features_read_off_space_decisions_without_a_sketch(candidates):
    """Evolutionary's mutations can leave the knob space: decisions then have no sketch."""
    c = candidates[0]
    off = Candidate(c.workload, c.target, c.trace, {**c.decisions, "sketch": None})
    assert _features._knob_inputs(off) == (-1, c.decisions["values"])
