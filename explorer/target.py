"""Where kernels run: the local CPU (detected) or a CUDA GPU, converted to TVM's dict form."""

from __future__ import annotations

import functools
import json
import os
import platform
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from explorer.errors import DeviceMissingError, TargetError

# LLVM CPU names TVM 0.27 accepts here, with the widest SIMD register (bits) code for each may use.
# `native` or a typo silently falls back to `generic`, which is about 6x slower
# (docs/tvm-notes.md, section 2), so a name outside this list is refused.
MCPU_VECTOR_BITS = {
    "znver5": 512,
    "znver4": 512,
    "znver3": 256,
    "znver2": 256,
    "x86-64-v4": 512,
    "x86-64-v3": 256,
    "x86-64-v2": 128,
    "skylake-avx512": 512,
    "cascadelake": 512,
    "icelake-server": 512,
    "sapphirerapids": 512,
    "core-avx2": 256,
    "haswell": 256,
    "generic": 128,
}
KNOWN_MCPUS = tuple(MCPU_VECTOR_BITS)


@dataclass(frozen=True, slots=True)
class Target:
    """A compilation and measurement target.

    Example:
        >>> t = Target.local_cpu()
        >>> t.to_tvm_dict()["kind"]
        'llvm'
    """

    kind: str  # "llvm" or "cuda"
    mcpu: str | None = None  # LLVM CPU name (llvm only)
    num_cores: int = 1  # threads a kernel may use (MetaSchedule requires it)
    vector_bits: int = 128  # widest SIMD register
    l1d_bytes: int = 32 * 1024  # per core
    l2_bytes: int = 1024 * 1024  # per core
    l3_bytes: int = 0  # shared
    arch: str | None = None  # "sm_90" for cuda
    name: str = ""  # human-readable, e.g. "AMD EPYC (znver5, 2 cores)"

    def __post_init__(self) -> None:
        if self.kind not in ("llvm", "cuda"):
            raise TargetError(f"Target.kind must be 'llvm' or 'cuda' (got {self.kind!r})")
        if self.num_cores < 1:
            raise TargetError(f"Target.num_cores must be at least 1 (got {self.num_cores})")
        if self.kind == "llvm" and self.mcpu is not None and self.mcpu not in KNOWN_MCPUS:
            raise TargetError(
                f"Target.mcpu {self.mcpu!r} is not a CPU name LLVM accepts here; TVM would "
                f"silently fall back to 'generic'. Use one of: {', '.join(KNOWN_MCPUS)}"
            )

    # -- construction -------------------------------------------------------------------------
    @classmethod
    def local_cpu(cls, num_cores: int | None = None) -> Target:
        """Describe this machine's CPU: LLVM name, cores, vector width and cache sizes."""
        cpu = _detect_cpu()
        if num_cores is None or num_cores == cpu.num_cores:
            return cpu
        name = f"{cpu_model()} ({cpu.mcpu}, {num_cores} core{'s' * (num_cores != 1)})"
        return replace(cpu, num_cores=num_cores, name=name)

    @classmethod
    def cuda(cls, device_id: int = 0) -> Target:
        """Describe a local CUDA GPU; raises ``DeviceMissingError`` when none is present."""
        from explorer import _tvm

        if not cuda_available(device_id):
            raise DeviceMissingError(f"no CUDA device {device_id} on this machine")
        dev = _tvm.tvm.cuda(device_id)
        major, minor = str(dev.compute_version).split(".")
        return cls(
            kind="cuda",
            arch=f"sm_{major}{minor}",
            num_cores=int(dev.multi_processor_count),
            vector_bits=128,
            l1d_bytes=int(dev.max_shared_memory_per_block),
            l2_bytes=0,
            name=f"{dev.device_name} (sm_{major}{minor})",
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Target:
        try:
            return cls(**data)
        except TypeError as exc:
            raise TargetError(f"not a target description: {exc}") from None

    # -- conversion ---------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def key(self) -> str:
        """A stable identifier used by the record database (no cache sizes: they don't change
        code generation)."""
        if self.kind == "cuda":
            return f"cuda:{self.arch}"
        return f"llvm:{self.mcpu or 'generic'}:{self.num_cores}"

    def to_tvm_dict(self) -> dict[str, Any]:
        """The dict TVM 0.27 takes (``"llvm -mcpu=..."`` strings are refused by TVM)."""
        if self.kind == "cuda":
            # MetaSchedule's CUDA rules need the limits: every NVIDIA GPU since Kepler has
            # 1024 threads a block and warps of 32; shared memory per block is the target's.
            return {
                "kind": "cuda",
                "arch": self.arch,
                "max_threads_per_block": 1024,
                "max_num_threads": 1024,
                "thread_warp_size": 32,
                "max_shared_memory_per_block": self.l1d_bytes,
            }
        spec: dict[str, Any] = {"kind": "llvm", "num-cores": self.num_cores}
        if self.mcpu:
            spec["mcpu"] = self.mcpu
        return spec

    def to_tvm(self) -> Any:
        from explorer import _tvm

        return _tvm.make_target(self.to_tvm_dict())

    @property
    def vector_lanes_f32(self) -> int:
        return self.vector_bits // 32

    @property
    def nominal_peak_gflops_f32(self) -> float:
        """A nominal fp32 rate from a formula: 2 FMA units x lanes x 2 flops x cores x 3 GHz.

        Only an order of magnitude: neither the clock nor how many full-width FMA units a core
        has is readable here, and the formula misses both ways (384 GFLOPS on a 2-core AMD
        EPYC whose FMA kernel measures 235). Never a ceiling: for one, use
        ``explorer.machine.measured_peak``.
        """
        if self.kind == "cuda":
            return float("nan")
        return 2 * self.vector_lanes_f32 * 2 * self.num_cores * 3.0

    def missing_here(self) -> tuple[str, ...]:
        """The vector instruction sets this target's CPU (``mcpu``) has and this machine's CPU
        lacks (``()`` when its kernels can run here, or when this is not an x86 CPU target).

        A kernel built for a CPU with AVX-512, run on one without, dies of an illegal
        instruction (a recording made on a Zen 5, measured on a Zen 3: the fleet's devices died
        of SIGILL). Only the sets whose names LLVM and Linux share are compared.
        """
        if self.kind != "llvm" or not self.mcpu:
            return ()
        return _missing_features(self.mcpu)

    def missing_on(self, other: Target) -> tuple[str, ...]:
        """The vector instruction sets this target's CPU has and ``other``'s CPU lacks: a
        kernel built for this target dies of an illegal instruction on a device of ``other``
        (a fleet's devices report their target). ``()`` unless both are x86 CPU targets."""
        if self.kind != "llvm" or other.kind != "llvm" or not self.mcpu or not other.mcpu:
            return ()
        return _missing_between(self.mcpu, other.mcpu)

    def __str__(self) -> str:
        return self.name or self.key()


VECTOR_SETS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
"""The instruction sets ``Target.missing_here`` compares (LLVM's names, also /proc/cpuinfo's)."""


@functools.lru_cache(maxsize=64)
def _missing_between(mcpu: str, other: str) -> tuple[str, ...]:
    from explorer import _tvm

    wanted, has = _tvm.llvm_cpu_features(mcpu), _tvm.llvm_cpu_features(other)
    return tuple(f for f in VECTOR_SETS if f in wanted and f not in has)


@functools.lru_cache(maxsize=64)
def _missing_features(mcpu: str) -> tuple[str, ...]:
    here = _cpu_flags()
    if not here or "sse2" not in here:  # not an x86 CPU, or nothing readable: no claim
        return ()
    from explorer import _tvm

    wanted = _tvm.llvm_cpu_features(mcpu)
    return tuple(f for f in VECTOR_SETS if f in wanted and f not in here)


def _read_cache_sizes() -> dict[str, int]:
    sizes: dict[str, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for index in sorted(base.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        mult = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        value = int(text.rstrip("KM")) * mult
        if kind in ("Data", "Unified"):
            sizes[f"l{level}"] = value
    return sizes


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


@functools.cache
def _detect_cpu() -> Target:
    # TVM is imported here, not at the top: `explorer.measure` imports this module and must stay
    # light, so that the command line can start its workers while TVM loads in this process.
    from explorer import _tvm

    detected = str(_tvm.tvm.target.Target.from_device(_tvm.tvm.cpu()).attrs.get("mcpu", "generic"))
    mcpu = detected if detected in KNOWN_MCPUS else _mcpu_from_flags(_cpu_flags())
    flags = _cpu_flags()
    vector_bits = 512 if "avx512f" in flags else 256 if "avx2" in flags else 128
    caches = _read_cache_sizes()
    cores = available_cores()
    return Target(
        kind="llvm",
        mcpu=mcpu,
        num_cores=cores,
        vector_bits=vector_bits,
        l1d_bytes=caches.get("l1", 32 * 1024),
        l2_bytes=caches.get("l2", 1024 * 1024),
        l3_bytes=caches.get("l3", 0),
        name=f"{cpu_model()} ({mcpu}, {cores} cores)",
    )


def cuda_available(device_id: int = 0) -> bool:
    """Whether CUDA device ``device_id`` exists here (TVM asks the driver; no driver: False).

    CUDA schedules compile without one (TVM generates the CUDA source here and compiles it for
    the GPU when the module is loaded there), so only running them needs this.
    """
    from explorer import _tvm

    try:
        return bool(_tvm.tvm.cuda(device_id).exist)
    except Exception:  # noqa: BLE001  (a TVM built without CUDA raises on asking)
        return False


def available_cores() -> int:
    """The cores this process may run on (its affinity mask), without importing TVM."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def _mcpu_from_flags(flags: set[str]) -> str:
    if "avx512f" in flags:
        return "x86-64-v4"
    if "avx2" in flags:
        return "x86-64-v3"
    return "x86-64-v2" if "sse4_2" in flags else "generic"


def dumps(target: Target) -> str:
    return json.dumps(target.to_json(), sort_keys=True)
