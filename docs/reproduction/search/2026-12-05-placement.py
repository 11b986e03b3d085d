"""Does where a kernel's buffers land decide its speed? One kernel, one process, two ways.

``python docs/reproduction/search/2026-12-05-placement.py DB RUN [N]``: the fastest schedule of
run ``RUN`` in the ``bench_search.py`` database ``DB``, built once, then timed ``N`` times
(default 30) in this one process:

- *same buffers*: the same argument tensors every time;
- *placed anew*: before each timing, a spacer of a random size (0-16 MB, touched, kept alive)
  is allocated and the argument tensors are made again, so they land on other pages.

Each timing: a 20 ms warm-up, then the fastest of 5 repeats of at least 20 ms (TVM's
``time_evaluator``), printed as GFLOPS. If only the buffers' placement moves the speed, the
first column holds still and the second takes several levels.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from _retime import top_candidates

from explorer import _tvm
from explorer.measure._timing import kernel_args
from explorer.storage import environment, get_store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("run", type=int)
    parser.add_argument("n", type=int, nargs="?", default=30)
    args = parser.parse_args()
    print(f"machine: {environment()['cpu_model']}", flush=True)
    with get_store(args.db, read_only=True) as store:
        kernel = top_candidates(store, args.run, 64)[0]
    workload, flops = kernel.workload, kernel.workload.flops()
    print(f"{workload.key()}: run {args.run}'s fastest schedule", flush=True)
    sch = _tvm.Schedule(workload.mod())
    _tvm.apply_trace_json(kernel.trace, sch)
    split = _tvm.split_weight_copies(sch.mod)
    mod, prepacked = split if split is not None else (sch.mod, None)
    path = Path(tempfile.mkdtemp()) / "kernel.so"
    _tvm.compile_mod(mod, kernel.target.to_tvm()).export_library(str(path))
    tvm = _tvm.tvm
    module = tvm.runtime.load_module(str(path))
    dev = tvm.device("cpu", 0)
    inputs = workload.random_inputs(0)
    shape, dtype = workload.output_spec()

    def fresh() -> list:
        out = tvm.runtime.tensor(np.zeros(shape, dtype=dtype), dev)
        return kernel_args(module, dev, inputs, out, prepacked)

    timer = module.time_evaluator("main", dev, number=1, repeat=5, min_repeat_ms=20)

    def gflops(call_args: list) -> int:
        module["main"](*call_args)
        timer(*call_args)  # warm-up
        return round(flops / min(timer(*call_args).results) / 1e9)

    rng = np.random.default_rng(0)
    same, anew, spacers = fresh(), [], []
    held = []
    for _ in range(args.n):
        held.append(gflops(same))
        spacer = np.ones(int(rng.integers(0, 16 << 20)) // 8)  # touched: its pages are taken
        spacers.append(spacer)
        anew.append(gflops(fresh()))
    print(f"same buffers: {held}")
    print(f"placed anew:  {anew}")


if __name__ == "__main__":
    main()
