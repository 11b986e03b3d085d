"""What this machine can do: NumPy's speed with its native BLAS kernel, and (measured) peak."""

from explorer.machine._numpy import (
    BLAS_OVERRIDES,
    NumpyBaseline,
    NumpyBaselineError,
    NumpyTimer,
    numpy_baseline,
)

__all__ = [
    "BLAS_OVERRIDES",
    "NumpyBaseline",
    "NumpyBaselineError",
    "NumpyTimer",
    "numpy_baseline",
]
