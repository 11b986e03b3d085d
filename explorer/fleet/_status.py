"""What a fleet is doing: its tracker's devices by key, with what the record database says each
device measured (``FleetStatus``, what the notebook's fleet panel shows).

Two inputs, both plain data: the tracker's ``TrackerSummary`` (devices, free ones, waiting
requests) and the stored trials, whose ``result.device`` names the device that measured them
(``key@host:port``; ``None`` for a local measurement). ``DeviceTally`` keeps the per-device
counts of the trials seen so far and takes more batch by batch (a store subscription's), so a
live view never re-reads the whole database; ``fleet_status`` joins the two at a given time.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from explorer.core import TrackerSummary
from explorer.machine import MachinePeak
from explorer.target import Target
from explorer.types import MeasureStatus

if TYPE_CHECKING:  # explorer.storage imports the measurers, which import explorer.fleet
    from explorer.storage import TrialRecord, TrialRow

DEFAULT_WINDOW_SECS = 300.0
"""The window of "trials per minute": the last five minutes."""


def trial_device(trial: TrialRecord | TrialRow) -> str | None:
    """The device that measured a stored trial (``None``: measured on this machine)."""
    result = getattr(trial, "result", None)  # a TrialRecord; a TrialRow has the column itself
    return result.device if result is not None else getattr(trial, "device", None)


@dataclass
class _Counts:
    measured: int = 0
    errors: dict[str, int] = field(default_factory=dict)  # status value -> count
    times: list[float] = field(default_factory=list)  # created_at, sorted


class DeviceTally:
    """Per-device counts of stored trials: how many each device measured, when, and how many
    did not end ``OK``.

    ``add`` takes trials (``TrialRecord``\\ s or ``TrialRow``\\ s) in id order and skips those at
    or below the highest id it has seen, so the same batch reaching it twice (a reload and a
    subscription) is counted once. ``num_seen`` counts every trial taken, local ones included:
    compared with ``RecordStore.count_trials()`` it tells whether another process stored trials
    this tally never saw (then build a new one from ``trial_rows``).

    Example:
        >>> tally = DeviceTally()
        >>> tally.num_seen, tally.devices()
        (0, [])
    """

    def __init__(self, trials: Iterable[TrialRecord | TrialRow] = ()) -> None:
        self._counts: dict[str, _Counts] = {}
        self.last_id = 0
        self.num_seen = 0
        self.add(trials)

    def add(self, trials: Iterable[TrialRecord | TrialRow]) -> int:
        """Count ``trials`` not seen yet; returns how many were new."""
        new = 0
        for trial in trials:
            if trial.id <= self.last_id:
                continue
            self.last_id = trial.id
            self.num_seen += 1
            new += 1
            device = trial_device(trial)
            if device is None:
                continue
            counts = self._counts.setdefault(device, _Counts())
            counts.measured += 1
            if trial.status is not MeasureStatus.OK:
                name = trial.status.value
                counts.errors[name] = counts.errors.get(name, 0) + 1
            bisect.insort(counts.times, trial.created_at)
        return new

    def devices(self) -> list[str]:
        """Every device that measured a trial, sorted."""
        return sorted(self._counts)

    def measured(self, device: str) -> int:
        counts = self._counts.get(device)
        return 0 if counts is None else counts.measured

    def errors(self, device: str) -> dict[str, int]:
        """Its trials that did not end ``OK``, by status value."""
        counts = self._counts.get(device)
        return {} if counts is None else dict(counts.errors)

    def measured_since(self, device: str, since: float) -> int:
        """Its trials stored at ``since`` (unix seconds) or later."""
        counts = self._counts.get(device)
        if counts is None:
            return 0
        return len(counts.times) - bisect.bisect_left(counts.times, since)

    def last_at(self, device: str) -> float | None:
        counts = self._counts.get(device)
        return counts.times[-1] if counts is not None and counts.times else None


@dataclass(frozen=True, slots=True)
class DeviceStatus:
    """One registered device and what the database says it measured.

    Attributes:
        device: its name in records, ``key@host:port``.
        measured: trials it measured (re-timings and baselines included: each ran on it).
        per_minute: its trials per minute over the window (``FleetStatus.window_secs``).
        errors: its trials that did not end ``OK``, as ``(status, count)`` pairs, most first.
        last_at: when its last trial was stored (unix seconds), ``None`` before the first.
    """

    device: str
    key: str
    host: str
    port: int
    measured: int = 0
    per_minute: float = 0.0
    errors: tuple[tuple[str, int], ...] = ()
    last_at: float | None = None

    @property
    def num_errors(self) -> int:
        return sum(n for _, n in self.errors)


@dataclass(frozen=True, slots=True)
class KeyStatus:
    """The devices registered under one key, the tracker's queue for it and its target.

    Attributes:
        free: devices of the key the tracker can hand out now; ``None`` before anybody asked
            for one (the tracker keeps no queue for the key yet).
        pending: requests waiting for a device of the key (``None`` likewise).
        target: what its devices measure for, as one of them reported it; ``None`` when not
            known (yet): ``target_note`` says why.
        peak: its devices' measured peak, when one is kept (``explorer peak --tracker``).
    """

    key: str
    devices: tuple[DeviceStatus, ...]
    free: int | None
    pending: int | None
    target: Target | None = None
    target_note: str = ""
    peak: MachinePeak | None = None


@dataclass(frozen=True, slots=True)
class FleetStatus:
    """A tracker's devices by key, with their trials (``fleet_status``).

    Attributes:
        tracker: the tracker's ``HOST:PORT``.
        keys: one entry per key, sorted by key.
        window_secs: the window of ``DeviceStatus.per_minute``.
        gone_devices: devices of these keys that measured stored trials but are not registered
            now (a server stopped, or a fleet started again on other ports).
        gone_measured: the trials those measured.
    """

    tracker: str
    keys: tuple[KeyStatus, ...]
    window_secs: float = DEFAULT_WINDOW_SECS
    gone_devices: int = 0
    gone_measured: int = 0

    @property
    def devices(self) -> tuple[DeviceStatus, ...]:
        return tuple(d for k in self.keys for d in k.devices)

    def device(self, name: str) -> DeviceStatus | None:
        for d in self.devices:
            if d.device == name:
                return d
        return None

    def key(self, name: str) -> KeyStatus | None:
        for k in self.keys:
            if k.key == name:
                return k
        return None


def fleet_status(
    tracker: str,
    summary: TrackerSummary,
    tally: DeviceTally,
    *,
    now: float,
    targets: Mapping[str, Target | str] | None = None,
    peaks: Mapping[str, MachinePeak] | None = None,
    window_secs: float = DEFAULT_WINDOW_SECS,
) -> FleetStatus:
    """The tracker's devices by key, each with what ``tally`` counted for it.

    Args:
        tracker: the tracker's address, as shown.
        summary: what the tracker said (``tracker_summary``).
        tally: the stored trials' per-device counts.
        now: the time (unix seconds) the window ends at.
        targets: per key, the target its devices reported, or a sentence saying why there is
            none (yet); a key missing here has ``target_note`` "not asked yet".
        peaks: per key, its devices' kept peak.
        window_secs: how far back "trials per minute" looks.

    Raises:
        ValueError: ``window_secs`` is not positive.
    """
    if not window_secs > 0 or math.isinf(window_secs):
        raise ValueError(f"window_secs must be a positive number of seconds (got {window_secs})")
    targets = targets or {}
    since = now - window_secs
    registered = {s.device for s in summary.servers}
    keys = []
    for key in summary.keys():
        devices = tuple(
            DeviceStatus(
                device=s.device,
                key=s.key,
                host=s.host,
                port=s.port,
                measured=tally.measured(s.device),
                per_minute=tally.measured_since(s.device, since) * 60.0 / window_secs,
                errors=tuple(sorted(tally.errors(s.device).items(), key=lambda e: (-e[1], e[0]))),
                last_at=tally.last_at(s.device),
            )
            for s in summary.servers
            if s.key == key
        )
        queue = summary.queues.get(key)
        target = targets.get(key)
        note = target if isinstance(target, str) else ("" if target else "not asked yet")
        keys.append(
            KeyStatus(
                key=key,
                devices=devices,
                free=None if queue is None else queue.free,
                pending=None if queue is None else queue.pending,
                target=target if isinstance(target, Target) else None,
                target_note=note,
                peak=(peaks or {}).get(key),
            )
        )
    prefixes = tuple(f"{key}@" for key in summary.keys())
    gone = [d for d in tally.devices() if d not in registered and d.startswith(prefixes)]
    return FleetStatus(
        tracker=tracker,
        keys=tuple(keys),
        window_secs=float(window_secs),
        gone_devices=len(gone),
        gone_measured=sum(tally.measured(d) for d in gone),
    )
