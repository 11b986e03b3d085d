"""Where a packed matmul's time goes on this machine: a schedule written by hand with the best
packed trial's structure (B copied into [N/nr, K, nr] panels, an mr x nr tile of accumulators,
K innermost around it, the outer tiles fused and parallel), and variants of it: K blocked by kc
outside the panels, A packed into mr-row panels too, other register tiles. All variants of one
size are timed side by side (``measure_paired``, 3 rounds), each read by its fastest repeat.

    MNK=1024,1024,1024 python docs/reproduction/packing/2026-12-02-intel-microkernel.py
"""

import os

from explorer import _tvm
from explorer.machine import cached_peak
from explorer.measure import Candidate, LocalMeasurer
from explorer.target import Target
from explorer.workloads import get_workload

M, N, K = (int(x) for x in os.environ.get("MNK", "1024,1024,1024").split(","))
WORKLOAD = get_workload("matmul", M=M, N=N, K=K)
# (kc, mr, nr, A packed): the best trial's structure first
VARIANTS = [
    (K, 8, 32, False),
    (min(K, 256), 8, 32, False),
    (K, 8, 32, True),
    (K, 4, 64, False),
    (K, 16, 16, False),
]


def schedule(kc: int, mr: int, nr: int, pack_a: bool) -> _tvm.Schedule:
    sch = _tvm.Schedule(WORKLOAD.mod())
    blk = sch.get_sblock("C")
    i, j, k = sch.get_loops(blk)
    i0, i1 = sch.split(i, [None, mr])
    j0, j1, j2 = sch.split(j, [N // 256, 256 // nr, nr])
    k0, k1 = sch.split(k, [None, kc])
    sch.reorder(j0, i0, k0, j1, k1, i1, j2)
    # B's panels, written row by row
    packed_b = sch.cache_read(blk, 1, "global")
    sch.transform_layout(blk, ("read", 1), lambda kk, jj: (jj // nr, kk, jj % nr))
    rows, cols = sch.get_loops(packed_b)
    sch.reorder(cols, rows)
    panel, lane = sch.split(cols, [None, nr])
    sch.reorder(panel, rows, lane)
    sch.parallel(sch.fuse(panel, rows))
    sch.vectorize(lane)
    if pack_a:
        packed_a = sch.cache_read(blk, 0, "global")
        sch.transform_layout(blk, ("read", 0), lambda ii, kk: (ii // mr, kk, ii % mr))
        rows, ks = sch.get_loops(packed_a)
        block, row = sch.split(rows, [None, mr])
        sch.reorder(block, ks, row)
        sch.parallel(block)
    outer = sch.fuse(j0, i0)
    sch.parallel(outer)
    sch.vectorize(j2)
    sch.unroll(i1)
    sch.decompose_reduction(blk, k0)
    sch.annotate(outer, "pragma_auto_unroll_max_step", 512)
    sch.annotate(outer, "pragma_unroll_explicit", 1)
    return sch


def main() -> None:
    target = Target.local_cpu()
    peak = cached_peak(target)
    assert peak is not None, "measure the peak first: explorer peak"
    print(f"machine: {peak.cpu_model}, peak {peak.gflops_f32:.1f} GFLOPS", flush=True)
    variants = list(dict.fromkeys(VARIANTS))
    cands = [Candidate(WORKLOAD, target, _tvm.trace_to_json(schedule(*v).trace)) for v in variants]
    with LocalMeasurer() as m:
        per = m.measure_paired(cands, rounds=3)
    for (kc, mr, nr, pack_a), results in zip(variants, per, strict=True):
        secs = min(r.fastest_secs for r in results if r.is_ok)
        gflops = WORKLOAD.flops() / secs / 1e9
        print(
            f"{M}x{N}x{K} kc={kc:5d} tile {mr}x{nr} packA={pack_a!s:5s} {secs * 1e3:7.3f} ms "
            f"{gflops:7.1f} GFLOPS  {gflops / peak.gflops_f32:.2f} of peak"
        )


if __name__ == "__main__":
    main()
