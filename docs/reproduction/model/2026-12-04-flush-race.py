"""Networks tuned under two measurement protocols, raced in the same minutes.

``python docs/reproduction/model/2026-12-04-flush-race.py DB [DB ...] [--rounds N] [--model
NAME]``: the model ``NAME`` (default: the first) of each database (``bench_model.py``'s
``records.db``) built with each task's best schedule as the race builds it, every build checked
against ONNX Runtime, then all of them and ONNX Runtime timed in ``N`` interleaved rounds (each
round in another order) by the race's timer, each round's fastest call. Printed: each network's
fastest call and its ratio to ONNX Runtime's in this run. It runs in a session of its own, as
the race's child does (``explorer.core._sched``): started from a shell's session on 2026-12-06,
every contender, ONNX Runtime included, read about 1.8x slower than in the races.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import onnxruntime

from explorer import _tvm
from explorer.core._sched import leave_session
from explorer.measure import keep_off_worker_cores
from explorer.model import MAX_ERROR, best_schedules
from explorer.model._import import lower_as_stored
from explorer.model._onnx import parse_onnx
from explorer.model._race_child import _fastest_call, _relative_error
from explorer.storage import environment, get_store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", nargs="+")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    leave_session()
    print(f"machine: {environment()['cpu_model']}", flush=True)
    runners, session, feed = {}, None, None
    for db in args.db:
        with get_store(db, read_only=True) as store:
            found = [m for m in store.models() if args.model in (None, m.name)]
            if not found:
                raise SystemExit(f"{db}: no model named {args.model}")
            model = found[0]
            source, chosen = store.model_source(model.id), best_schedules(model, store)
        onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
        if session is None:
            options = onnxruntime.SessionOptions()
            threads = model.target.num_cores
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            providers = ["CPUExecutionProvider"]
            session = onnxruntime.InferenceSession(source, options, providers=providers)
            rng = np.random.default_rng(0)
            feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in onnx_file.inputs}
            expected = session.run(None, feed)
            runners["onnxruntime"] = lambda s=session, f=feed: s.run(None, f)
        lowered, _ = lower_as_stored(onnx_file, model, model.name)
        schedules = [(t.candidate.workload.mod(), t.candidate.trace) for _, t in chosen]
        run = _tvm.relax_runner(_tvm.build_relax(lowered, model.target.to_tvm(), schedules))
        inputs = list(feed.values())
        error = _relative_error(run(*inputs), expected)
        print(f"{db}: output within {error:.2g} of ONNX Runtime's", flush=True)
        if error > MAX_ERROR:
            raise SystemExit(f"{db}: its output differs from ONNX Runtime's")
        runners[db] = lambda run=run, inputs=inputs: run(*inputs)
    keep_off_worker_cores()  # as the race does, once TVM's pool and ONNX Runtime's exist
    best = dict.fromkeys(runners, math.inf)
    names = list(runners)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            secs = _fastest_call(runners[name], best[name])
            best[name] = min(best[name], secs)
            print(f"  round {r}: {name} {secs * 1e3:.3f} ms", flush=True)
    for name, secs in best.items():
        print(f"{name}: {secs * 1e3:.3f} ms, {secs / best['onnxruntime']:.3f}x ONNX Runtime")


if __name__ == "__main__":
    main()
