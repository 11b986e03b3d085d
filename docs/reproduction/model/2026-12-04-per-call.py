"""Where a tuned network's time goes, call by call, beside ONNX Runtime's nodes.

``python docs/reproduction/model/2026-12-04-per-call.py DB [--iterations N] [--model NAME]``:
the model ``NAME`` (default: the first) of the database (``bench_model.py``'s ``records.db``)
built as the race builds it (each task's best schedule, ``lower_as_stored``), its calling
thread bound off TVM's worker cores as the race binds it; then

- the network's fastest call of ``N`` (no instrument);
- each function the virtual machine calls, timed around every call (Relax's ``set_instrument``:
  a Python callback before and after, a few microseconds each), its calls per inference summed
  and the fastest of ``N`` inferences taken; beside it the task's own fastest repeat of that
  schedule (from the database) times its weight;
- ONNX Runtime's profile of the same network (``enable_profiling``, ``N`` runs): each node's
  fastest run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import tempfile
import time

import numpy as np
import onnxruntime

from explorer import _tvm
from explorer.measure import keep_off_worker_cores
from explorer.model import best_schedules, untuned_kept
from explorer.model._import import lower_as_stored
from explorer.model._onnx import parse_onnx
from explorer.storage import environment, get_store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--model", default=None)
    args = parser.parse_args()
    print(f"machine: {environment()['cpu_model']}", flush=True)
    with get_store(args.db, read_only=True) as store:
        models = store.models()
        model = next((m for m in models if args.model in (None, m.name)), None)
        if model is None:
            raise SystemExit(f"{args.db}: no model named {args.model}")
        source, chosen = store.model_source(model.id), dict(best_schedules(model, store))
    built = {n: t for n, t in chosen.items() if not untuned_kept(model.task(n), t)}
    # first, and gone before TVM is timed: ONNX Runtime's threads take the cores of the thread
    # that starts them (this one is bound to one core below, ``keep_off_worker_cores``), and
    # they spin a while after each run
    onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
    nodes = _onnxruntime(source, model, onnx_file, args.iterations)
    lowered, lowering = lower_as_stored(onnx_file, model, model.name)
    print(f"{model.name}: lowered with {lowering}")
    schedules = [(t.candidate.workload.mod(), t.candidate.trace) for t in built.values()]
    executable = _tvm.build_relax(lowered, model.target.to_tvm(), schedules)
    tvm = _tvm.tvm
    vm = tvm.relax.VirtualMachine(executable, tvm.cpu())
    rng = np.random.default_rng(0)
    x = rng.standard_normal(onnx_file.inputs[0].shape).astype("float32")
    main_fn, x_dev = vm["main"], tvm.runtime.tensor(x, tvm.cpu())
    main_fn(x_dev)
    keep_off_worker_cores()
    whole = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        main_fn(x_dev)
        whole.append(time.perf_counter() - start)
    print(f"network, fastest of {args.iterations}: {min(whole) * 1e3:.3f} ms")
    per_call = _instrumented(vm, main_fn, x_dev, args.iterations)
    print(f"\n{'function':44s} calls  in network  alone x weight  network / alone")
    total = 0.0
    for name, (calls, secs) in sorted(per_call.items(), key=lambda kv: -kv[1][1]):
        total += secs
        task = name.removesuffix("_prepacked")
        alone = _alone(model, task, built)
        ratio = f"{secs / alone:6.3f}" if alone else "      "
        shown = f"{alone * 1e3:8.3f}" if alone else " " * 8
        print(f"{name:44s} x{calls:<4d} {secs * 1e3:8.3f} ms  {shown} ms     {ratio}")
    print(f"sum over functions: {total * 1e3:.3f} ms")
    _print_nodes(nodes, args.iterations)


def _instrumented(vm, main_fn, x_dev, iterations):
    """{function: (calls per inference, fastest inference's total time in it)}."""
    spans = collections.defaultdict(list)
    opened = {}

    def instrument(func, name, before, ret, *args):
        if before:
            opened[name] = time.perf_counter()
        else:
            spans[name].append(time.perf_counter() - opened[name])
        return 0

    vm.set_instrument(instrument)
    for _ in range(iterations):
        main_fn(x_dev)
    out = {}
    for name, secs in spans.items():
        calls = len(secs) // iterations
        out[name] = (calls, float(np.array(secs).reshape(iterations, calls).sum(1).min()))
    return out


def _alone(model, task, built):
    """The task's fastest repeat of its built schedule times its weight, or its untuned time."""
    try:
        found = model.task(task)
    except KeyError:
        return None
    trial = built.get(task)
    secs = trial.result.fastest_secs if trial is not None else found.untuned_secs
    return secs * found.weight if secs else None


def _onnxruntime(source, model, onnx_file, iterations):
    """{(node, operator): [(secs, output shape) of each run]} from ONNX Runtime's profile."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = model.target.num_cores, 1
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {onnx_file.inputs[0].name: rng.standard_normal(onnx_file.inputs[0].shape)}
    feed = {k: v.astype("float32") for k, v in feed.items()}
    for _ in range(iterations):
        session.run(None, feed)
    path = session.end_profiling()
    with open(path) as fh:
        events = json.load(fh)
    os.remove(path)
    nodes = collections.defaultdict(list)
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            shape = event["args"].get("output_type_shape")
            key = (event["name"].removesuffix("_kernel_time"), event["args"].get("op_name"))
            nodes[key].append((event["dur"] * 1e-6, str(shape)))
    return nodes


def _print_nodes(nodes, iterations):
    print(f"\nONNX Runtime {onnxruntime.__version__}, each node's fastest of {iterations} runs:")
    total = 0.0
    rows = sorted(((min(d for d, _ in v), k, v[0][1]) for k, v in nodes.items()), reverse=True)
    for secs, (name, op), shape in rows:
        total += secs
        print(f"  {secs * 1e3:7.3f} ms  {op:18s} {name[:36]:36s} {shape[:40]}")
    print(f"sum over nodes: {total * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
