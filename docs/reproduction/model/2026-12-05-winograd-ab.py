"""Winograd's F(4x4, 3x3) against the direct convolution, layer by layer (channels-last).

``python docs/reproduction/model/2026-12-05-winograd-ab.py [--trials 64] [--seed 0] HxC ...``:
for each HxC, one 3x3 stride-1 convolution of C channels in and out on an HxH input (padding
1) with its ReLU, lowered as a network's is (``lower_relax``, channels-last) once without and
once with ``winograd`` (the one convolution both ways, whatever ``MIN_OUTPUT`` and
``MIN_CHANNELS`` say); each task searched by ``evolutionary`` through one ``Tuner`` at equal
trials, then every row's best three schedules re-timed together in interleaved rounds with one
timer (``benchmarks/_retime.py``). Printed: the target first, then per layer both times, their
GFLOPS counted as the direct convolution's multiply-adds (so that the two compare), and how
many times faster Winograd's is.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from _retime import retime, top_candidates

from explorer import _tvm_winograd
from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.model import lower_onnx, model_tasks
from explorer.model._onnx import parse_onnx
from explorer.onnx_graph import OnnxGraph
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.target import Target
from explorer.tuner import Tuner


def conv_layer(size: int, channels: int) -> bytes:
    g = OnnxGraph(0)
    y = g.op("Relu", [g.conv("x", channels, channels, 3)])
    g.output(y, "y")
    shape = (1, channels, size, size)
    return g.model("conv", ("x", shape), ("y", shape)).SerializeToString()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("layers", nargs="+", help="HxC: input height (and width) x channels")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    target = Target.local_cpu()
    print(f"target {target} {target.to_tvm_dict()}", flush=True)
    # every layer asked for, whatever the thresholds the lowering applies
    _tvm_winograd.MIN_OUTPUT = _tvm_winograd.MIN_CHANNELS = 1
    with tempfile.TemporaryDirectory() as tmp, LocalMeasurer(MeasureConfig(repeat=5)) as m:
        store = get_store(Path(tmp) / "ab.db")
        tuner = Tuner(measurer=m, store=store, batch_size=8, confirm_top=3)
        for layer in args.layers:
            size, channels = (int(v) for v in layer.split("x"))
            onnx_file = parse_onnx(conv_layer(size, channels), "conv")
            rows = []
            for winograd in (False, True):
                lowered = lower_onnx(onnx_file, "conv", winograd=winograd)
                ((name, _, workload),) = [
                    t for t in model_tasks(lowered, target, "conv") if "conv2d" in t[0]
                ]
                start = time.monotonic()
                strategy = make_strategy("evolutionary")
                run = tuner.run(workload, target, strategy, max_trials=args.trials, seed=args.seed)
                print(f"{layer} {name}: {time.monotonic() - start:.0f} s", flush=True)
                rows.append(run.run.id)
            timed = retime(m, [(r, top_candidates(store, r, args.trials)) for r in rows])
            direct, wino = (timed.best_secs.get(r) for r in rows)
            flops = 2 * size * size * channels * channels * 9
            if not direct or not wino:
                print(f"{layer}: a row has no timed schedule ({direct}, {wino})", flush=True)
                continue
            print(
                f"{layer}: direct {direct * 1e6:.1f} us ({flops / direct / 1e9:.0f} GFLOPS), "
                f"Winograd {wino * 1e6:.1f} us ({flops / wino / 1e9:.0f} GFLOPS as the direct "
                f"one's work): {direct / wino:.2f}x; {timed.describe()}",
                flush=True,
            )


if __name__ == "__main__":
    main()
