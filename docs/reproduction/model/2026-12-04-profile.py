"""Where a tuned network's call spends its time, by sampling: inside its kernels, in TVM's
runtime between them, in the operating system.

``python docs/reproduction/model/2026-12-04-profile.py DB OUT [SECONDS]``: the first model in
the database (``bench_model.py``'s ``records.db``) built with each task's best schedule as the
race builds it, written to ``OUT/network.so`` and loaded from there (so that ``perf`` names its
kernels), checked against ONNX Runtime; its fastest call timed as the race does (NumPy arrays
in and out), beside the same network called on tensors made once, without and with a no-op
instrument, and ONNX Runtime, in interleaved rounds; then called in a loop for ``SECONDS``
(its mean call), and as long again under ``perf record -e cpu-clock`` (a software clock: it
samples on a virtual machine without hardware counters; Debian's ``linux-perf``). Printed:
each thread's samples per call, in ms, by the shared object and function they fell in; the
launching thread's are the call's timeline.
"""

from __future__ import annotations

import collections
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnxruntime

from explorer import _tvm
from explorer.measure import keep_off_worker_cores
from explorer.model import MAX_ERROR, best_schedules
from explorer.model._import import lower_as_stored
from explorer.model._onnx import parse_onnx
from explorer.model._race_child import _fastest_call, _relative_error
from explorer.storage import environment, get_store

HERTZ = 1000
ROUNDS = 9
TOP = 14


def main(db: str, out: Path, seconds: float) -> None:
    print(f"machine: {environment()['cpu_model']}", flush=True)
    with get_store(db, read_only=True) as store:
        model = store.models()[0]
        source, chosen = store.model_source(model.id), best_schedules(model, store)
    onnx_file = parse_onnx(source, model.name, {i.name: i.shape for i in model.inputs})
    lowered, _ = lower_as_stored(onnx_file, model, model.name)
    target = model.target.to_tvm()
    schedules = [(t.candidate.workload.mod(), t.candidate.trace) for _, t in chosen]
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    feed = {i.name: rng.standard_normal(i.shape).astype(i.dtype) for i in onnx_file.inputs}
    library = out / "network.so"
    _tvm.build_relax(lowered, target, schedules).export_library(str(library))
    loaded = _tvm.tvm.runtime.load_module(str(library))
    run = _tvm.relax_runner(loaded)
    # the network called on tensors made once, on a machine of its own, and the same with a
    # no-op instrument (a Python call before and after every instruction of the virtual
    # machine, as a per-kernel timing by ``set_instrument`` has)
    plain = _tvm.tvm.relax.VirtualMachine(loaded, _tvm.tvm.cpu())
    instrumented = _tvm.tvm.relax.VirtualMachine(loaded, _tvm.tvm.cpu())
    instrumented.set_instrument(lambda *_: 0)
    tensors = [_tvm.tvm.runtime.tensor(a, _tvm.tvm.cpu()) for a in feed.values()]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = model.target.num_cores, 1
    session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    inputs = list(feed.values())
    error = _relative_error(run(*inputs), session.run(None, feed))
    print(f"{model.name}: output within {error:.2g} of ONNX Runtime's", flush=True)
    if error > MAX_ERROR:
        raise SystemExit("its output differs from ONNX Runtime's")
    keep_off_worker_cores()  # as the race does, once TVM's pool and ONNX Runtime's exist
    runners = {
        "network": lambda: run(*inputs),
        "network, tensors in": lambda: plain["main"](*tensors),
        "network, tensors in, no-op instrument": lambda: instrumented["main"](*tensors),
        "onnxruntime": lambda: session.run(None, feed),
    }
    best = dict.fromkeys(runners, math.inf)
    for r in range(ROUNDS):
        names = list(runners)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            best[name] = min(best[name], _fastest_call(runners[name], best[name]))
    for name, secs in best.items():
        print(f"fastest call: {name} {secs * 1e3:.3f} ms", flush=True)

    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(*inputs)
        calls += 1
    wall = time.perf_counter() - start
    print(f"{calls} calls in {wall:.1f} s without perf: {wall / calls * 1e3:.3f} ms a call")

    data = out / "perf.data"
    command = ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(HERTZ), "-p", str(os.getpid())]
    perf = subprocess.Popen([*command, "-o", str(data)], stdout=subprocess.DEVNULL)
    time.sleep(1.0)  # perf attached
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        run(*inputs)
        calls += 1
    wall = time.perf_counter() - start
    perf.send_signal(signal.SIGINT)
    perf.wait()
    print(f"{calls} calls in {wall:.1f} s under perf: {wall / calls * 1e3:.3f} ms a call")
    _report(data, calls, launcher=threading.get_native_id(), library=library.name)


def _report(data: Path, calls: int, *, launcher: int, library: str) -> None:
    script = subprocess.run(
        ["perf", "script", "-i", str(data), "-F", "tid,ip,sym,dso", "--no-demangle"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    by_thread: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in script.stdout.splitlines():
        parts = line.split(maxsplit=2)  # tid, address, "function (object)"
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        tid = int(parts[0])
        sym, _, dso = parts[2].rpartition(" (")
        dso = Path(dso.rstrip(")")).name
        kind = "kernels" if dso == library else dso
        by_thread[tid][kind, sym.split("+")[0]] += 1
    per_call = 1e3 / HERTZ / calls  # ms a call per sample
    for tid, counts in sorted(by_thread.items(), key=lambda kv: kv[0] != launcher):
        role = "launching thread" if tid == launcher else f"thread {tid}"
        print(f"{role}: {sum(counts.values()) * per_call:.3f} ms a call sampled")
        dsos: collections.Counter = collections.Counter()
        for (dso, _), n in counts.items():
            dsos[dso] += n
        for dso, n in dsos.most_common():
            print(f"  {dso:32s} {n * per_call:7.3f} ms")
        for (dso, sym), n in counts.most_common(TOP):
            print(f"    {n * per_call:7.3f} ms  {dso}: {sym[:90]}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 15.0)
