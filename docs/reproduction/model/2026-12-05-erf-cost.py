"""What one ``erf`` costs a kernel, by the values it is given: the C library's against TOPI's
polynomial.

``python docs/reproduction/model/2026-12-05-erf-cost.py``: the BERT layer's GELU size, 128 x
3072 elements, ``y = erf(x)`` built twice for this machine's CPU (``te.erf``, which LLVM
compiles to a call of the C library's ``erff`` per element, and ``topi.fast_erf``), each
scheduled alike (rows parallel over the cores, columns split by 16 and the inner 16
vectorized); then each timed (TVM's ``time_evaluator``, fastest of 5 repeats of 20 calls) on
normal inputs of several scales. Printed: milliseconds a call, and the largest difference
between the two results.
"""

from __future__ import annotations

import numpy as np

from explorer import _tvm
from explorer.storage import environment
from explorer.target import Target

ROWS, COLS = 128, 3072
SCALES = (0.001, 0.1, 1.0, 3.0, 10.0, 100.0)


def build(erf):
    """``erf``: a TE tensor of the input to a TE tensor of its ``erf``."""
    tvm, te = _tvm.tvm, _tvm.te
    x = te.placeholder((ROWS, COLS), name="x")
    y = erf(x)
    sch = _tvm.Schedule(_tvm.create_prim_func([x, y]))
    i, j = sch.get_loops(sch.get_sblock(y.op.name))
    sch.parallel(i)
    sch.vectorize(sch.split(j, [None, 16])[1])
    return tvm.compile(sch.mod, target=Target.local_cpu().to_tvm()).mod


def _libm_erf(x):
    te = _tvm.te
    return te.compute(x.shape, lambda i, j: te.erf(x[i, j]), name="y")


def main() -> None:
    print(f"machine: {environment()['cpu_model']}", flush=True)
    tvm = _tvm.tvm
    kernels = {"C library erff": build(_libm_erf), "TOPI fast_erf": build(tvm.topi.fast_erf)}
    dev = tvm.cpu()
    for scale in SCALES:
        x = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype("float32") * scale
        outs, times = [], []
        for kernel in kernels.values():
            out = tvm.runtime.tensor(np.zeros_like(x), dev)
            timer = kernel.time_evaluator("main", dev, number=20, repeat=5)
            times.append(min(timer(tvm.runtime.tensor(x, dev), out).results) * 1e3)
            outs.append(out.numpy())
        cells = "  ".join(f"{n} {t:.3f} ms" for n, t in zip(kernels, times, strict=True))
        print(
            f"x ~ N(0, {scale:g}^2): {cells}; largest difference "
            f"{np.abs(outs[0] - outs[1]).max():.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
