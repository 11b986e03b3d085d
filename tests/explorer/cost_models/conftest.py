"""Shared fixtures: real candidates of matmul 64^3, measured once for the whole package."""

from __future__ import annotations

import numpy as np
import pytest
from cm_helpers import MATMUL

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import TrialRecord


@pytest.fixture(scope="session")
def knob_space(cpu_target):
    return KnobSpace(DesignSpace.of(MATMUL, cpu_target))


@pytest.fixture(scope="session")
def candidates(knob_space):
    """28 distinct valid knob-space candidates of matmul 64^3."""
    rng = np.random.default_rng(7)
    out, seen = [], set()
    while len(out) < 28:
        point = knob_space.random_point(rng)
        cand = knob_space.materialize(point)
        if cand is not None and point not in seen:
            seen.add(point)
            out.append(cand)
    return out


@pytest.fixture(scope="session")
def measured(candidates):
    """The first 24 candidates, really measured (once): ``list[TrialRecord]``."""
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        results = m.measure(candidates[:24])
    return [
        TrialRecord(i, 1, i, c, r, {}, 0.0)
        for i, (c, r) in enumerate(zip(candidates[:24], results, strict=True))
    ]
