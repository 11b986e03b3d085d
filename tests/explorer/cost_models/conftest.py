"""Shared fixtures: real candidates of matmul 64^3 and recorded measurements of them."""

from __future__ import annotations

import numpy as np
import pytest
from cm_helpers import MATMUL

from explorer.space import DesignSpace, KnobSpace
from explorer.testing import recordings


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
def measured(tmp_path_factory):
    """24 trials of matmul 64^3, really measured once (the shipped recording): live timings on
    a busy 2-core machine are too noisy for assertions about what a model learns."""
    store = recordings.open_recording(tmp_path_factory.mktemp("recording"))
    return recordings.recorded_trials(store, recordings.SMALL)[:24]
