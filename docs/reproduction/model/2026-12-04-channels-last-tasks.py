"""One ResNet-18 task lowered both ways: its convolutions in NCHW, and channels-last (NHWC).

``python docs/reproduction/model/2026-12-04-channels-last-tasks.py TRIALS TASK [TASK ...]``:
ResNet-18 (``explorer model example resnet18``) lowered as the import lowers it, without and
with ``channels_last``; each named task tuned by ``evolutionary`` (seed 0) for ``TRIALS``
trials through the real ``Tuner``, ``LocalMeasurer`` and an SQLite store, NCHW first; printed:
each run's best schedule by its fastest repeat, under the task's own protocol (its weights and
output flushed from the caches before each sample).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from explorer.measure import LocalMeasurer
from explorer.model import lower_onnx, model_tasks
from explorer.model._networks import resnet18
from explorer.model._onnx import parse_onnx
from explorer.search import make_strategy
from explorer.storage import environment, get_store
from explorer.target import Target
from explorer.tuner import Tuner


def main(trials: int, names: list[str]) -> None:
    print(f"machine: {environment()['cpu_model']}", flush=True)
    target = Target.local_cpu()
    onnx_file = parse_onnx(resnet18().SerializeToString(), "resnet18")
    tasks = {}
    for label, channels_last in (("NCHW", False), ("NHWC", True)):
        lowered = lower_onnx(onnx_file, "resnet18", channels_last=channels_last)
        tasks[label] = {n: w for n, _, w in model_tasks(lowered, target, "resnet18")}
    with tempfile.TemporaryDirectory() as tmp, LocalMeasurer() as measurer:
        store = get_store(os.path.join(tmp, "tasks.db"))
        tuner = Tuner(measurer=measurer, store=store)
        for name in names:
            for label, found in tasks.items():
                start = time.perf_counter()
                result = tuner.run(
                    found[name], target, make_strategy("evolutionary"), max_trials=trials, seed=0
                )
                best = result.best.result
                print(
                    f"{name} {label}: best {best.fastest_secs * 1e6:.1f} us a call "
                    f"({found[name].flops() / best.fastest_secs / 1e9:.1f} GFLOPS, "
                    f"{best.cache_flush.value} flushed), {trials} trials in "
                    f"{time.perf_counter() - start:.0f} s",
                    flush=True,
                )
        store.close()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
