"""A network built with its folded weight copies used as constants, against the build before
(a tuple of those constants made and taken apart in every inference), raced in the same minutes.

``python docs/reproduction/model/2026-12-05-constant-tuples.py DB [--rounds N] [--model NAME]
[--constants-first]``: the model ``NAME`` (default: the first) of the database
(``bench_model.py``'s ``records.db``) built twice from each task's best schedule, as the race
builds it: once as ``apply_schedules`` does now (``CanonicalizeBindings`` and
``DeadCodeElimination`` after ``FoldConstant``) and once with those two passes left out (the
build before), in that order (``--constants-first``: the other). Both checked against ONNX
Runtime, then both and ONNX Runtime timed in ``N`` interleaved rounds (each in another order)
by the race's timer, each round's fastest call. Printed: the calls the virtual machine makes
per inference in each build (Relax's instrument), each network's fastest call, its ratio to
ONNX Runtime's, and constants / tuples.
"""

from __future__ import annotations

import argparse
import collections
import math
from unittest import mock

import numpy as np
import onnxruntime

from explorer import _tvm
from explorer.measure import keep_off_worker_cores
from explorer.model import MAX_ERROR, best_schedules
from explorer.model._import import lower_as_stored
from explorer.model._onnx import parse_onnx
from explorer.model._race_child import _fastest_call, _relative_error
from explorer.storage import environment, get_store


def _vm_calls(executable, x) -> collections.Counter:
    """How many times the virtual machine calls each function in one inference."""
    tvm = _tvm.tvm
    vm = tvm.relax.VirtualMachine(executable, tvm.cpu())
    calls: collections.Counter = collections.Counter()

    def instrument(func, name, before_run, ret_value, *args):
        if before_run:
            calls[str(name)] += 1
        return 0

    vm.set_instrument(instrument)
    vm["main"](tvm.runtime.tensor(x, tvm.cpu()))
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--model", default=None)
    parser.add_argument("--constants-first", action="store_true", help="build that one first")
    args = parser.parse_args()
    print(f"machine: {environment()['cpu_model']}", flush=True)
    with get_store(args.db, read_only=True) as store:
        found = [m for m in store.models() if args.model in (None, m.name)]
        if not found:
            raise SystemExit(f"{args.db}: no model named {args.model}")
        model = found[0]
        source, chosen = store.model_source(model.id), best_schedules(model, store)
    onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = model.target.num_cores, 1
    session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in onnx_file.inputs}
    expected = session.run(None, feed)
    runners = {"onnxruntime": lambda: session.run(None, feed)}
    lowered, _ = lower_as_stored(onnx_file, model, model.name)
    schedules = [(t.candidate.workload.mod(), t.candidate.trace) for _, t in chosen]
    relax = _tvm.tvm.relax
    identity = lambda: _tvm.tvm.transform.Sequential([])
    inputs = list(feed.values())
    builds = ("constants", "tuples") if args.constants_first else ("tuples", "constants")
    for name in builds:
        if name == "tuples":  # the build before: the two passes left out
            with (
                mock.patch.object(relax.transform, "CanonicalizeBindings", identity),
                mock.patch.object(relax.transform, "DeadCodeElimination", identity),
            ):
                executable = _tvm.build_relax(lowered, model.target.to_tvm(), schedules)
        else:
            executable = _tvm.build_relax(lowered, model.target.to_tvm(), schedules)
        builtins = {k: v for k, v in _vm_calls(executable, inputs[0]).items() if "vm.builtin" in k}
        print(f"{name}: {sum(builtins.values())} builtin calls per inference {dict(builtins)}")
        run = _tvm.relax_runner(executable)
        error = _relative_error(run(*inputs), expected)
        print(f"{name}: output within {error:.2g} of ONNX Runtime's", flush=True)
        if error > MAX_ERROR:
            raise SystemExit(f"{name}: its output differs from ONNX Runtime's")
        runners[name] = lambda run=run: run(*inputs)
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
    print(f"constants / tuples: {best['constants'] / best['tuples']:.4f}")


if __name__ == "__main__":
    main()
