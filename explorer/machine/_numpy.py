"""NumPy's own speed on a workload, the baseline a schedule is compared with.

NumPy is timed in a child process, never in the caller: this machine's environment may set
``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` (they guard old OpenBLAS builds), and with them
OpenBLAS picks an older kernel than the CPU supports (on an AVX-512 CPU, matmul 1024 fp32 ran at
232 GFLOPS with its AVX2 "Haswell" kernel against 430 with its own). OpenBLAS reads them once,
when it is loaded, so they can only be dropped in a process that has not loaded it yet; the
caller's environment is left exactly as it was. The child reports which kernel OpenBLAS chose
(``threadpoolctl``) and checks NumPy's result against a float64 reference before timing it.

Example:
    >>> from explorer.machine import NumpyTimer
    >>> from explorer.workloads import get_workload
    >>> with NumpyTimer() as numpy:                      # doctest: +SKIP
    ...     base = numpy.time(get_workload("matmul_1024"))
    >>> f"{base.gflops:.0f} GFLOPS ({base.kernel})"      # doctest: +SKIP
    '430 GFLOPS (SkylakeX)'
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from explorer.errors import ExplorerError

# The variables that pin OpenBLAS to another CPU's kernel or cache size.
BLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class NumpyBaselineError(ExplorerError):
    """NumPy could not be timed: its child process failed, or its result was wrong."""


@dataclass(frozen=True, slots=True)
class NumpyBaseline:
    """NumPy's time for one workload, measured in a child process.

    Attributes:
        workload_key: the workload timed (``Workload.key()``).
        run_secs: one time per repeat (each the mean of as many calls as fill ``min_secs``).
        median_secs: the median of ``run_secs``.
        gflops: ``workload.flops()`` / ``median_secs``.
        kernel: the OpenBLAS kernel that ran ("SkylakeX", "Haswell", ...); ``None`` when NumPy
            uses another BLAS.
        blas: the BLAS library and version, e.g. "openblas 0.3.31".
        threading_layer: the BLAS's threading layer ("pthreads", "openmp", ...).
        num_threads: the threads the BLAS may use.
        numpy_version: ``numpy.__version__`` in the child.
        native: ``True`` when the child ran without ``BLAS_OVERRIDES`` (its own kernel choice).
        rel_error: NumPy's largest deviation from a float64 reference, relative to the
            largest reference value (checked within the workload's tolerance before timing).
    """

    workload_key: str
    run_secs: tuple[float, ...]
    median_secs: float
    gflops: float
    kernel: str | None
    blas: str
    threading_layer: str | None
    num_threads: int | None
    numpy_version: str
    native: bool
    rel_error: float

    @property
    def spread(self) -> float:
        """(slowest - fastest) / median over the repeats."""
        return (max(self.run_secs) - min(self.run_secs)) / self.median_secs

    def describe(self) -> str:
        """One line, e.g. "430.1 GFLOPS (NumPy 2.4.6, openblas 0.3.31 SkylakeX, 2 threads)"."""
        kernel = f" {self.kernel}" if self.kernel else ""
        threads = f", {self.num_threads} threads" if self.num_threads else ""
        return (
            f"{self.gflops:.1f} GFLOPS (NumPy {self.numpy_version}, {self.blas}{kernel}{threads})"
        )


class NumpyTimer:
    """A child process that times NumPy on request; start it once, ask it many times.

    Keeping one child for a whole benchmark makes each timing cheap (no interpreter start, and
    NumPy stays warm), so callers can interleave NumPy with their own timings round by round.

    Args:
        native: drop ``BLAS_OVERRIDES`` from the child's environment (the default), so OpenBLAS
            picks its kernel for this CPU. ``False`` keeps the caller's environment as it is.
    """

    def __init__(self, *, native: bool = True) -> None:
        self.native = native
        env = dict(os.environ)
        if native:
            for name in BLAS_OVERRIDES:
                env.pop(name, None)
        # The child's stderr goes to a file, read back only to explain a failure.
        self._stderr = tempfile.TemporaryFile(mode="w+b")
        self._proc: subprocess.Popen[str] | None = subprocess.Popen(
            [sys.executable, "-m", "explorer.machine._numpy_child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            text=True,
            start_new_session=True,  # a scheduling group of its own (explorer.core._sched)
        )

    def time(self, workload: Any, *, repeat: int = 5, min_secs: float = 0.05) -> NumpyBaseline:
        """Time NumPy's implementation of ``workload`` (its ``reference``, on the workload's own
        dtype; ``a @ b`` for a matmul) ``repeat`` times, each for at least ``min_secs``."""
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1 (got {repeat})")
        if not min_secs > 0:
            raise ValueError(f"min_secs must be positive (got {min_secs})")
        reply = self._ask({"workload": workload.to_json(), "repeat": repeat, "min_secs": min_secs})
        if not reply["ok"]:
            raise NumpyBaselineError(f"NumPy on {workload.key()}: {reply['error']}")
        run_secs = tuple(float(s) for s in reply["run_secs"])
        median = sorted(run_secs)[len(run_secs) // 2]
        blas = reply["blas"] or {}
        return NumpyBaseline(
            workload_key=workload.key(),
            run_secs=run_secs,
            median_secs=median,
            gflops=workload.flops() / median / 1e9,
            kernel=blas.get("architecture"),
            blas=f"{blas.get('internal_api', 'unknown BLAS')} {blas.get('version', '')}".strip(),
            threading_layer=blas.get("threading_layer"),
            num_threads=blas.get("num_threads"),
            numpy_version=reply["numpy"],
            native=self.native,
            rel_error=float(reply["rel_error"]),
        )

    def blas_info(self) -> dict[str, Any]:
        """``threadpoolctl``'s description of the child's BLAS (``architecture`` is the kernel)."""
        reply = self._ask({"info": True})
        return dict(reply["blas"] or {})

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc
        if proc is None:
            raise ValueError("this NumpyTimer is closed")
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self.close()
            raise NumpyBaselineError(f"the NumPy timing process died: {self._last_words()}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _last_words(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no message"

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()  # the child's loop ends at end of input
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> NumpyTimer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        self._stderr.close()

    def __del__(self) -> None:
        if getattr(self, "_proc", None) is not None:
            self.close()


def numpy_baseline(
    workload: Any, *, repeat: int = 5, min_secs: float = 0.05, native: bool = True
) -> NumpyBaseline:
    """Time NumPy on ``workload`` once, in a fresh child (see ``NumpyTimer`` for many timings)."""
    with NumpyTimer(native=native) as timer:
        return timer.time(workload, repeat=repeat, min_secs=min_secs)
