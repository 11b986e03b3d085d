"""Where matmul 1024's packed kernel loses against the peak: one core or the second one.

The packed matmul written directly in TVMScript (no search): an MR x NR register tile over K,
B in [N/NR, K, NR] panels, parallel tasks of NB columns x MB rows, K optionally blocked by KC.
Variants: B copied into its panels on every call (the packed sketches' structure), B given
already packed, A given packed too ([M/MR, K, MR]: the tile's broadcasts read one contiguous
line), and the blocking that did best with A unpacked in a grid of 41 blockings. Each variant's
result is checked against NumPy. Timed in 5 interleaved rounds with TVM's timer, each read by
its fastest call, against the peak's FMA kernel; NumPy's native kernel (its own OpenBLAS
kernel, the two variables this machine sets unset) is timed in its child between the rounds.
Run it from the repository's root once per thread count (1 and 2 here):

    export TVM_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
    python docs/reproduction/packing/2026-12-03-two-cores.py
"""

import os

import numpy as np

from explorer import _tvm
from explorer.machine import NumpyTimer
from explorer.machine._peak_kernels import ACCUMULATORS, FMA_STEPS, fma_source
from explorer.target import Target, cpu_model
from explorer.workloads import get_workload

TARGET = Target.local_cpu()
CORES = TARGET.num_cores  # the peak kernel's parallel tasks; TVM_NUM_THREADS sets the threads
LANES = TARGET.vector_lanes_f32
M = N = K = 1024
MR, NR = 8, 32  # the register tile of matmul 1024's best trials (16 accumulators)
# name: (A packed, B copied in on each call, NB, MB, KC)
VARIANTS = {
    "B copied in each call (search)": (False, True, 256, 8, K),
    "B packed": (False, False, 256, 8, K),
    "B packed, best blocking": (False, False, 1024, 64, 256),
    "A and B packed": (True, False, 256, 8, K),
}


def source(pack_a: bool, copy_b: bool, nb: int, mb: int, kc: int) -> str:
    a_shape = f"({M // MR}, {K}, {MR})" if pack_a else f"({M}, {K})"
    row = f"(ib * {mb // MR} + ir)"
    a_at = f"A[{row}, k0 * {kc} + k, i]" if pack_a else f"A[{row} * {MR} + i, k0 * {kc} + k]"
    b_shape = f"({K}, {N})" if copy_b else f"({N // NR}, {K}, {NR})"
    panels, copy = "B", ""
    if copy_b:  # the packed sketches' copy: parallel over panel rows, each row vectorized
        panels = "Bp"
        copy = f"""
    Bp = T.alloc_buffer(({N // NR}, {K}, {NR}), "float32")
    for pk in T.parallel({N // NR * K}):
        for lane in T.vectorized({NR}):
            Bp[pk // {K}, pk % {K}, lane] = B[pk % {K}, pk // {K} * {NR} + lane]"""
    c_at = f"C[{row} * {MR} + i, jb * {nb} + jp * {NR} + j]"
    b_at = f"{panels}[jb * {nb // NR} + jp, k0 * {kc} + k, j]"
    return f"""
@T.prim_func
def main(A: T.Buffer({a_shape}, "float32"), B: T.Buffer({b_shape}, "float32"),
         C: T.Buffer(({M}, {N}), "float32")):
    T.func_attr({{"global_symbol": "main", "tirx.noalias": True}}){copy}
    for t in T.parallel({(N // nb) * (M // mb)}):
        jb = t // {M // mb}
        ib = t % {M // mb}
        for k0 in range({K // kc}):
            for jp in range({nb // NR}):
                for ir in range({mb // MR}):
                    acc = T.decl_buffer(({MR}, {NR}), "float32", scope="local")
                    for i in T.unroll({MR}):
                        for j in T.vectorized({NR}):
                            acc[i, j] = T.if_then_else(k0 == 0, T.float32(0), {c_at})
                    for k in range({kc}):
                        for i in T.unroll({MR}):
                            for j in T.vectorized({NR}):
                                acc[i, j] = acc[i, j] + {a_at} * {b_at}
                    for i in T.unroll({MR}):
                        for j in T.vectorized({NR}):
                            {c_at} = acc[i, j]
"""


def timer(text: str, *arrays: np.ndarray, check: np.ndarray | None = None):
    module = _tvm.compile_mod(_tvm.parse_tvmscript(text), TARGET.to_tvm()).mod
    dev = _tvm.tvm.cpu()
    args = [_tvm.tvm.runtime.tensor(a, dev) for a in arrays]
    evaluate = module.time_evaluator("main", dev, number=1, repeat=10)
    evaluate(*args)  # warm-up
    if check is not None:
        np.testing.assert_allclose(args[-1].numpy(), check, rtol=1e-3)
    return lambda: min(evaluate(*args).results)


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.random((M, K), dtype="float32")
    b = rng.random((K, N), dtype="float32")
    reference = a @ b
    a_packed = np.ascontiguousarray(a.reshape(M // MR, MR, K).transpose(0, 2, 1))
    b_packed = np.ascontiguousarray(b.reshape(K, N // NR, NR).transpose(1, 0, 2))
    peak_flops = 2 * LANES * ACCUMULATORS * FMA_STEPS * CORES
    kernels = {
        "peak kernel": timer(
            fma_source(CORES, LANES), np.ones((CORES, ACCUMULATORS * LANES), "float32")
        )
    }
    for name, (pack_a, copy_b, nb, mb, kc) in VARIANTS.items():
        inputs = (
            a_packed if pack_a else a,
            b if copy_b else b_packed,
            np.zeros((M, N), "float32"),
        )
        kernels[name] = timer(source(pack_a, copy_b, nb, mb, kc), *inputs, check=reference)
    best = dict.fromkeys([*kernels, "NumPy (native kernel)"], float("inf"))
    workload = get_workload("matmul", M=M, N=N, K=K)
    with NumpyTimer() as numpy_timer:
        for _ in range(5):
            for name, run in kernels.items():
                best[name] = min(best[name], run())
            baseline = numpy_timer.time(workload)
            best["NumPy (native kernel)"] = min(
                best["NumPy (native kernel)"], min(baseline.run_secs)
            )
        blas = numpy_timer.blas_info()
    peak = peak_flops / best["peak kernel"] / 1e9
    print(
        f"{cpu_model()}, {TARGET.key()}, TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')}, "
        f"NumPy: {blas.get('internal_api')} {blas.get('version')} {blas.get('architecture')} "
        f"{blas.get('num_threads')} threads; tile {MR}x{NR}"
    )
    for name, secs in best.items():
        gflops = (peak_flops if name == "peak kernel" else 2 * M * N * K) / secs / 1e9
        share = f"{gflops / peak:5.2f} of the peak kernel"
        print(f"{name:32s} {secs * 1e3:8.3f} ms {gflops:7.1f} GFLOPS {share}")


if __name__ == "__main__":
    main()
