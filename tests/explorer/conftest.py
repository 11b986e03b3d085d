"""Fixtures shared by the Tuner-level tests (``test_tuner.py``, ``test_baseline.py``)."""

from __future__ import annotations

import pytest

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.storage import get_store


@pytest.fixture(scope="module")
def measurer():
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        yield m


@pytest.fixture
def store(tmp_path):
    s = get_store(tmp_path / "records.db")
    yield s
    s.close()
