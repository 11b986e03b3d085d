"""Measuring on more than one machine: TVM's RPC tracker and its device servers.

* ``TrackerAddress``, ``tracker_summary``: where a tracker is and what it holds (servers by
  key, free devices, waiting requests).
* ``start_fleet``/``stop_fleet``/``read_fleet``: a tracker and device servers on this machine,
  each in its own process group (``explorer fleet up|down|status``), so that a laptop, a test
  and a tutorial run a real fleet. Servers may differ in threads, pinned cores and the CPU
  their kernels are compiled for (``ServerSpec``), which makes them different targets.
* ``fleet_status``, ``DeviceTally``: a tracker's devices by key joined with what the record
  database says each device measured (trials, trials per minute, errors): the fleet panel's view.
* ``measure_transfer``: each target's best schedule timed on every target (how much a
  schedule tuned for one target loses on another; ``explorer.analysis.TransferInfo``).
* Measuring on a fleet is ``explorer.measure.RemoteMeasurer``'s job.

TVM RPC has no authentication; everything binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

from explorer.core import (
    QueueInfo,
    ServerEntry,
    TrackerAddress,
    TrackerSummary,
    tracker_summary,
    wait_for_devices,
)
from explorer.fleet._local import (
    DEFAULT_PORT,
    LocalFleet,
    ServerSpec,
    default_servers,
    read_fleet,
    start_fleet,
    state_path,
    stop_fleet,
)
from explorer.fleet._status import (
    DEFAULT_WINDOW_SECS,
    DeviceStatus,
    DeviceTally,
    FleetStatus,
    KeyStatus,
    fleet_status,
    trial_device,
)
from explorer.fleet._targets import DeviceTargets, TargetAnswer, ask_target, devices_target
from explorer.fleet._transfer import measure_transfer

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_WINDOW_SECS",
    "DeviceStatus",
    "DeviceTargets",
    "DeviceTally",
    "FleetStatus",
    "KeyStatus",
    "LocalFleet",
    "QueueInfo",
    "ServerEntry",
    "ServerSpec",
    "TargetAnswer",
    "TrackerAddress",
    "TrackerSummary",
    "ask_target",
    "default_servers",
    "devices_target",
    "fleet_status",
    "measure_transfer",
    "read_fleet",
    "start_fleet",
    "state_path",
    "stop_fleet",
    "tracker_summary",
    "trial_device",
    "wait_for_devices",
]
