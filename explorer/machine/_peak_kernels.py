"""The kernels that measure the machine, compiled by TVM (run in a child: ``_peak`` starts it).

``python -m explorer.machine._peak_kernels '<target json>' [TRACKER KEY]`` prints one JSON line:
``{"gflops_f32": ..., "bandwidth_gbs": ..., "num_threads": ..., "busy_elsewhere": ...}``, the
last being the share of the CPUs' time that other processes used meanwhile (0 to 1; null on a
fleet device, whose other work the host cannot see). With ``TRACKER KEY`` the kernels are
compiled here for the target and run on a free device of the key (``explorer fleet``), as
searches measure there.

* Peak: each core keeps ``ACCUMULATORS`` independent vector registers and updates them with
  ``acc = acc * a + b`` (LLVM fuses this into one FMA), enough of them in flight to hide the
  FMA latency; nothing touches memory inside the loop, so the rate is the FMA units' rate.
* Bandwidth: a STREAM-style triad ``x = y + 3 z`` over arrays far larger than the last-level
  cache, counted as STREAM counts it (three arrays of bytes per pass, write-allocate excluded).

Both are timed with TVM's ``time_evaluator`` on all the target's cores, call by call (a few
milliseconds each); the fastest call is kept, since a peak is the best sustained rate and a
slower call is the machine doing something else (on a shared machine, another process).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

from explorer.machine._busy import BUSY, BusyElsewhere
from explorer.target import Target

ACCUMULATORS = 12  # > FMA latency (4 cycles) x FMA units (2), and fits in 16 AVX2 registers
FMA_STEPS = 300_000  # per call: ~1 ms at 1 FMA a cycle and 3.6 GHz
TRIAD_BYTES = 64 << 20  # per array: far beyond any L3 this targets
# Many short calls, each timed alone: on a shared machine the best of them is the one that had
# every core to itself (short calls fit between other processes' time slices). Rounds go on
# while the best still improves (by more than 2 %).
CALLS_PER_ROUND = 30
MAX_ROUNDS = 4
# While other processes use BUSY or more of the CPUs' time, measure again (ATTEMPTS in all),
# keeping the fastest call of all attempts.
ATTEMPTS = 4
REMOTE_SESSION_SECS = 240  # the device ends the session then (below _peak's child timeout)


def fma_source(cores: int, lanes: int) -> str:
    width = ACCUMULATORS * lanes
    body = f"acc[u * {lanes} + l]"
    return f"""
@T.prim_func
def main(A: T.Buffer(({cores}, {width}), "float32")):
    T.func_attr({{"global_symbol": "main", "tirx.noalias": True}})
    for p in T.parallel({cores}):
        acc = T.decl_buffer(({width},), "float32", scope="local")
        for u in T.unroll({ACCUMULATORS}):
            for l in T.vectorized({lanes}):
                {body} = A[p, u * {lanes} + l]
        for n in range({FMA_STEPS}):
            for u in T.unroll({ACCUMULATORS}):
                for l in T.vectorized({lanes}):
                    {body} = {body} * T.float32(0.999) + T.float32(0.001)
        for u in T.unroll({ACCUMULATORS}):
            for l in T.vectorized({lanes}):
                A[p, u * {lanes} + l] = {body}
"""


def fma_flops(cores: int, lanes: int) -> float:
    """Floating-point operations of one call of ``fma_source(cores, lanes)``."""
    return 2.0 * lanes * ACCUMULATORS * FMA_STEPS * cores


def fma_probe(target: Target) -> tuple[Callable[[], Any], float]:
    """The peak's FMA kernel, compiled for ``target`` and bound to this machine's CPU: (a call
    of it, its floating-point operations). A model race times it in each round beside its
    contenders (``explorer.model``): how fast the machine ran then, against the kept peak."""
    from explorer import _tvm

    tvm = _tvm.tvm
    cores, lanes = target.num_cores, max(target.vector_lanes_f32, 1)
    module = _tvm.compile_mod(_tvm.parse_tvmscript(fma_source(cores, lanes)), target.to_tvm()).mod
    accumulators = tvm.runtime.tensor(np.ones((cores, ACCUMULATORS * lanes), "float32"), tvm.cpu())
    main = module["main"]
    return (lambda: main(accumulators)), fma_flops(cores, lanes)


def forkjoin_probe(target: Target) -> Callable[[], Any]:
    """A kernel that does next to nothing on each of ``target``'s cores, bound to this
    machine's CPU: a call of it is the time its threads take to start each other and meet
    again. A model race times it in each round: on this project's development VM it read
    0.54-1.09 µs for a while, then 1.24-1.40 µs for 30 s and more (the host placing the two
    virtual CPUs farther apart), and the tiny network's 2-thread build read 128 and 155 µs
    with it."""
    from explorer import _tvm

    tvm = _tvm.tvm
    cores = target.num_cores
    source = f"""
@T.prim_func
def main(A: T.Buffer(({cores}, 16), "float32")):
    T.func_attr({{"global_symbol": "main", "tirx.noalias": True}})
    for p in T.parallel({cores}):
        for l in range(16):
            A[p, l] = A[p, l] + T.float32(1)
"""
    module = _tvm.compile_mod(_tvm.parse_tvmscript(source), target.to_tvm()).mod
    counters = tvm.runtime.tensor(np.zeros((cores, 16), "float32"), tvm.cpu())
    main = module["main"]
    return lambda: main(counters)


def triad_source(lanes: int, n: int) -> str:
    return f"""
@T.prim_func
def main(X: T.Buffer(({n},), "float32"), Y: T.Buffer(({n},), "float32"),
         Z: T.Buffer(({n},), "float32")):
    T.func_attr({{"global_symbol": "main", "tirx.noalias": True}})
    for i in T.parallel({n // lanes}):
        for l in T.vectorized({lanes}):
            X[i * {lanes} + l] = Y[i * {lanes} + l] + T.float32(3) * Z[i * {lanes} + l]
"""


def measure(target_json: dict[str, Any], device: tuple[str, str] | None = None) -> dict[str, Any]:
    """Measure on this machine's cores, or on a fleet device: ``device`` = (tracker, key)."""
    from explorer import _tvm

    tvm = _tvm.tvm
    target = Target.from_json(target_json)
    if device is None:
        return _measure(
            target, tvm.cpu(), lambda ex: ex.mod, BusyElsewhere, tvm.runtime.num_threads
        )
    with tempfile.TemporaryDirectory(prefix="explorer-peak-") as folder:
        session, load = _remote(device, folder)
        # The host cannot tell the device's other work from the kernels (on this machine it
        # would count the device's own process): one attempt, what else ran there unknown.
        return _measure(
            target, session.cpu(0), load, None, session.get_function("runtime.NumThreads")
        )


def _remote(device: tuple[str, str], folder: str) -> tuple[Any, Callable[[Any], Any]]:
    """A session on a free device of the key, and ``load``: export a module, upload, load."""
    from explorer.core import TrackerAddress, open_session

    tracker, key = device
    session, _ = open_session(
        TrackerAddress.parse(tracker), key, session_timeout=REMOTE_SESSION_SECS, queue_timeout=60
    )
    count = itertools.count()

    def load(ex: Any) -> Any:
        path = os.path.join(folder, f"peak{next(count)}.so")
        ex.mod.export_library(path)
        session.upload(path)
        return session.load_module(os.path.basename(path))

    return session, load


def _measure(
    target: Any,
    dev: Any,
    load: Callable[[Any], Any],
    busy: Callable[[], BusyElsewhere] | None,
    threads: Callable[[], Any],
) -> dict[str, Any]:
    from explorer import _tvm

    tvm = _tvm.tvm
    cores, lanes = target.num_cores, max(target.vector_lanes_f32, 1)

    def compiled(source: str, *arrays: np.ndarray) -> tuple[Any, list[Any]]:
        module = load(_tvm.compile_mod(_tvm.parse_tvmscript(source), target.to_tvm()))
        args = [tvm.runtime.tensor(a, dev) for a in arrays]
        timer = module.time_evaluator("main", dev, number=1, repeat=CALLS_PER_ROUND)
        timer(*args)  # warm-up: the thread pool starts and the clocks ramp up
        return timer, args

    def fastest_call(timer: Any, args: list[Any]) -> float:
        best = float("inf")
        for _ in range(MAX_ROUNDS):
            fastest = float(min(timer(*args).results))
            if fastest > best * 0.98:
                break
            best = fastest
        return min(best, fastest)

    n = TRIAD_BYTES // 4 // lanes * lanes
    fma = compiled(fma_source(cores, lanes), np.ones((cores, ACCUMULATORS * lanes), "float32"))
    triad = compiled(
        triad_source(lanes, n),
        np.zeros(n, "float32"),
        np.ones(n, "float32"),
        np.full(n, 2.0, "float32"),
    )
    fma_secs = triad_secs = float("inf")
    busy_elsewhere: float | None = None
    for _ in range(ATTEMPTS if busy else 1):  # again only while other processes keep it busy
        watch = busy() if busy else None
        fma_secs = min(fma_secs, fastest_call(*fma))
        triad_secs = min(triad_secs, fastest_call(*triad))
        if watch is not None:
            busy_elsewhere = watch.share()
            if busy_elsewhere < BUSY:
                break

    out = fma[1][0].numpy()
    if not np.allclose(out, 1.0):  # 1 is the fixed point of acc * 0.999 + 0.001
        raise RuntimeError(f"the FMA kernel computed {out.ravel()[:4]}, not 1.0")
    if not (triad[1][0].numpy() == 7.0).all():  # 1 + 3 * 2
        raise RuntimeError("the triad kernel computed a wrong result")
    return {
        "gflops_f32": fma_flops(cores, lanes) / fma_secs / 1e9,
        "bandwidth_gbs": 3 * 4 * n / triad_secs / 1e9,
        "num_threads": int(threads()),
        "busy_elsewhere": busy_elsewhere,
    }


if __name__ == "__main__":
    # argv: TARGET_JSON [TRACKER KEY]
    remote = (sys.argv[2], sys.argv[3]) if len(sys.argv) == 4 else None
    print(json.dumps(measure(json.loads(sys.argv[1]), remote)))
