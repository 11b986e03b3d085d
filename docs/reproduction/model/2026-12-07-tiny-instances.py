"""One process: the tiny network's tuned build twice, three VM instances of each (fresh
buffers), timed in interleaved rounds (the fastest call of 0.3 s each).

    python docs/reproduction/model/2026-12-07-tiny-instances.py DB
"""

import math
import sys

import numpy as np

from explorer import _tvm
from explorer.core._sched import leave_session
from explorer.measure import keep_off_worker_cores
from explorer.model import best_schedules
from explorer.model._import import lower_as_stored
from explorer.model._onnx import parse_onnx
from explorer.model._race_child import _fastest_call
from explorer.storage import get_store

DB = sys.argv[1]
leave_session()
with get_store(DB, read_only=True) as store:
    model = store.models()[0]
    source, chosen = store.model_source(model.id), best_schedules(model, store)
onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
rng = np.random.default_rng(0)
feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in onnx_file.inputs}
inputs = list(feed.values())
lowered, _ = lower_as_stored(onnx_file, model, model.name)
schedules = [(t.candidate.workload.mod(), t.candidate.trace) for _, t in chosen]
runners = {}
for b in range(2):
    ex = _tvm.build_relax(lowered, model.target.to_tvm(), schedules)
    for i in range(3):
        run = _tvm.relax_runner(ex)
        runners[f"b{b}vm{i}"] = lambda run=run: run(*inputs)
for f in runners.values():
    f()
keep_off_worker_cores()
best = dict.fromkeys(runners, math.inf)
rounds = {n: [] for n in runners}
for _ in range(3):
    for n in runners:
        s = _fastest_call(runners[n], best[n])
        best[n] = min(best[n], s)
        rounds[n].append(s)
print(
    "  ".join(f"{n}: " + "/".join(f"{x * 1e6:.0f}" for x in v) for n, v in rounds.items()),
    flush=True,
)
