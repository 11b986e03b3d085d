"""The transfer view: each target's best schedule measured on every target of a real fleet."""

from __future__ import annotations

import math

import pytest

from explorer.analysis import TransferCell, transfer_info
from explorer.fleet import ServerSpec, measure_transfer, start_fleet, stop_fleet
from explorer.measure import MeasureConfig, MeasureResult, RemoteMeasurer
from explorer.plots import make_transfer_figure
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.testing.ports import free_port
from explorer.tuner import Tuner
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

CONFIG = MeasureConfig(repeat=3, min_repeat_secs=0.005, max_spread=math.inf)


def ok(secs: float) -> MeasureResult:
    return MeasureResult(MeasureStatus.OK, run_secs=(secs,) * 3)


def test_slowdown_is_over_the_column_targets_own_best() -> None:
    cells = [
        TransferCell("a", "a", ok(1.0)),
        TransferCell("a", "b", ok(3.0)),
        TransferCell("b", "a", ok(2.0)),
        TransferCell("b", "b", ok(1.5)),
    ]
    info = transfer_info("w", cells)
    assert info.targets == ("a", "b")
    assert info.matrix() == [[1.0, 2.0], [2.0, 1.0]]
    failed = MeasureResult(MeasureStatus.RUN_ERROR, error_msg="gone")
    broken = transfer_info("w", [*cells[:3], TransferCell("b", "b", failed)])
    assert math.isnan(broken.slowdown("a", "b")) and math.isnan(broken.slowdown("b", "b"))
    with pytest.raises(ValueError, match="two measurements of a's best on a"):
        transfer_info("w", [cells[0], cells[0]])


def test_two_targets_tuned_through_a_fleet_then_crossed(tmp_path) -> None:
    state = tmp_path / "fleet.json"
    fleet = start_fleet(
        [ServerSpec("native", 1, (0,)), ServerSpec("avx2", 1, (1,), "x86-64-v3")],
        state=state,
        port=free_port(),
    )
    try:
        store = get_store(str(tmp_path / "records.db"))
        mm = get_workload("matmul", M=128, N=128, K=128)
        targets = []
        for key in ("native", "avx2"):
            measurer = RemoteMeasurer(fleet.tracker, key, CONFIG)
            target = measurer.device_target()
            result = Tuner(measurer=measurer, store=store, batch_size=4).run(
                mm, target, make_strategy("random"), max_trials=4, seed=0
            )
            assert result.best is not None
            targets.append((target, measurer))
        assert targets[1][0].mcpu == "x86-64-v3" and targets[0][0].mcpu != "x86-64-v3"
        info = measure_transfer(store, mm, targets, rounds=2)
        for measurer in (m for _, m in targets):
            measurer.close()
    finally:
        stop_fleet(state)
    keys = [t.key() for t, _ in targets]
    assert info.targets == tuple(keys)
    assert all(c.result.is_ok for c in info.cells), [c.result.error_msg for c in info.cells]
    assert [info.slowdown(k, k) for k in keys] == [1.0, 1.0]
    # each cell ran on a device of its column's key
    for c in info.cells:
        assert c.result.device.startswith("avx2@" if "x86-64-v3" in c.measured_on else "native@")
    fig = make_transfer_figure(info)
    assert list(fig.data[0].x) == keys and fig.data[0].z[0][0] == 1.0
    with pytest.raises(ValueError, match="at least two targets"):
        measure_transfer(store, mm, targets[:1])
