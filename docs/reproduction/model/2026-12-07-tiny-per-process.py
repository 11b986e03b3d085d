"""One process: the tiny network's tuned build (and ONNX Runtime unless --no-ort) timed in
interleaved rounds as a race does (the fastest call of 0.3 s each); prints each thread's
allowed cores and the times. Run it several times: each run is a new process.

    python docs/reproduction/model/2026-12-07-tiny-per-process.py DB [--no-ort] [--no-pin]
"""

import argparse
import math
import os

import numpy as np

from explorer import _tvm
from explorer.core._sched import leave_session
from explorer.measure import keep_off_worker_cores
from explorer.model import best_schedules
from explorer.model._import import lower_as_stored
from explorer.model._onnx import parse_onnx
from explorer.model._race_child import _fastest_call
from explorer.storage import get_store

p = argparse.ArgumentParser()
p.add_argument("db")
p.add_argument("--no-ort", action="store_true")
p.add_argument("--no-pin", action="store_true")
p.add_argument("--rounds", type=int, default=4)
a = p.parse_args()
DB = a.db
leave_session()
with get_store(DB, read_only=True) as store:
    model = store.models()[0]
    source, chosen = store.model_source(model.id), best_schedules(model, store)
onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
rng = np.random.default_rng(0)
feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in onnx_file.inputs}
runners = {}
if not a.no_ort:
    import onnxruntime

    o = onnxruntime.SessionOptions()
    o.intra_op_num_threads = 2
    o.inter_op_num_threads = 1
    s = onnxruntime.InferenceSession(source, o, providers=["CPUExecutionProvider"])
    runners["ort"] = lambda: s.run(None, feed)
lowered, _ = lower_as_stored(onnx_file, model, model.name)
schedules = [(t.candidate.workload.mod(), t.candidate.trace) for _, t in chosen]
run = _tvm.relax_runner(_tvm.build_relax(lowered, model.target.to_tvm(), schedules))
inputs = list(feed.values())
runners["tuned"] = lambda: run(*inputs)
for f in runners.values():
    f()
pinned = None if a.no_pin else keep_off_worker_cores()
aff = []
for t in sorted(os.listdir("/proc/self/task")):
    with open(f"/proc/self/task/{t}/status") as fh:
        cpus = next(ln.split(":")[1].strip() for ln in fh if ln.startswith("Cpus_allowed_list"))
    with open(f"/proc/self/task/{t}/comm") as fh:
        aff.append(f"{fh.read().strip()}:{cpus}")
best = dict.fromkeys(runners, math.inf)
rounds = {n: [] for n in runners}
for _ in range(a.rounds):
    for n in runners:
        secs = _fastest_call(runners[n], best[n])
        best[n] = min(best[n], secs)
        rounds[n].append(secs)
print("pinned", sorted(pinned) if pinned else None, "threads", " ".join(aff))
print(
    "  "
    + "  ".join(
        f"{n}: " + " ".join(f"{x * 1e6:.0f}" for x in v) + " us" for n, v in rounds.items()
    ),
    flush=True,
)
