"""Relax's virtual machine interpreting its instructions against running them compiled, on a
tuned network: does the time between the kernels shrink?

``python docs/reproduction/model/2026-12-03-exec-mode.py DB [ROUNDS]``: every model in the
database (``bench_model.py``'s ``records.db``) built with each task's best schedule twice,
``exec_mode="bytecode"`` (what the race builds) and ``"compiled"``, both checked against ONNX
Runtime and timed with it in interleaved rounds by the race's timer (each round's fastest call).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import onnxruntime

from explorer import _tvm
from explorer.measure import keep_off_worker_cores
from explorer.model import MAX_ERROR, best_schedules
from explorer.model._import import lower_as_stored
from explorer.model._onnx import parse_onnx
from explorer.model._race_child import _fastest_call, _relative_error
from explorer.storage import environment, get_store

MODES = ("bytecode", "compiled")


def main(db: str, rounds: int) -> None:
    print(f"machine: {environment()['cpu_model']}", flush=True)
    with get_store(db, read_only=True) as store:
        models = [(m, store.model_source(m.id), best_schedules(m, store)) for m in store.models()]
    for model, source, chosen in models:
        _race(model, source, chosen, rounds)


def _race(model, source, chosen, rounds):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = model.target.num_cores, 1
    session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
    lowered, _ = lower_as_stored(onnx_file, model, model.name)
    target = model.target.to_tvm()
    schedules = [(t.candidate.workload.mod(), t.candidate.trace) for _, t in chosen]
    rng = np.random.default_rng(0)
    feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in onnx_file.inputs}
    expected, inputs = session.run(None, feed), list(feed.values())
    runners = {"onnxruntime": lambda: session.run(None, feed)}
    for mode in MODES:
        run = _tvm.relax_runner(_tvm.build_relax(lowered, target, schedules, exec_mode=mode))
        error = _relative_error(run(*inputs), expected)
        print(f"{model.name} {mode}: output within {error:.2g} of ONNX Runtime's", flush=True)
        if error > MAX_ERROR:
            raise SystemExit(f"{mode}: its output differs from ONNX Runtime's")
        runners[mode] = lambda run=run: run(*inputs)
    keep_off_worker_cores()  # as the race does, once TVM's pool and ONNX Runtime's exist
    best = dict.fromkeys(runners, math.inf)
    for r in range(rounds):
        names = list(runners)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            secs = _fastest_call(runners[name], best[name])
            best[name] = min(best[name], secs)
            print(f"  round {r}: {name} {secs * 1e3:.3f} ms", flush=True)
    for name, secs in best.items():
        ratio = secs / best["onnxruntime"]
        print(f"{model.name} {name}: {secs * 1e3:.3f} ms, {ratio:.3f}x ONNX Runtime")
    print(f"{model.name} compiled / bytecode: {best['compiled'] / best['bytecode']:.3f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 7)
