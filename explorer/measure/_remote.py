"""``RemoteMeasurer``: build here, run and time on the devices of a TVM RPC tracker (a fleet).

Pipeline for one ``measure`` call:

1. Build every candidate here, in parallel, on the builder workers of ``LocalMeasurer`` (the
   same code: replay the trace, compile for the candidate's target, which is the device's, and
   ``export_library``).
2. Run them on the fleet: each built kernel goes to a worker that asks the tracker for a free
   device of the key, uploads the ``.so``, checks the output against NumPy here and times it
   there with the local protocol (``_remote_run``). As many run at once as there are workers
   (by default, devices of the key when the measurer starts), and the tracker's queue decides
   which device takes which: a busy device never holds the others up.
3. A candidate whose device went away (server killed, tracker restarted, connection dropped)
   goes back to the queue, up to ``max_retries`` more times, and is ``RUN_ERROR`` only when no
   try found a device that could run it. A kernel that hangs is ended by the device at the
   session's time limit: ``TIMEOUT``, not retried. A kernel that crashes its session cannot be
   told apart from a device that vanished, so it is retried too, then ``RUN_ERROR``.
4. A key left without any device (every server of it gone for ``NO_DEVICE_GRACE_SECS``) is
   not a property of the kernels: ``measure`` raises ``NoDevice`` within seconds, instead of
   queueing every candidate at the tracker until its queue timeout and calling them failures.

Every result names the device that measured it (``MeasureResult.device``). While kernels of a
fleet on this machine are timed, ``TIMING_GATE`` holds this process's cost models back, as for
local runs; a fleet of other machines does not need it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import time
from collections.abc import Iterator
from typing import Any

from explorer.core import (
    TIMING_GATE,
    MeasureResult,
    NoDevice,
    ServerEntry,
    TrackerAddress,
    WorkerLost,
    WorkerPool,
    device_info,
    open_session,
    tracker_summary,
)
from explorer.errors import FleetError
from explorer.machine import FleetDevice, MachinePeak, cached_peak, measured_peak
from explorer.measure._base import MeasureConfig
from explorer.measure._batch import Batch
from explorer.measure._builds import Build, BuildCache
from explorer.measure._local import LocalMeasurer
from explorer.target import Target
from explorer.types import MeasureStatus

SESSION_SLACK_SECS = 10.0  # connecting, uploading, loading and NumPy's reference, per session
RETRY_PAUSE_SECS = 2.0  # before the n-th retry, n times this: a restarting tracker comes back
_DEFAULT_PARALLEL = 2  # when the tracker cannot say how many devices there are
ENVIRONMENT_QUEUE_SECS = 5.0  # a run's record waits no longer than this for a device's info
NO_DEVICE_GRACE_SECS = 10.0
"""How long a key may have no device registered before measuring on it stops: servers whose
tracker restarted register again within about 5 s (TVM's servers retry every 5 s)."""


class TargetNotReported(FleetError):
    """The device is a plain TVM ``rpc_server``, which does not say what it is."""

    environment_problem = False  # the fleet works: what it cannot do is asked of it


class NoSuchKey(FleetError):
    """No server is registered under the key at the tracker (a typo, or none started yet)."""

    environment_problem = False  # a key nobody serves is, first of all, a key to check


class RemoteMeasurer(LocalMeasurer):
    """Measure candidates on the devices registered under ``key`` with a TVM RPC tracker.

    Args:
        tracker: the tracker's ``"HOST:PORT"`` (or a ``TrackerAddress``).
        key: the device key the servers registered with (``rpc_server --key``).
        config: timing and timeout settings, as for ``LocalMeasurer``; ``num_threads``, when
            set, is applied on the device for each session.
        parallel: kernels run at once (default: the key's devices when measuring starts).
        max_retries: extra tries, on whichever device is free, for a candidate whose device
            or tracker went away; the n-th waits ``n * RETRY_PAUSE_SECS`` first (2, 4, 6 s), so
            a tracker restarted within about 12 s loses nothing.
        queue_timeout_secs: how long one try waits for a free device.
        seed: seed of the inputs for the correctness check and the timing.

    ``measure`` and ``remeasure`` raise ``NoDevice`` (a ``FleetError``) when the key has no
    device left at all: the fleet is gone, which says nothing about the kernels.

    Example (a fleet started by ``explorer fleet up --servers 2``)::

        with RemoteMeasurer("127.0.0.1:9190", "local") as m:
            target = m.device_target()
            results = m.measure([Candidate(workload, target, trace)])
            results[0].device  # 'local@127.0.0.1:9091'
    """

    times_here = False  # on the fleet's devices

    def __init__(
        self,
        tracker: str | TrackerAddress,
        key: str,
        config: MeasureConfig | None = None,
        *,
        parallel: int | None = None,
        max_retries: int = 3,
        queue_timeout_secs: float = 120.0,
        seed: int = 0,
    ) -> None:
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"key must be a device key such as 'local' (got {key!r})")
        if parallel is not None and parallel < 1:
            raise ValueError(f"parallel must be at least 1 (got {parallel})")
        if max_retries < 0:
            raise ValueError(f"max_retries must be at least 0 (got {max_retries})")
        if queue_timeout_secs <= 0:
            raise ValueError(f"queue_timeout_secs must be positive (got {queue_timeout_secs})")
        super().__init__(config, num_build_workers=parallel, seed=seed)
        # Every batch builds its own: a device session uploads what it runs anyway, and a
        # re-timing on devices is rarer than a local one.
        self._builds = BuildCache(capacity=0)
        self.tracker = (
            tracker if isinstance(tracker, TrackerAddress) else TrackerAddress.parse(tracker)
        )
        self.key = key.strip()
        self.max_retries = max_retries
        self.queue_timeout_secs = float(queue_timeout_secs)
        self._devices_here = True
        self._info: dict[str, Any] | None = None  # the last device_info a device gave
        self._num_retried = 0

    def __repr__(self) -> str:
        return (
            f"RemoteMeasurer({str(self.tracker)!r}, {self.key!r}, config={self.config!r}, "
            f"parallel={self.num_build_workers}, max_retries={self.max_retries})"
        )

    @property
    def num_retried(self) -> int:
        """How many tries of a candidate were lost so far (its device, or the tracker, went
        away) and sent again."""
        return self._num_retried

    # -- the fleet ----------------------------------------------------------------------------
    def devices(self) -> list[ServerEntry]:
        """The servers registered under this measurer's key now.

        Raises:
            FleetError: the tracker cannot be reached.
        """
        return [s for s in tracker_summary(self.tracker).servers if s.key == self.key]

    def device_target(self) -> Target:
        """The target the key's devices measure for, as a device started by ``explorer fleet``
        reports it (LLVM CPU name, threads, vector width, caches).

        Raises:
            TargetNotReported: the device does not report a target (a plain
                ``tvm.exec.rpc_server``): give the target explicitly then.
            FleetError: no device of the key became free.
        """
        return Target.from_json(self._device_info(self.queue_timeout_secs)["target"])

    def device_peak(self, *, remeasure: bool = False) -> MachinePeak:
        """The fp32 peak and memory bandwidth of the key's devices, as ``explorer peak``
        measures this machine's: kept here once measured (a few seconds, on whichever device
        of the key is free, with the threads its server runs).

        Raises:
            TargetNotReported: a plain ``tvm.exec.rpc_server`` (its target is not known).
            FleetError: no device of the key became free.
            PeakMeasureError: the kernels failed to compile or run on the device.
        """
        target, device = self._fleet_device(self.queue_timeout_secs)
        return measured_peak(target, remeasure=remeasure, device=device)

    def cached_device_peak(self) -> MachinePeak | None:
        """The key's devices' peak if it was measured before (nothing is measured here).

        Raises:
            TargetNotReported, FleetError: as ``device_peak``.
        """
        target, device = self._fleet_device(self.queue_timeout_secs, remembered=True)
        return cached_peak(target, device)

    def run_environment(self, target: Target) -> dict[str, Any]:
        """The tracker, key and devices that measure, one device's report (a key's devices are
        alike) and its kept peak; ``target_key`` and ``tvm_num_threads`` are the device's, not
        this machine's. A device asked before (``device_target``) is not asked again; one that
        does not answer within a few seconds is recorded as not known, with why."""
        where: dict[str, Any] = {"measured_on": f"fleet {self.tracker}, key {self.key}"}
        try:
            where["devices"] = sorted(s.device for s in self.devices())
            device_target, device = self._fleet_device(ENVIRONMENT_QUEUE_SECS, remembered=True)
        except FleetError as exc:
            return {**where, "device": f"not known: {exc}", "peak": None}
        peak = cached_peak(device_target, device)  # the device as it runs, whatever --threads
        info = {k: v for k, v in (self._info or {}).items() if k not in ("pid", "port")}
        return {
            **where,
            "target_key": device_target.key(),
            "tvm_num_threads": str(info.get("threads", device_target.num_cores)),
            "device": info,
            "peak": peak.to_json() if peak else None,
        }

    def _fleet_device(
        self, queue_timeout: float, remembered: bool = False
    ) -> tuple[Target, FleetDevice]:
        info = self._info if remembered and self._info else self._device_info(queue_timeout)
        model = str(info.get("cpu_model") or "unknown CPU")
        return Target.from_json(info["target"]), FleetDevice(str(self.tracker), self.key, model)

    def _device_info(self, queue_timeout: float) -> dict[str, Any]:
        """What a free device of the key says about itself (remembered for the run's record).
        A key no server registered under is refused at once, not after the queue's timeout."""
        summary = tracker_summary(self.tracker)
        if not any(s.key == self.key for s in summary.servers):
            keys = sorted({s.key for s in summary.servers})
            registered = f"keys with devices: {', '.join(keys)}" if keys else "no device at all"
            raise NoSuchKey(
                f"no device is registered under key {self.key!r} at the tracker "
                f"{self.tracker} ({registered})"
            )
        session, device = open_session(
            self.tracker, self.key, session_timeout=30, queue_timeout=queue_timeout
        )
        try:
            info = device_info(session)
        finally:
            del session
        if "target" not in info:
            raise TargetNotReported(
                f"device {device} does not report its target (a plain TVM rpc_server); "
                "give the target explicitly"
            )
        self._info = info
        return info

    # -- LocalMeasurer's hooks ----------------------------------------------------------------
    def _ensure_pool(self) -> WorkerPool:
        if self._pool is None:
            try:
                devices = self.devices()
            except FleetError:
                devices = []  # each run will say what is wrong with the tracker
            if self.num_build_workers is None:
                self.num_build_workers = max(1, len(devices)) if devices else _DEFAULT_PARALLEL
            self._devices_here = not devices or all(_is_this_host(d.host) for d in devices)
        return super()._ensure_pool()

    def _submit_builds(
        self, pool: WorkerPool, batch: Batch, kept: dict[int, Build]
    ) -> dict[int, Any]:
        assert not kept  # no builds are kept (see __init__)
        pool.start(None, num_builders=len(batch.todo), wait=False)
        requests = [self._build_request(batch.cands[i], batch.paths[i]) for i in batch.todo]
        builds = pool.submit_builds(requests, self.config.build_timeout_secs)
        return dict(zip(batch.todo, builds, strict=True))

    def _run_batch(self, pool: WorkerPool, batch: Batch, rounds: int) -> None:
        pending = [i for i in batch.todo if self._take_build(batch, i) and self._can_run(batch, i)]
        tries: dict[int, list[str]] = {i: [] for i in pending}
        for attempt in range(self.max_retries + 1):
            if not pending:
                break
            time.sleep(RETRY_PAUSE_SECS * attempt)
            if not self._key_has_devices():
                raise NoDevice(
                    f"the devices of key {self.key!r} went away: none is registered at the "
                    f"tracker {self.tracker} any more, and {len(pending)} candidate(s) could "
                    f"not be measured; start them again (`explorer fleet up --key "
                    f"{self.key}`) to go on"
                )
            # Measuring: one candidate a session, so a batch spreads over the devices and a
            # hang costs one run timeout. Re-measuring: all rounds of a share of the batch in
            # one session per device, round-robin: a fresh session process timed the same
            # kernel up to 45 % apart from the previous one (measured: 31 ms, then 45 ms, on a
            # pinned one-thread server), so rounds pooled across sessions spread too widely.
            if rounds == 1:
                chunks = [[i] for i in pending]
            else:
                share = max(1, self.num_build_workers or 1)
                chunks = [c for c in (pending[k::share] for k in range(share)) if c]
            requests = [self._remote_request(batch, chunk, rounds) for chunk in chunks]
            with self._gate():
                timeouts = [self._request_timeout(len(c) * rounds) for c in chunks]
                futures = [  # waiting on the network, not a CPU: the wall clock counts
                    pool.submit_builds([r], t, wall_clock=True)[0]
                    for r, t in zip(requests, timeouts, strict=True)
                ]
                replies = [f.result() for f in futures]
            lost = []
            for chunk, reply in zip(chunks, replies, strict=True):
                for k, i in enumerate(chunk):
                    if isinstance(reply, WorkerLost):
                        self._take_run(batch, i, reply)
                        continue
                    item = {**reply["items"][k], "device": reply.get("device")}
                    if item.get("stage") == "lost":
                        tries[i].append(f"{item['device'] or 'no device'}: {item['error']}")
                        lost.append(i)
                    else:
                        self._take_run(batch, i, item)
            pending = lost
            if attempt < self.max_retries:
                self._num_retried += len(lost)
        for i in pending:
            batch.results[i] = self._failure(
                MeasureStatus.RUN_ERROR,
                f"no device with key {self.key!r} could run it in {len(tries[i])} tries:\n"
                + "\n".join(tries[i]),
                batch,
                i,
            )

    # -- internals ----------------------------------------------------------------------------
    def _can_run(self, batch: Batch, i: int) -> bool:
        """Whether the key's devices can run candidate ``i``, built; its ``INVALID`` result
        when their CPU lacks a vector set its target's has (run, it would kill the device's
        session with an illegal instruction, retried until the tries ran out). A device that
        does not say its target is given the benefit of the doubt."""
        cand = batch.cands[i]
        try:
            device, _ = self._fleet_device(ENVIRONMENT_QUEUE_SECS, remembered=True)
        except FleetError:
            return True
        missing = cand.target.missing_on(device)
        if not missing:
            return True
        batch.results[i] = MeasureResult(
            MeasureStatus.INVALID,
            error_msg=(
                f"the devices of key {self.key!r} ({device}) lack {', '.join(missing)}, which "
                f"kernels built for {cand.target.mcpu} may use (they would die of an illegal "
                "instruction there): the schedule compiled; measure it for the devices' target"
            ),
            build_secs=batch.build_secs[i],
            max_spread=self.config.max_spread,
        )
        return False

    def _key_has_devices(self) -> bool:
        """Whether a device of the key is registered, waiting up to ``NO_DEVICE_GRACE_SECS``
        for one (servers register again a few seconds after their tracker restarted). A
        tracker that does not answer counts as yes: the tries say what is wrong with it."""
        deadline = time.monotonic() + NO_DEVICE_GRACE_SECS
        while True:
            try:
                if self.devices():
                    return True
            except FleetError:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)

    def _remote_request(self, batch: Batch, chunk: list[int], rounds: int) -> dict[str, Any]:
        cfg = self.config
        # The bar: the caller's best, or the fastest kernel already back from any device of
        # the batch (the key's devices share a target); a re-timing has only the latter, and
        # cuts only kernels of 0.1 s or more a call against it (CUT_MIN_CALL_SECS).
        first, bar = batch.cands[chunk[0]], self._hopeless_secs(batch)
        request = self._run_request(first, batch, chunk[0], False, bar)
        per_item = ("workload", "family_module", "path", "prepacked", "check", "own_reference")
        for key in per_item:
            request.pop(key, None)
        items = []
        for i in chunk:
            one = self._run_request(batch.cands[i], batch, i, cfg.check_correctness)
            items.append({k: one[k] for k in per_item})
        request.update(
            op="remote_run",
            items=items,
            rounds=rounds,
            tracker=str(self.tracker),
            key=self.key,
            session_timeout=self._session_timeout(len(chunk) * rounds),
            queue_timeout=self.queue_timeout_secs,
            num_threads=cfg.num_threads,
        )
        return request

    def _request_timeout(self, runs: int) -> float:
        """The worker's own bound: the device ends a hung session first; this catches a
        network that stops answering altogether."""
        return self.queue_timeout_secs + self._session_timeout(runs) + SESSION_SLACK_SECS

    def _session_timeout(self, runs: int) -> float:
        """When the device ends a session: each run may take its correctness run plus its
        timing, each bounded by the run timeout (as for a local run), plus the slack."""
        return runs * 2 * self.config.run_timeout_secs + SESSION_SLACK_SECS

    def _take_run(self, batch: Batch, i: int, reply: dict[str, Any] | WorkerLost) -> None:
        if isinstance(reply, WorkerLost):
            status = MeasureStatus.TIMEOUT if reply.kind == "timeout" else MeasureStatus.RUN_ERROR
            batch.results[i] = self._failure(
                status, f"{reply.message} while on the fleet", batch, i
            )
            return
        if reply.get("ok"):
            batch.add_timings(i, reply)
            return
        stage = reply.get("stage")
        status = {
            "timeout": MeasureStatus.TIMEOUT,
            "wrong": MeasureStatus.WRONG_RESULT,
        }.get(str(stage), MeasureStatus.RUN_ERROR)
        device = reply.get("device")
        where = f" (on {device})" if device else ""
        batch.results[i] = self._failure(status, f"{reply.get('error')}{where}", batch, i, device)

    def _failure(
        self,
        status: MeasureStatus,
        message: str,
        batch: Batch,
        i: int,
        device: str | None = None,
    ) -> MeasureResult:
        return MeasureResult(
            status,
            error_msg=message,
            build_secs=batch.build_secs.get(i),
            flops=batch.cands[i].workload.flops(),
            max_spread=self.config.max_spread,
            device=device,
        )

    @contextlib.contextmanager
    def _gate(self) -> Iterator[None]:
        """``TIMING_GATE`` while a fleet on this machine times kernels (module docs)."""
        if self._devices_here:
            with TIMING_GATE.timing():
                yield
        else:
            yield


def _is_this_host(host: str) -> bool:
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        if host in ("localhost", socket.gethostname()):
            return True
    with contextlib.suppress(OSError):
        return host in socket.gethostbyname_ex(socket.gethostname())[2]
    return False
