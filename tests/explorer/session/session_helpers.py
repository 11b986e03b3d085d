"""Shared helpers of the session tests: small multi-block families and a correctness check.

The families are defined here (not in ``explorer.workloads``) so the tests do not depend on the
shapes and block names of the catalog's families, which other packages own. ``conftest.py``
registers them for the test session.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from explorer import _tvm
from explorer.session import ScheduleSession
from explorer.target import Target
from explorer.workloads._base import OperatorFamily, Params, ShapeParam

te = _tvm.te


def _mm_relu(p: Params) -> list:
    n = p["N"]
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    zero = _tvm.tirx.const(0, "float32")
    d = te.compute((n, n), lambda i, j: te.max(c[i, j] - float(n), zero), name="relu")
    return [a, b, d]


def _chain(p: Params) -> list:
    n = p["N"]
    a = te.placeholder((n, n), "float32", name="A")
    m = te.compute((n, n), lambda i, j: a[i, j] * 2.0, name="mul")
    s = te.compute((n, n), lambda i, j: m[j, i] + 1.0, name="add")
    zero = _tvm.tirx.const(0, "float32")
    r = te.compute((n, n), lambda i, j: te.max(s[i, j] - 3.0, zero), name="relu")
    return [a, r]


def _mm_relu_ref(x: Sequence[np.ndarray], p: Params) -> np.ndarray:
    return np.maximum(x[0] @ x[1] - p["N"], 0)


def _chain_ref(x: Sequence[np.ndarray], p: Params) -> np.ndarray:
    return np.maximum((x[0] * 2.0).T + 1.0 - 3.0, 0)


TEST_FAMILIES = (
    OperatorFamily(
        name="session_mm_relu",
        description="relu(A @ B - N): a reduction feeding an elementwise block",
        params=(ShapeParam("N", 64),),
        build=_mm_relu,
        flops=lambda p: 2 * p["N"] ** 3,
        reference=_mm_relu_ref,
    ),
    OperatorFamily(
        name="session_chain",
        description="relu(transpose(A * 2) + 1 - 3): three elementwise blocks",
        params=(ShapeParam("N", 64),),
        build=_chain,
        flops=lambda p: 3 * p["N"] ** 2,
        reference=_chain_ref,
    ),
)


def assert_computes(session: ScheduleSession) -> None:
    """Compile the session's module for the local CPU, run it, compare with NumPy."""
    workload = session.workload
    executable = _tvm.compile_mod(session.mod, Target.local_cpu().to_tvm())
    dev = _tvm.tvm.cpu()
    inputs = workload.random_inputs()
    out_shape, out_dtype = workload.output_spec()
    out = _tvm.tvm.runtime.empty(out_shape, out_dtype, dev)
    executable["main"](*[_tvm.tvm.runtime.tensor(a, dev) for a in inputs], out)
    problem = workload.check_output(out.numpy(), workload.reference(inputs))
    assert problem is None, f"{session.snapshot.step.label}: {problem}"
