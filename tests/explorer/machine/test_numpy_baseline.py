"""NumPy's baseline is timed with OpenBLAS's own kernel, in a child, leaving our environment alone.

Real subprocesses and real NumPy: the overriding variables are set in this test's environment
only (monkeypatch), as this machine's environment may set them for every process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from explorer.machine import BLAS_OVERRIDES, NumpyBaselineError, NumpyTimer, numpy_baseline
from explorer.workloads import get_workload

# Timing-sensitive: run alone after the parallel part of `make test` (the `serial` marker).
pytestmark = pytest.mark.serial


def _has_avx512() -> bool:
    try:
        return "avx512f" in Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False


@pytest.mark.skipif(not _has_avx512(), reason="no AVX-512: OpenBLAS has no faster kernel here")
def test_the_child_runs_openblas_native_kernel_despite_the_variables(monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("OPENBLAS_L2_SIZE", "512")
    before = dict(os.environ)
    workload = get_workload("matmul", M=128, N=96, K=64)
    with NumpyTimer(native=False) as kept, NumpyTimer() as native:
        # The variables do change the kernel on this machine: a child that keeps them runs the
        # AVX2 one, so the native child's kernel below is not what it would have been anyway.
        assert kept.blas_info()["architecture"] == "Haswell"
        base = native.time(workload, repeat=2, min_secs=0.001)
    assert base.kernel is not None and base.kernel != "Haswell", base
    assert base.native and base.blas.startswith("openblas")
    assert base.workload_key == workload.key() and len(base.run_secs) == 2
    assert base.gflops == pytest.approx(workload.flops() / base.median_secs / 1e9)
    # the child checked a @ b against float64 arithmetic before timing it
    assert 0 <= base.rel_error < 1e-5
    assert dict(os.environ) == before
    assert all(os.environ[name] for name in BLAS_OVERRIDES)


def test_other_families_are_timed_with_their_numpy_reference():
    base = numpy_baseline(get_workload("softmax", M=16, N=32), repeat=1, min_secs=0.001)
    assert base.median_secs > 0 and base.rel_error < 1e-5
    assert "GFLOPS (NumPy" in base.describe()


def test_misuse_and_a_dead_child_are_one_clear_error():
    with pytest.raises(ValueError, match="repeat must be at least 1"):
        numpy_baseline(get_workload("matmul", M=8, N=8, K=8), repeat=0)
    timer = NumpyTimer()
    timer._proc.kill()  # a crash of the child, as an OOM kill would be
    with pytest.raises(NumpyBaselineError, match="died"):
        timer.time(get_workload("matmul", M=8, N=8, K=8))
    timer.close()
