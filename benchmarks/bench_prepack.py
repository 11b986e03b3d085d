"""Weights packed once at build time against in every inference; tune_relax with its weights'
layouts free against as shipped (issue 23).

Run after ``bench_model.py``: ``python benchmarks/bench_prepack.py [--out bench_results/model]
[--tune-relax 150] [--rounds 5]``

For each model in ``--out``'s database (``bench_model.py``'s): each task's best schedule in
the database (``best_schedules``; one tune per ``--out`` in ``bench_model.py``'s use) built
twice, each packed sketch's weight copy left in its kernel (run in every inference) and moved
to build time (``build_relax``'s default); with ``--tune-relax N``, TVM's ``tune_relax``
at N trials twice, as shipped and with the weights' layouts free (its ``cpu_weight_prepack``,
what the race uses). Every build is checked against ONNX Runtime's output; all are timed with
ONNX Runtime in interleaved rounds, each read by its fastest call (the race's timer). Printed:
the ratios within this run, and before them each task's kernel as the network runs it (its TIR
function compiled alone and timed on random inputs, copies in it and at build time) beside its
measured time in the database (with the copy for a model imported before its tasks listed
their weights, ``lower_onnx``; without it since): what the tune optimised against what the
network runs. Two more columns: each kernel alone with the caches flushed before each call,
and inside the built network (copies at build), as the network calls it after the kernel
before it; beside them the network's fastest call, timed in the same rounds on a virtual
machine without the instrument that times the kernels. The difference between the two is not
the time the network spends outside its kernels: each kernel's fastest call is the least of
many, and their sum is less than the kernels of any one call; a sampling profile
(docs/reproduction/model/2026-12-04-profile.py) measures that split.
Name the machine beside every number (the first line says which CPU).
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
import numpy as np
import onnxruntime

from explorer import _tvm
from explorer.measure import keep_off_worker_cores
from explorer.model import MAX_ERROR, best_schedules
from explorer.model._import import lower_as_stored, lower_onnx
from explorer.model._onnx import parse_onnx
from explorer.model._race_child import (
    ROUND_SECS,
    _fastest_call,
    _relative_error,
    relax_per_iter,
)
from explorer.storage import environment, get_store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench_results/model"))
    parser.add_argument("--tune-relax", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {environment()['cpu_model']}", flush=True)
    with get_store(args.out / "records.db", read_only=True) as store:
        models = [(m, store.model_source(m.id), best_schedules(m, store)) for m in store.models()]
    for model, source, chosen in models:
        _bench(model, source, chosen, args.tune_relax, args.rounds)
    return 0


def _bench(model, source, chosen, tune_relax, rounds):
    # first: ONNX Runtime's threads take the CPUs of the thread that creates them, and timing
    # TVM's kernels binds this thread to one core (``keep_off_worker_cores``)
    session = _onnxruntime(source, model.target.num_cores)
    onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
    lowered, lowering = lower_as_stored(onnx_file, model, model.name)
    target = model.target.to_tvm()
    schedules = [(t.candidate.workload.mod(), t.candidate.trace) for _, t in chosen]
    built = _tvm.build_relax(lowered, target, schedules)
    builds = {
        "ours, copies in kernels": lambda: _tvm.build_relax(
            lowered, target, schedules, weights_at_build=False
        ),
        "ours, copies at build": lambda: built,
    }
    if tune_relax:  # tune_relax from the plain lowering, as a user of TVM starts
        plain = (
            lower_onnx(
                onnx_file,
                model.name,
                weights_layout_free=False,
                channels_last=lowering.channels_last,
                fast_math=lowering.fast_math,
            )
            if lowering.weights_layout_free
            else lowered
        )
        free = _tvm.with_weights_layout_free(plain)
        builds["tune_relax as shipped"] = lambda: _tune_relax(plain, tune_relax, model)
        builds["tune_relax, layouts free"] = lambda: _tune_relax(free, tune_relax, model)
    print(f"{model.name}: {len(chosen)} of {len(model.tasks)} tasks scheduled", flush=True)
    _kernels(model, chosen, lowered, target, schedules, rounds, built, onnx_file)
    best = _race(onnx_file, session, builds, rounds)
    ours = best["ours, copies at build"] / best["ours, copies in kernels"]
    print(f"  ours, copies at build / in kernels: {ours:.3f}")
    if tune_relax:
        relax = best["tune_relax, layouts free"] / best["tune_relax as shipped"]
        print(f"  tune_relax, layouts free / as shipped: {relax:.3f}")
    for name, secs in best.items():
        print(f"  {name}: {secs * 1e3:.3f} ms, {secs / best['onnxruntime']:.2f}x ONNX Runtime")


def _kernels(model, chosen, lowered, target, schedules, rounds, built, onnx_file):
    """Each task's kernel as the network runs it: its TIR function in the built network,
    compiled alone, timed on random inputs (the fastest of 10 calls, over ``rounds``
    interleaved rounds), with its weight copy in the kernel and moved to build time (then the
    kernel reads the packed weight: TVM names it ``<task>_prepacked``), and at build time
    with the caches flushed of every argument but the first before each call (as Ansor times
    a network's tasks); beside the task's measured time in the database, and inside
    ``built``, the network (``_InNetwork``)."""
    weight = {t.name: t.weight for t in model.tasks}
    measured = {name: trial.result.fastest_secs for name, trial in chosen}
    ways = {"in kernels": False, "at build": True}
    timers = {}
    for way, at_build in ways.items():
        applied = _tvm.apply_schedules(lowered, target, schedules, weights_at_build=at_build)
        for gv, func in applied.functions.items():
            name = gv.name_hint.removesuffix("_prepacked")
            if name in measured and isinstance(func, _tvm.tirx.PrimFunc):
                timers[name, way] = _kernel_timer(func, target)
                if at_build:
                    timers[name, "flushed"] = _kernel_timer(func, target, flush=True)
    ways = {**ways, "flushed": True}
    network = _InNetwork(built, onnx_file)
    best = dict.fromkeys(timers, math.inf)
    for _ in range(rounds):
        for key, timer in timers.items():
            best[key] = min(best[key], timer())
        network.round()
    inside = network.per_call()
    header = "task (per call, ms)"
    width = max(len(header), *map(len, measured))
    print(f"  {header:{width}s} calls measured in-kernel at-build  flushed in-network")
    sums = dict.fromkeys(("measured", *ways, "in network"), 0.0)
    for name in sorted(measured, key=lambda n: -measured[n] * weight[n]):
        row = {
            "measured": measured[name],
            **{w: best.get((name, w), math.nan) for w in ways},
            "in network": inside.get(name, math.nan),  # nan: no kernel (a reshape is a view)
        }
        cells = " ".join(f"{row[k] * 1e3:8.3f}" for k in sums)
        print(f"  {name:{width}s} {weight[name]:5d} {cells}")
        for k in sums:
            sums[k] += weight[name] * row[k] if math.isfinite(row[k]) else 0.0
    print("  sum over calls (ms): " + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in sums.items()))
    kernels = math.fsum(network.calls.values())
    print(
        f"  the network's fastest call {network.fastest * 1e3:.3f} ms; the sum of its kernels' "
        f"fastest calls inside it {kernels * 1e3:.3f} ms",
        flush=True,
    )


class _InNetwork:
    """The built network run in rounds of ``ROUND_SECS``: its fastest call, and each kernel's
    fastest call inside it, timed between the virtual machine's calls before and after it
    (``set_instrument``; a few microseconds of the instrument's own are in each). A kernel
    the network calls twice is two entries (each call its own neighbours and caches). Whole
    calls run on a machine of their own: an instrument, even one that does nothing, is a
    Python call before and after every instruction (0.36 ms a call on ResNet-18)."""

    def __init__(self, built, onnx_file):
        tvm = _tvm.tvm
        self.vm = tvm.relax.VirtualMachine(built, tvm.cpu())
        self.plain = tvm.relax.VirtualMachine(built, tvm.cpu())["main"]
        rng = np.random.default_rng(0)
        self.inputs = [
            tvm.runtime.tensor(rng.standard_normal(i.shape).astype(i.dtype), tvm.cpu())
            for i in onnx_file.inputs
        ]
        self.main = self.vm["main"]
        self.main(*self.inputs)  # TVM's thread pool exists after a call
        self.vm.set_instrument(self._instrument)
        keep_off_worker_cores()
        self.fastest = math.inf
        self.calls: dict[tuple[str, int], float] = {}
        self._run: list[tuple[str, float]] = []
        self._started = 0.0

    def _instrument(self, _func, name, before_run, _ret, *_args):
        now = time.perf_counter()
        if before_run:
            self._started = now
        elif not name.startswith("vm.builtin."):
            self._run.append((name.removesuffix("_prepacked"), now - self._started))
        return 0  # carry on

    def round(self):
        self.fastest = min(self.fastest, _fastest_call(lambda: self.plain(*self.inputs)))
        start = time.perf_counter()
        while time.perf_counter() - start < ROUND_SECS:
            self._run.clear()
            self.main(*self.inputs)
            seen: dict[str, int] = {}
            for name, secs in self._run:
                key = (name, seen.setdefault(name, 0))
                seen[name] += 1
                self.calls[key] = min(self.calls.get(key, math.inf), secs)

    def per_call(self) -> dict[str, float]:
        """Each kernel's fastest time inside the network, the mean over its calls."""
        by_name: dict[str, list[float]] = {}
        for (name, _), secs in self.calls.items():
            by_name.setdefault(name, []).append(secs)
        return {name: math.fsum(secs) / len(secs) for name, secs in by_name.items()}


def _kernel_timer(func, target, *, flush=False):
    tvm = _tvm.tvm
    dev = tvm.cpu()
    alone = tvm.IRModule({"main": func.with_attr("global_symbol", "main")})
    module = _tvm.compile_mod(alone, target)
    rng = np.random.default_rng(0)
    args = [
        tvm.runtime.tensor(rng.random([int(d) for d in a.shape]).astype(str(a.dtype)), dev)
        for a in _tvm.ms.arg_info.ArgInfo.from_prim_func(func)
    ]
    # one call a repeat, the fastest of 10; with ``flush``, the caches flushed before each
    flushing = {"f_preproc": "cache_flush_cpu_non_first_arg"} if flush else {}
    evaluator = module.mod.time_evaluator("main", dev, number=1, repeat=10, **flushing)
    return lambda: min(evaluator(*args).results)


def _tune_relax(mod, trials, model):
    target = model.target.to_tvm()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="explorer-tune-relax-") as work_dir:
        per_iter = relax_per_iter(trials, len(model.tasks))
        database = _tvm.tune_relax(mod, target, work_dir, trials, per_iter=per_iter, seed=0)
        built = _tvm.build_relax(mod, target, database=database)
    print(f"  tune_relax, {trials} trials: {time.perf_counter() - start:.0f} s", flush=True)
    return built


def _onnxruntime(source, threads):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    return onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _race(onnx_file, session, builds, rounds):
    """Every build checked against ONNX Runtime, then all timed in interleaved rounds."""
    rng = np.random.default_rng(0)
    feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in onnx_file.inputs}
    expected = session.run(None, feed)
    inputs = list(feed.values())
    runners = {"onnxruntime": lambda: session.run(None, feed)}
    for name, build in builds.items():
        run = _tvm.relax_runner(build())
        error = _relative_error(run(*inputs), expected)
        print(f"  {name}: output within {error:.2g} of ONNX Runtime's", flush=True)
        if error > MAX_ERROR:
            raise SystemExit(f"{name}: its output differs from ONNX Runtime's by {error:.2g}")
        runners[name] = lambda run=run: run(*inputs)
    keep_off_worker_cores()  # as the race does: TVM's pool exists now
    best = {name: math.inf for name in runners}
    for r in range(rounds):
        names = list(runners)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            best[name] = min(best[name], _fastest_call(runners[name], best[name]))
    return best


if __name__ == "__main__":
    sys.exit(main())
