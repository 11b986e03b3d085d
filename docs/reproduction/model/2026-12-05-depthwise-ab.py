"""What the packed sketches add on MobileNetV2's depthwise convolutions (channels-last).

``python docs/reproduction/model/2026-12-05-depthwise-ab.py [--trials 64] [--seeds 0 1]
[--strategy evolutionary] TASK ...``: each TASK (a prefix of a task name of the channels-last
MobileNetV2, e.g. ``fused_conv2d7_``) is searched twice per seed through one ``Tuner``, at equal
trials: in its whole design space (MetaSchedule's sketches and the packed ones) and in
MetaSchedule's alone (``DesignSpace.metaschedule_only``). Every row's best three schedules are
then re-timed in interleaved rounds with one timer (``benchmarks/_retime.py``, as
``bench_packing.py`` does), and the ratio packed / MetaSchedule-only is printed per task and
seed, with the target (its CPU) first.
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

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.model import lower_onnx, model_tasks
from explorer.model._networks import mobilenet_v2
from explorer.model._onnx import parse_onnx
from explorer.search import make_strategy
from explorer.space import DesignSpace
from explorer.storage import get_store
from explorer.target import Target
from explorer.tuner import Tuner


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tasks", nargs="+", help="prefixes of task names")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--strategy", default="evolutionary")
    args = p.parse_args()
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    target = Target.local_cpu()
    print(f"target {target} {target.to_tvm_dict()}", flush=True)
    onnx_file = parse_onnx(mobilenet_v2().SerializeToString(), "mobilenet_v2")
    lowered = lower_onnx(onnx_file, "mobilenet_v2", channels_last=True)
    found = {name: w for name, _, w in model_tasks(lowered, target, "mobilenet_v2")}
    with tempfile.TemporaryDirectory() as tmp, LocalMeasurer(MeasureConfig(repeat=5)) as m:
        store = get_store(Path(tmp) / "ab.db")
        tuner = Tuner(measurer=m, store=store, batch_size=8, confirm_top=3)
        for prefix in args.tasks:
            name = next((n for n in found if n.startswith(prefix)), None)
            if name is None:
                sys.exit(f"MobileNetV2 has no task starting with {prefix!r}")
            workload = found[name]
            space = DesignSpace.of(workload, target)
            rows = []
            for seed in args.seeds:
                for packed in (False, True):
                    start = time.monotonic()
                    run = tuner.run(
                        workload,
                        target,
                        make_strategy(args.strategy),
                        max_trials=args.trials,
                        seed=seed,
                        space=space if packed else space.metaschedule_only(),
                    ).run
                    rows.append((seed, packed, run.id))
                    print(
                        f"{name} seed {seed} {'packed' if packed else 'MS only'}: "
                        f"{time.monotonic() - start:.0f} s",
                        flush=True,
                    )
            timed = retime(m, [(r, top_candidates(store, r, args.trials)) for _, _, r in rows])
            best = {(s, k): timed.best_secs.get(r) for s, k, r in rows}
            for seed in args.seeds:
                alone, packed = best[(seed, False)], best[(seed, True)]
                gflops = [workload.flops() / s / 1e9 if s else 0.0 for s in (alone, packed)]
                ratio = f"{alone / packed:.2f}x" if alone and packed else "n/a"
                print(
                    f"{name} seed {seed}: MS only {1e6 * (alone or 0):.1f} us "
                    f"({gflops[0]:.0f} GFLOPS), packed {1e6 * (packed or 0):.1f} us "
                    f"({gflops[1]:.0f} GFLOPS): packed is {ratio} faster",
                    flush=True,
                )


if __name__ == "__main__":
    main()
