"""What this machine can do: NumPy's speed with its native BLAS kernel, and (measured) peak;
and how busy other processes keep it while something is measured."""

from explorer.machine._busy import BUSY, BusyElsewhere
from explorer.machine._numpy import (
    BLAS_OVERRIDES,
    NumpyBaseline,
    NumpyBaselineError,
    NumpyTimer,
    numpy_baseline,
)
from explorer.machine._peak import (
    CACHE_ENV,
    FleetDevice,
    MachinePeak,
    PeakMeasureError,
    cache_path,
    cached_peak,
    measure_peak,
    measured_peak,
    roofline_text,
)
from explorer.machine._peak_kernels import fma_probe, forkjoin_probe

__all__ = [
    "BLAS_OVERRIDES",
    "BUSY",
    "BusyElsewhere",
    "CACHE_ENV",
    "FleetDevice",
    "MachinePeak",
    "PeakMeasureError",
    "cache_path",
    "cached_peak",
    "fma_probe",
    "forkjoin_probe",
    "measure_peak",
    "measured_peak",
    "roofline_text",
    "NumpyBaseline",
    "NumpyBaselineError",
    "NumpyTimer",
    "numpy_baseline",
]
