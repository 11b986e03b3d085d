"""The packed matmul's inner loop alone, its data in L1, against the peak kernel.

The peak kernel (``explorer.machine``) updates registers with FMAs and never touches memory.
The packed matmul's inner loop also loads: per k, ``mr`` broadcasts of A and ``nr / 16``
vector loads of B feed ``mr * nr / 16`` FMAs into an ``mr x nr`` register tile. Here that loop
runs over small A and B panels (L1-resident) many times, so what it reaches against the peak
kernel is the cost of its loads alone, without the matmul's memory traffic or loop overheads.
All kernels are compiled by TVM for the local target, timed call by call with TVM's timer in
5 interleaved rounds, each read by its fastest call (as the peak is).

    CORES=2 TVM_NUM_THREADS=2 python docs/reproduction/packing/2026-12-03-inner-loop.py
"""

import os

import numpy as np

from explorer import _tvm
from explorer.machine._peak_kernels import ACCUMULATORS, FMA_STEPS, fma_source
from explorer.target import Target, cpu_model

TARGET = Target.local_cpu()
CORES = int(os.environ.get("CORES", TARGET.num_cores))
LANES = TARGET.vector_lanes_f32
L, REPS = 64, 4000  # k steps per pass (A: L x mr floats, B: L x nr: in L1), passes
TILES = [(8, 32), (4, 64), (6, 64), (12, 32), (14, 32)]  # (mr, nr); 8 x 32: the best trial's


def tile_source(mr: int, nr: int) -> str:
    return f"""
@T.prim_func
def main(A: T.Buffer(({CORES}, {L}, {mr}), "float32"),
         B: T.Buffer(({CORES}, {L}, {nr}), "float32"),
         C: T.Buffer(({CORES}, {mr}, {nr}), "float32")):
    T.func_attr({{"global_symbol": "main", "tirx.noalias": True}})
    for p in T.parallel({CORES}):
        acc = T.decl_buffer(({mr}, {nr}), "float32", scope="local")
        for i in T.unroll({mr}):
            for j in T.vectorized({nr}):
                acc[i, j] = T.float32(0)
        for t in range({REPS}):
            for k in range({L}):
                for i in T.unroll({mr}):
                    for j in T.vectorized({nr}):
                        acc[i, j] = acc[i, j] + A[p, k, i] * B[p, k, j]
        for i in T.unroll({mr}):
            for j in T.vectorized({nr}):
                C[p, i, j] = acc[i, j]
"""


def timer(source: str, *arrays: np.ndarray):
    module = _tvm.compile_mod(_tvm.parse_tvmscript(source), TARGET.to_tvm()).mod
    dev = _tvm.tvm.cpu()
    args = [_tvm.tvm.runtime.tensor(a, dev) for a in arrays]
    evaluate = module.time_evaluator("main", dev, number=1, repeat=20)
    evaluate(*args)  # warm-up
    return lambda: min(evaluate(*args).results)


def main() -> None:
    rng = np.random.default_rng(0)
    kernels = {
        "peak kernel": (
            timer(fma_source(CORES, LANES), np.ones((CORES, ACCUMULATORS * LANES), "float32")),
            2 * LANES * ACCUMULATORS * FMA_STEPS * CORES,
        )
    }
    for mr, nr in TILES:
        a = (rng.random((CORES, L, mr)) * 1e-3).astype("float32")
        b = (rng.random((CORES, L, nr)) * 1e-3).astype("float32")
        c = np.zeros((CORES, mr, nr), "float32")
        kernels[f"tile {mr}x{nr}"] = (
            timer(tile_source(mr, nr), a, b, c),
            2 * mr * nr * L * REPS * CORES,
        )
    best = dict.fromkeys(kernels, float("inf"))
    for _ in range(5):
        for name, (run, _) in kernels.items():
            best[name] = min(best[name], run())
    peak = kernels["peak kernel"][1] / best["peak kernel"] / 1e9
    print(f"{cpu_model()}, {TARGET.key()}, {CORES} threads")
    for name, (_, flops) in kernels.items():
        gflops = flops / best[name] / 1e9
        print(
            f"{name:12s} {best[name] * 1e3:7.3f} ms {gflops:7.1f} GFLOPS "
            f"{gflops / peak:5.2f} of the peak kernel"
        )


if __name__ == "__main__":
    main()
