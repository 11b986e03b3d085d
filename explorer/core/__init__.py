"""The ground floor: the values and protocols every layer shares, and the machinery below them.

Nothing here imports another ``explorer`` package but the leaves (``target``, ``types``,
``workloads``, ``errors``, ``_process``, ``_tvm``), so every package can build on it and none
reaches down into another's private modules for a value type:

* ``Candidate`` and ``MeasureResult``: what is measured and what comes back;
  ``MeasuresCandidates``, what code below the measurers needs of one; ``trace_key``,
  ``fastest_round``;
* the record types and the ``RecordStore`` contract (``TrialRecord``, ``NewTrial``,
  ``RunInfo``, ``TrialRow``, ...) and the marks a trial's decisions carry (start, baseline);
* ``ModelRecord``, ``ModelTask``, ``ModelInput``: an imported model as the store keeps it;
* ``factorizations``, ``divisors``: the perfect tilings of a loop, and its factors;
* the worker-process pool (``_pool``), the timing gate (``_gate``), ``leave_session`` (a
  process that times kernels takes a scheduling group of its own) and the RPC tracker's
  client (``_tracker``: ``TrackerAddress``, ``QueueTimeout``, ...), which measurers, trace
  checks, cost models and the fleet all use.
"""

from __future__ import annotations

from explorer.core._candidate import (
    Candidate,
    MeasureResult,
    MeasuresCandidates,
    fastest_round,
    pool_results,
    trace_key,
)
from explorer.core._forkserver import server_pids
from explorer.core._gate import TIMING_GATE, cpu_heavy
from explorer.core._interrupts import interrupts_held
from explorer.core._marks import BASELINE_MARK, START_MARK, UNCHECKED_MSG, has_mark
from explorer.core._models import ModelInput, ModelRace, ModelRecord, ModelTask, RaceEntry
from explorer.core._pool import Worker, WorkerLost, WorkerPool, shutdown_pool
from explorer.core._protocol import read_message, write_message
from explorer.core._records import (
    MANUAL,
    BestSoFar,
    NewTrial,
    Rank,
    RecordStore,
    RunInfo,
    RunStatus,
    TrialRecord,
    TrialRow,
    effective_status,
    text_hash,
    trace_hash,
)
from explorer.core._sched import leave_session
from explorer.core._tiles import divisors, factorizations
from explorer.core._tracker import (
    DEVICE_INFO_FUNC,
    PIN_LAUNCHER_FUNC,
    NoDevice,
    QueueInfo,
    QueueTimeout,
    ServerEntry,
    TrackerAddress,
    TrackerSummary,
    device_info,
    keep_launcher_off_workers,
    open_session,
    tracker_summary,
    wait_for_devices,
)

__all__ = [
    "BASELINE_MARK",
    "DEVICE_INFO_FUNC",
    "PIN_LAUNCHER_FUNC",
    "MANUAL",
    "START_MARK",
    "TIMING_GATE",
    "UNCHECKED_MSG",
    "BestSoFar",
    "Candidate",
    "MeasureResult",
    "MeasuresCandidates",
    "ModelInput",
    "ModelRace",
    "ModelRecord",
    "ModelTask",
    "NewTrial",
    "NoDevice",
    "QueueInfo",
    "QueueTimeout",
    "RaceEntry",
    "Rank",
    "RecordStore",
    "RunInfo",
    "RunStatus",
    "ServerEntry",
    "TrackerAddress",
    "TrackerSummary",
    "TrialRecord",
    "TrialRow",
    "Worker",
    "WorkerLost",
    "WorkerPool",
    "cpu_heavy",
    "device_info",
    "divisors",
    "effective_status",
    "factorizations",
    "fastest_round",
    "has_mark",
    "interrupts_held",
    "keep_launcher_off_workers",
    "leave_session",
    "open_session",
    "pool_results",
    "read_message",
    "server_pids",
    "shutdown_pool",
    "text_hash",
    "trace_hash",
    "trace_key",
    "tracker_summary",
    "wait_for_devices",
    "write_message",
]
