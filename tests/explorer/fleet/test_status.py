"""fleet_status and DeviceTally: a tracker's summary joined with stored trials, no fleet needed."""

from __future__ import annotations

import math

import pytest

from explorer.fleet import (
    DeviceTally,
    QueueInfo,
    ServerEntry,
    TrackerSummary,
    fleet_status,
    trial_device,
)
from explorer.measure import Candidate, MeasureResult
from explorer.storage import NewTrial, TrialRecord, TrialRow, get_store
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

MM = get_workload("matmul", M=16, N=16, K=16)
TARGET = Target.local_cpu(num_cores=1)
A, B, C = "local@127.0.0.1:9500", "local@127.0.0.1:9501", "avx2@127.0.0.1:9502"
SUMMARY = TrackerSummary(
    servers=(
        ServerEntry("avx2", "127.0.0.1", 9502),
        ServerEntry("local", "127.0.0.1", 9500),
        ServerEntry("local", "127.0.0.1", 9501),
    ),
    queues={"local": QueueInfo(free=1, pending=0), "lonely": QueueInfo(free=0, pending=2)},
)


def row(
    id: int, device: str | None, at: float, status: MeasureStatus = MeasureStatus.OK
) -> TrialRow:
    return TrialRow(
        id=id,
        run_id=1,
        seq=id,
        status=status,
        median_secs=1e-3 if status is MeasureStatus.OK else None,
        run_secs=(1e-3,) if status is MeasureStatus.OK else (),
        predicted={},
        decisions=None,
        trace_hash=0,
        created_at=at,
        device=device,
    )


def test_a_tally_counts_each_trial_once_per_device_with_errors_and_times() -> None:
    tally = DeviceTally([row(1, A, 100.0), row(2, None, 101.0), row(3, B, 102.0)])
    assert tally.num_seen == 3 and tally.last_id == 3
    # the same rows again (a reload and a subscription both bring them): counted once
    assert tally.add([row(2, None, 101.0), row(3, B, 102.0)]) == 0
    assert tally.add([row(4, A, 160.0, MeasureStatus.WRONG_RESULT), row(5, A, 170.0)]) == 2
    assert tally.add([row(6, A, 171.0, MeasureStatus.TIMEOUT)]) == 1
    assert tally.devices() == [A, B]
    assert (tally.measured(A), tally.measured(B), tally.measured(C)) == (4, 1, 0)
    assert tally.errors(A) == {"wrong_result": 1, "timeout": 1} and tally.errors(B) == {}
    assert tally.measured_since(A, 150.0) == 3 and tally.measured_since(B, 150.0) == 0
    assert tally.last_at(A) == 171.0 and tally.last_at(C) is None
    assert tally.num_seen == 6  # the local trial too: compared with the store's count


def test_fleet_status_groups_devices_by_key_with_counts_rates_queues_and_targets() -> None:
    tally = DeviceTally(
        [
            row(1, A, 0.0),  # outside the 5-minute window ending at 1000
            row(2, A, 900.0),
            row(3, A, 950.0, MeasureStatus.RUN_ERROR),
            row(4, B, 990.0),
            row(5, "local@127.0.0.1:9400", 10.0),  # a device of an earlier fleet
            row(6, "other@10.0.0.1:9090", 10.0),  # another tracker's key: not shown
            row(7, None, 999.0),
        ]
    )
    info = fleet_status(
        "127.0.0.1:9190",
        SUMMARY,
        tally,
        now=1000.0,
        targets={"local": TARGET, "avx2": "not known yet: every device was busy"},
    )
    assert [k.key for k in info.keys] == ["avx2", "local", "lonely"]
    local = info.key("local")
    assert local is not None and local.target == TARGET and local.target_note == ""
    assert (local.free, local.pending) == (1, 0)
    a, b = local.devices
    assert (a.device, a.measured, a.num_errors, a.errors) == (A, 3, 1, (("run_error", 1),))
    assert math.isclose(a.per_minute, 2 / 5) and a.last_at == 950.0
    assert (b.device, b.measured, b.per_minute) == (B, 1, 1 / 5)
    avx2 = info.key("avx2")
    assert avx2 is not None and avx2.target is None and avx2.target_note.startswith("not known")
    assert (avx2.free, avx2.pending) == (None, None)  # nobody asked for one yet
    assert avx2.devices[0].measured == 0 and avx2.devices[0].last_at is None
    lonely = info.key("lonely")  # requests waiting for a key no server has
    assert lonely is not None and lonely.devices == () and lonely.pending == 2
    assert lonely.target_note == "not asked yet"
    assert (info.gone_devices, info.gone_measured) == (1, 1)
    assert info.device(B) == b and info.device("nope") is None
    with pytest.raises(ValueError, match="window_secs"):
        fleet_status("t", SUMMARY, tally, now=0.0, window_secs=0)


def test_a_stored_trial_names_its_device_in_records_and_rows(tmp_path) -> None:
    cand = Candidate(MM, TARGET, [[], []])
    ok = MeasureResult(MeasureStatus.OK, (1e-3,), flops=1, device=A)
    with get_store(tmp_path / "r.db") as store:
        run = store.create_run(MM, TARGET, "manual")
        records = store.add_trials(
            run.id, [NewTrial(cand, ok), NewTrial(cand, MeasureResult(MeasureStatus.OK, (1e-3,)))]
        )
        rows = store.trial_rows()
    assert [trial_device(r) for r in records] == [A, None]
    assert [trial_device(r) for r in rows] == [A, None]
    assert isinstance(records[0], TrialRecord) and isinstance(rows[0], TrialRow)
    from_records, from_rows = DeviceTally(records), DeviceTally(rows)
    assert from_records.measured(A) == from_rows.measured(A) == 1
    assert from_records.num_seen == from_rows.num_seen == 2
