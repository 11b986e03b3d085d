"""Both registered measurers pass the shipped MeasurerContract."""

from __future__ import annotations

import math

from explorer.measure import MEASURERS, LocalMeasurer, MeasureConfig
from explorer.testing import recordings
from explorer.testing.contracts import MeasurerContract


def test_every_registered_measurer_has_a_contract_test():
    # "remote" needs a real fleet: tests/explorer/fleet/test_remote_measurer.py::TestRemote
    assert set(MEASURERS) == {"local", "remote", "replay"}


class TestLocal(MeasurerContract):
    def make_measurer(self):
        # The contract is about results, not timing quality: on the shared test machine 2 ms
        # repeats often spread wide, which would make a correct kernel NOISY (test_timing.py).
        return LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002, max_spread=math.inf))


class TestReplay(MeasurerContract):
    def make_measurer(self):
        store = recordings.open_recording()  # removed when the test process exits
        return recordings.replay_measurer(store, recordings.TINY)
