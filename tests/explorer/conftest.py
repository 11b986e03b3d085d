"""Fixtures shared by the Tuner-level tests (``test_tuner.py``, ``test_baseline.py``)."""

from __future__ import annotations

import math

import pytest

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.storage import get_store


@pytest.fixture(scope="module")
def measurer():
    # Not about timing quality: a NOISY re-timing would un-confirm a best, and a NOISY trial is
    # never trained on (test_timing.py checks both); a busy test machine must not change that.
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002, max_spread=math.inf)) as m:
        yield m


@pytest.fixture
def store(tmp_path):
    s = get_store(tmp_path / "records.db")
    yield s
    s.close()
