"""This machine's measured fp32 peak and memory bandwidth, measured once and kept on disk.

A roofline needs a ceiling nothing measured here can pass. A formula cannot give one: it needs
the clock and the number and width of the FMA units, none of them readable here (the formula
once used, an assumed 3 GHz and two full-width FMA units, said 384 GFLOPS for a machine whose
schedules measured up to 470, and for one whose FMA kernel measures 235). So the ceiling is
measured: an FMA-bound kernel and a STREAM triad, both compiled by TVM for the target and run
on all its cores (``_peak_kernels``), in a child process so a crash cannot take the caller.

The result is cached per target key, CPU model and TVM version in
``$SCHEDULE_EXPLORER_PEAK_CACHE`` or else ``$XDG_CACHE_HOME/schedule-explorer/peak.json``
(``~/.cache`` without ``XDG_CACHE_HOME``). A missing, unreadable or corrupt file is measured
again. ``explorer peak --remeasure`` measures again on purpose (the machine was busy, say).

A fleet device (``explorer fleet``) is measured the same way through its tracker: the kernels are
compiled here for the device's target and timed there (``FleetDevice``; ``explorer peak
--tracker HOST:PORT --key KEY``), and kept under the device's target and CPU model.

Example:
    >>> from explorer.machine import measured_peak
    >>> from explorer.target import Target
    >>> peak = measured_peak(Target.local_cpu())      # doctest: +SKIP
    >>> round(peak.gflops_f32), round(peak.bandwidth_gbs)  # doctest: +SKIP
    (235, 33)
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer._cache import user_cache_dir
from explorer.errors import ExplorerError, TargetError
from explorer.machine._busy import BUSY
from explorer.target import Target

if TYPE_CHECKING:  # types only: importing the workloads loads TVM, which the measurer defers
    from explorer.core import MeasureResult
    from explorer.workloads import Workload

CACHE_ENV = "SCHEDULE_EXPLORER_PEAK_CACHE"
MEASURE_TIMEOUT_SECS = 300.0
REMEASURE_HINT = "re-measure it with `explorer peak --remeasure`"
# A peak kept from a busy machine, or below a rate a kernel reached, is measured again when asked
# for, but at most this often: the cost panel asks at every Measure, and on a machine that stays
# busy each attempt cost ~18 s.
BUSY_RETRY_SECS = 600.0


class PeakMeasureError(ExplorerError):
    """The peak kernels failed to compile or run (the reason is TVM's or the child's)."""


@dataclass(frozen=True, slots=True)
class MachinePeak:
    """What the machine's cores sustain, measured by TVM-compiled kernels.

    Attributes:
        gflops_f32: fp32 GFLOPS of an FMA-bound kernel on all the target's cores.
        bandwidth_gbs: GB/s of a STREAM triad over arrays far larger than the caches.
        target_key: ``Target.key()`` of the target measured.
        cpu_model: the CPU's model name.
        tvm_version: the TVM that compiled the kernels.
        num_threads: threads the kernels ran on.
        measured_at: when (unix seconds).
        busy_elsewhere: the share of the CPUs' time other processes used during the last
            attempt (0 to 1). The kernels try again while it is high and keep their fastest
            call, but a machine busy throughout can still give too low a peak. ``None`` for a
            fleet device: the host cannot see what else runs there.
    """

    gflops_f32: float
    bandwidth_gbs: float
    target_key: str
    cpu_model: str
    tvm_version: str
    num_threads: int
    measured_at: float
    busy_elsewhere: float | None

    @property
    def was_busy(self) -> bool:
        """Whether other processes used much of the CPUs while this was measured."""
        return self.busy_elsewhere is not None and self.busy_elsewhere >= BUSY

    def roofline_gflops(self, intensity: float) -> float:
        """The roofline at ``intensity`` FLOP/byte: min(peak, intensity x bandwidth)."""
        return min(self.gflops_f32, intensity * self.bandwidth_gbs)

    def describe(self, gflops: float, intensity: float) -> str:
        """Where ``gflops`` at ``intensity`` FLOP/byte sits under this roofline, in one
        sentence; it says so plainly when the rate is above the measured peak."""
        peak, bw = self.gflops_f32, self.bandwidth_gbs
        memory = intensity * bw
        measured = f"measured fp32 peak {peak:.0f} GFLOPS, memory {bw:.1f} GB/s"
        at = f"arithmetic intensity {intensity:.2f} FLOP/byte"
        if gflops > peak:
            busy = (
                f" (other processes used {self.busy_elsewhere:.0%} of the CPUs meanwhile)"
                if self.was_busy
                else ""
            )
            return (
                f"Roofline: {gflops:.2f} GFLOPS is above this CPU's measured fp32 peak "
                f"({peak:.0f} GFLOPS): the peak measurement may have been disturbed{busy}; "
                f"{REMEASURE_HINT}. ({at})"
            )
        if memory >= peak:
            return (
                f"Roofline: {gflops:.2f} GFLOPS is {gflops / peak:.1%} of this CPU's fp32 peak "
                f"({measured}); {at}: compute-bound."
            )
        if gflops > memory:
            return (
                f"Roofline: {gflops:.2f} GFLOPS is {gflops / peak:.1%} of this CPU's fp32 peak "
                f"and above what main memory allows at {intensity:.2f} FLOP/byte "
                f"({memory:.1f} GFLOPS): its data stays in the caches ({measured})."
            )
        return (
            f"Roofline: {gflops:.2f} GFLOPS is {gflops / memory:.1%} of the memory-bound "
            f"roofline at {intensity:.2f} FLOP/byte ({memory:.1f} GFLOPS; {measured})."
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: Any) -> MachinePeak:
        """Raises ``ValueError`` for anything but a complete, plausible record."""
        if not isinstance(data, dict) or set(data) != {f.name for f in fields(MachinePeak)}:
            raise ValueError(f"not a peak record: {data!r}")
        peak = MachinePeak(**data)
        for name in ("gflops_f32", "bandwidth_gbs"):
            value = getattr(peak, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"not a peak record: {name}={value!r}")
        return peak


@dataclass(frozen=True, slots=True)
class FleetDevice:
    """A device key of a fleet, whose peak is measured through its tracker.

    Attributes:
        tracker: the tracker's ``HOST:PORT``.
        key: the device key; whichever device of it is free is measured (a key names devices
            that are alike).
        cpu_model: the CPU model the device reports: with the target, the peak's cache key.
    """

    tracker: str
    key: str
    cpu_model: str


def cache_path() -> Path:
    """The cache file: ``$SCHEDULE_EXPLORER_PEAK_CACHE``, else under the user's cache dir."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return user_cache_dir() / "peak.json"


def measured_peak(
    target: Target,
    *,
    remeasure: bool = False,
    device: FleetDevice | None = None,
    at_least: float | None = None,
) -> MachinePeak:
    """The measured peak of ``target`` (a CPU), from the cache or else measured now (seconds),
    on this machine or on ``device``.

    ``remeasure=True`` measures even when a cached value exists and replaces it. A kept value
    measured while other processes kept the CPUs busy (``was_busy``), or below ``at_least``
    GFLOPS (a rate a kernel was just measured at on the same target), is measured again too
    when it is asked for, at most once every ``BUSY_RETRY_SECS``; the better of the two is
    kept. A peak below what a kernel reached was measured in a slow minute that nothing here
    could see (a virtual machine's host busy with other guests shows no steal time in some
    hypervisors), and every roofline would say so until it is measured again.
    """
    _check_cpu(target)
    if not remeasure:
        cached = cached_peak(target, device)
        if cached is not None and _kept(cached, at_least):
            return cached
    with _one_measurement_at_a_time(device):
        # Read again: another thread or process may have measured it while this one waited.
        cached = None if remeasure else cached_peak(target, device)
        if cached is not None and _kept(cached, at_least):
            return cached
        return _measure_and_keep(target, device, cached)


def _kept(cached: MachinePeak, at_least: float | None) -> bool:
    """Whether ``cached`` answers without measuring again (see ``measured_peak``)."""
    recent = time.time() - cached.measured_at < BUSY_RETRY_SECS
    exceeded = at_least is not None and at_least > cached.gflops_f32
    return not (cached.was_busy or exceeded) or recent


@contextlib.contextmanager
def _one_measurement_at_a_time(device: FleetDevice | None) -> Iterator[None]:
    """Hold the lock file of this machine (or of ``device``) while its peak is measured.

    Two measurements at once share the cores: both read low, and one of them is wasted (the
    cost panel's measurement and its prediction both asked for the peak of a fresh kernel, and
    the later writer replaced a peak the caller had just been given). A lock file, so other
    processes (a second notebook, the command line) wait too; a cache folder that cannot be
    written only loses the waiting."""
    where = "local" if device is None else f"{device.tracker}|{device.key}"
    path = cache_path()
    lock = path.with_name(f".{path.name}.{hashlib.sha1(where.encode()).hexdigest()[:12]}.lock")
    fd = None
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # per open file: threads of one process wait too
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def _measure_and_keep(
    target: Target, device: FleetDevice | None, cached: MachinePeak | None
) -> MachinePeak:
    peak = measure_peak(target, device)
    if cached is not None:
        # Kept from a busy or slow minute: measured again now, and the best of both kept (a
        # peak is the fastest sustained rate; a disturbed attempt only errs low).
        peak = replace(
            peak,
            gflops_f32=max(peak.gflops_f32, cached.gflops_f32),
            bandwidth_gbs=max(peak.bandwidth_gbs, cached.bandwidth_gbs),
        )
    entries = _read_cache()  # another process may have added its own meanwhile
    entries[_cache_key(target, device)] = peak
    _write_cache(entries)
    return peak


def cached_peak(target: Target, device: FleetDevice | None = None) -> MachinePeak | None:
    """The kept measurement of ``target`` (on ``device``), or ``None`` (nothing is measured)."""
    return _read_cache().get(_cache_key(target, device))


def measure_peak(target: Target, device: FleetDevice | None = None) -> MachinePeak:
    """Measure now, in a child process, with ``target.num_cores`` threads (no cache); on
    ``device``, with the threads its server was started with."""
    _check_cpu(target)
    from explorer import _tvm
    from explorer.target import cpu_model

    env = dict(os.environ, TVM_NUM_THREADS=str(target.num_cores))
    where = [device.tracker, device.key] if device is not None else []
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "explorer.machine._peak_kernels",
                json.dumps(target.to_json()),
                *where,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=MEASURE_TIMEOUT_SECS,
            start_new_session=True,  # a scheduling group of its own (explorer.core._sched)
        )
    except subprocess.TimeoutExpired:
        raise PeakMeasureError(
            f"measuring the peak took more than {MEASURE_TIMEOUT_SECS:.0f} s"
        ) from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise PeakMeasureError(f"measuring the peak failed: {why}")
    reply = json.loads(lines[-1])
    return MachinePeak(
        gflops_f32=float(reply["gflops_f32"]),
        bandwidth_gbs=float(reply["bandwidth_gbs"]),
        target_key=target.key(),
        cpu_model=device.cpu_model if device is not None else cpu_model(),
        tvm_version=_tvm.TVM_VERSION,
        num_threads=int(reply["num_threads"]),
        measured_at=time.time(),
        busy_elsewhere=None if reply["busy_elsewhere"] is None else float(reply["busy_elsewhere"]),
    )


def _check_cpu(target: Target) -> None:
    if target.kind != "llvm":
        raise TargetError(f"a measured peak is for CPU targets only (got {target.kind!r})")


def _cache_key(target: Target, device: FleetDevice | None = None) -> str:
    from explorer import _tvm
    from explorer.target import cpu_model

    model = device.cpu_model if device is not None else cpu_model()
    return f"{target.key()}|{model}|tvm {_tvm.TVM_VERSION}"


def _read_cache() -> dict[str, MachinePeak]:
    """The cached entries; a missing or corrupt file, or a bad entry, counts as absent."""
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    entries = {}
    for key, value in data.items():
        with contextlib.suppress(TypeError, ValueError):
            entries[key] = MachinePeak.from_json(value)
    return entries


def _write_cache(entries: dict[str, MachinePeak]) -> None:
    """Replace the file atomically: a reader never sees half of it. A cache that cannot be
    written (read-only home) only costs a measurement next time."""
    path = cache_path()
    text = json.dumps({k: v.to_json() for k, v in entries.items()}, indent=1, sort_keys=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".peak-", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)


def roofline_text(workload: Workload, result: MeasureResult, peak: MachinePeak | None) -> str:
    """Where a measured schedule sits under this CPU's measured roofline, in one sentence
    (only its arithmetic intensity without a ``peak``: a GPU, or no peak measured yet)."""
    secs = result.median_secs or 0.0
    gflops = workload.flops() / secs / 1e9 if secs else 0.0
    intensity = workload.flops() / max(workload.bytes_moved(), 1)
    if peak is None:
        return f"Arithmetic intensity {intensity:.2f} FLOP/byte."
    return peak.describe(gflops, intensity)
