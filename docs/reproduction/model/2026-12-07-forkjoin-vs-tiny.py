"""The tiny network's tuned build and a kernel that only starts and joins TVM's threads,
alternated for SECS seconds in one process, each the fastest call of 0.2 s; prints each pair.

    python docs/reproduction/model/2026-12-07-forkjoin-vs-tiny.py DB SECS

DB: a database holding the tiny network (``explorer model example tiny``, ``model import``)
and a tune of it; the build takes each task's best schedule, as a race does.
"""

import math
import sys
import time

import numpy as np

from explorer import _tvm
from explorer.core._sched import leave_session
from explorer.measure import keep_off_worker_cores
from explorer.model import best_schedules
from explorer.model._import import lower_as_stored
from explorer.model._onnx import parse_onnx
from explorer.storage import get_store
from explorer.target import Target

DB = sys.argv[1]
leave_session()
tvm = _tvm.tvm
with get_store(DB, read_only=True) as store:
    model = store.models()[0]
    source, chosen = store.model_source(model.id), best_schedules(model, store)
onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
rng = np.random.default_rng(0)
inputs = [rng.standard_normal(i.shape).astype(i.dtype) for i in onnx_file.inputs]
lowered, _ = lower_as_stored(onnx_file, model, model.name)
schedules = [(t.candidate.workload.mod(), t.candidate.trace) for _, t in chosen]
run = _tvm.relax_runner(_tvm.build_relax(lowered, model.target.to_tvm(), schedules))
src = """
@T.prim_func
def main(A: T.Buffer((2, 16), "float32")):
    T.func_attr({"global_symbol": "main", "tirx.noalias": True})
    for p in T.parallel(2):
        for l in T.vectorized(16):
            A[p, l] = A[p, l] + T.float32(1)
"""
target = Target.local_cpu()
mod = _tvm.compile_mod(_tvm.parse_tvmscript(src), target.to_tvm()).mod
a = tvm.runtime.tensor(np.zeros((2, 16), "float32"), tvm.cpu())
fj = mod["main"]
fj(a)
run(*inputs)
keep_off_worker_cores()


def fastest(f, secs=0.2):
    best = math.inf
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < secs:
        b = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - b)
    return best


end = time.time() + float(sys.argv[2])
while time.time() < end:
    x = fastest(lambda: fj(a))
    y = fastest(lambda: run(*inputs))
    print(
        f"{time.strftime('%H:%M:%S')} forkjoin {x * 1e6:6.2f} us  tuned {y * 1e6:6.1f} us",
        flush=True,
    )
