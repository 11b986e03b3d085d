"""Both registered measurers pass the shipped MeasurerContract."""

from __future__ import annotations

from explorer.measure import MEASURERS, LocalMeasurer, MeasureConfig
from explorer.testing import recordings
from explorer.testing.contracts import MeasurerContract


def test_every_registered_measurer_has_a_contract_test():
    # "remote" needs a real fleet: tests/explorer/fleet/test_remote_measurer.py::TestRemote
    assert set(MEASURERS) == {"local", "remote", "replay"}


class TestLocal(MeasurerContract):
    def make_measurer(self):
        return LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002))


class TestReplay(MeasurerContract):
    runs_kernels = False

    def make_measurer(self):
        store = recordings.open_recording()  # removed when the test process exits
        return recordings.replay_measurer(store, recordings.TINY)
