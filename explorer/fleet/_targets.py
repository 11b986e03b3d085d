"""What each key's devices are: their target and kept peak, asked of one of them, remembered.

A fleet's view (the Fleet tab) polls its tracker every few seconds; asking a device for its
target takes a session on it, so each key is asked once, and again only when the answer was
not final (every device was busy: a request would wait in the tracker's queue behind a search
and outlive the poll). ``DeviceTargets`` keeps the answers and that policy; ``ask_target`` asks.
A search about to run on a fleet checks it first with ``devices_target``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from explorer.core import QueueTimeout, TrackerAddress, TrackerSummary
from explorer.errors import FleetError, FleetNotReady
from explorer.machine import MachinePeak
from explorer.measure import RemoteMeasurer, TargetNotReported
from explorer.target import Target

RETRY_SECS = 30.0
"""A key whose answer was not final is asked again after this."""

TargetAnswer = tuple[Target | str, MachinePeak | None, bool]
"""``ask_target``'s answer: the target or why it is not known, the kept peak, whether final."""


def ask_target(address: TrackerAddress, key: str, timeout: float) -> TargetAnswer:
    """The target one device of ``key`` reports, or why there is none; its peak if measured
    before (``explorer peak --tracker``; nothing is measured here); and whether that answer is
    final (a busy or vanished device is asked again later)."""
    measurer = RemoteMeasurer(address, key, queue_timeout_secs=timeout)
    try:
        return measurer.device_target(), measurer.cached_device_peak(), True
    except TargetNotReported:
        return "not reported (a plain TVM rpc_server): give the target yourself", None, True
    except QueueTimeout:
        return f"not known yet: every device was busy for {timeout:g} s", None, False
    except FleetError as exc:
        return f"not known yet: {' '.join(str(exc).split()).rstrip('.')}", None, False
    finally:
        measurer.close()


@dataclass
class DeviceTargets:
    """Per tracker and key, the devices' target (or why it is not known) and kept peak.

    ``due`` says which keys to ask now (``ask_target``, on a worker), ``record`` takes the
    answers. Not thread-safe: one thread (the UI's) calls it.
    """

    retry_secs: float = RETRY_SECS
    _known: dict[str, dict[str, Target | str]] = field(default_factory=dict)
    _peaks: dict[str, dict[str, MachinePeak]] = field(default_factory=dict)
    _retry_at: dict[tuple[str, str], float] = field(default_factory=dict)

    def due(self, tracker: str, summary: TrackerSummary, now: float | None = None) -> list[str]:
        """The keys with devices at ``tracker`` to ask now: never asked, or due again. A key
        whose devices are all busy is not asked (said so, and tried at a later poll)."""
        now = time.monotonic() if now is None else now
        known = self._known.setdefault(tracker, {})
        keys = []
        for k in sorted({s.key for s in summary.servers}):
            if k in known and self._retry_at.get((tracker, k), float("inf")) > now:
                continue
            queue = summary.queues.get(k)
            if queue is not None and queue.free == 0:
                if not isinstance(known.get(k), Target):
                    known[k] = "not known yet: every device is busy"
                self._retry_at[(tracker, k)] = now
                continue
            keys.append(k)
            if not isinstance(known.get(k), Target):
                known[k] = "asking one of its devices..."
        return keys

    def record(
        self, tracker: str, found: dict[str, TargetAnswer], now: float | None = None
    ) -> None:
        """Keep ``ask_target``'s answers; one that is not final is asked again later."""
        now = time.monotonic() if now is None else now
        known = self._known.setdefault(tracker, {})
        peaks = self._peaks.setdefault(tracker, {})
        for key, (target, peak, final) in found.items():
            known[key] = target
            if peak is not None:
                peaks[key] = peak
            if final:
                self._retry_at.pop((tracker, key), None)
            else:
                self._retry_at[(tracker, key)] = now + self.retry_secs

    def targets(self, tracker: str) -> dict[str, Target | str]:
        return dict(self._known.get(tracker, {}))

    def peaks(self, tracker: str) -> dict[str, MachinePeak]:
        return dict(self._peaks.get(tracker, {}))


def devices_target(measurer: RemoteMeasurer) -> tuple[Target, bool]:
    """The target the devices of the measurer's key report, and whether it was assumed (a
    plain TVM ``rpc_server`` reports none: this machine's CPU is taken, as the CLI does).

    Raises:
        FleetNotReady: the tracker does not answer, or no device of the key is registered.
    """
    try:  # the measurer refuses a key no device is registered under (``NoSuchKey``) at once
        return measurer.device_target(), False
    except TargetNotReported:
        return Target.local_cpu(), True
    except FleetError as exc:
        raise FleetNotReady(f"{exc}.") from None
