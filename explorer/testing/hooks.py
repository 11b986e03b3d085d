"""Deliberately broken, but real, kernels and worker hooks for testing measurers.

This module defines a test-only operator family, ``HOOK`` (named ``"hook"``). Its workloads
compile to genuine TVM kernels that misbehave in one chosen way, so a crash or a hang goes
through exactly the path a real candidate takes (``Candidate`` -> ``Measurer.measure`` -> build
worker -> runner worker) with no test-only field on ``Candidate`` and no back door in the
measurer. Importing the module changes nothing; the family is added to
``explorer.workloads.FAMILIES`` only inside ``registered()``, so catalogs stay clean::

    from explorer.testing import hooks
    with hooks.registered():
        w = hooks.hook_workload("crash")      # == get_workload("hook", kind="crash")
        measurer.measure([Candidate(w, target, hooks.unscheduled_trace(w))])

Kinds (one 16-element float32 input ``A``, output ``B``):

* ``ok``: ``B = 2 * A``; the reference agrees.
* ``wrong``: ``B = 2 * A`` but the reference says ``2 * A + 1`` -> ``WRONG_RESULT``.
* ``crash``: ``B[i] = A[i * 10**8]``, a wild read gigabytes past ``A`` -> ``SIGSEGV``.
* ``hang``: a 1e9 x 1e9 reduction per element -> never finishes in practice.
* ``hog``: fills a 1 GiB intermediate buffer -> trips a memory limit below ~1.3 GiB.
* ``jitter``: ``B = 2 * A`` computed by a packed-function call (``UNEVEN_FUNC``) that pauses
  10 ms and 50 ms on alternate calls, so every timing round spreads wide -> ``OK`` and
  ``is_noisy`` (with ``min_repeat_secs=0`` each repeat is one call).
* ``settle``: the same, but alternating only for the first ``SETTLE_CALLS`` calls of the
  process, then a steady 10 ms: the first timing round is noisy, a re-timing is not.
* ``slow``: the same packed function, a steady ``SLOW_CALL_SECS`` (1 s) every call: a kernel
  whose 5 repeats do not fit a short run timeout.

Importing the module registers ``UNEVEN_FUNC``, the packed function those two kernels call, in
TVM's global registry (a test-only name; nothing else uses it).

Measurement workers need no registration: the measurer forwards the module that defines a
workload's family (``Workload.spec.build.__module__``) and a worker imports it and adopts the
``OperatorFamily`` of that name it finds there. Any family defined in an importable module
therefore works in workers.

The plain functions at the bottom are for a worker's ``call`` request
(``"explorer.testing.hooks:allocate_forever"``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.workloads import FAMILIES, OperatorFamily, Params, ShapeParam, Workload, get_workload

KINDS = ("ok", "wrong", "crash", "hang", "hog", "jitter", "settle", "slow")
SIZE = 16
HOG_ELEMENTS = 1 << 28  # 1 GiB of float32, the largest tensor a workload may declare
_WILD_STRIDE = 100_000_000  # 15 * 1e8 still fits int32 index arithmetic; 400 MB per step
# 1e9 x 1e9 iterations per element never finish; at 2e9 it is TVM 0.27's *compiler* that never
# finishes (and grows without bound), which is not what this kernel is meant to test.
_HANG_EXTENT = 1_000_000_000
UNEVEN_FUNC = "explorer.testing.hooks.uneven_double"
# Uneven through the first timing round (the correctness check, which is also the warm-up, the
# untimed call TVM's time_evaluator makes first, then 5 repeats), steady from the second on.
SETTLE_CALLS = 7
_STEADY_SECS, _SLOW_SECS = 0.010, 0.050
SLOW_CALL_SECS = 1.0
_uneven_calls = {"jitter": 0, "settle": 0, "slow": 0}

te = _tvm.te


def _build(p: Params) -> list[Any]:
    kind = p["kind"]
    A = te.placeholder((SIZE,), "float32", name="A")
    if kind == "crash":
        B = te.compute((SIZE,), lambda i: A[i * _WILD_STRIDE], name="B")
    elif kind == "hang":
        k1 = te.reduce_axis((0, _HANG_EXTENT), name="k1")
        k2 = te.reduce_axis((0, _HANG_EXTENT), name="k2")
        B = te.compute(
            (SIZE,),
            lambda i: te.sum(A[(i + k2) % SIZE] * 1.0000001, axis=[k1, k2]),
            name="B",
        )
    elif kind == "hog":
        T = te.compute((HOG_ELEMENTS,), lambda i: A[i % SIZE] + 1.0, name="T")
        B = te.compute((SIZE,), lambda i: T[i * (HOG_ELEMENTS // SIZE)], name="B")
    elif kind in ("jitter", "settle", "slow"):
        B = te.extern(
            (SIZE,),
            [A],
            lambda ins, outs: _tvm.tirx.call_packed(UNEVEN_FUNC, kind, ins[0], outs[0]),
            name="B",
            dtype="float32",
        )
    else:
        B = te.compute((SIZE,), lambda i: A[i] * 2.0, name="B")
    return [A, B]


def _reference(inputs: Sequence[np.ndarray], p: Params) -> np.ndarray:
    a = inputs[0]
    kind = p["kind"]
    if kind in ("ok", "jitter", "settle", "slow"):
        return 2 * a
    if kind == "wrong":
        return 2 * a + 1  # deliberately not what the kernel computes
    if kind == "hog":
        idx = (np.arange(SIZE) * (HOG_ELEMENTS // SIZE)) % SIZE
        return a[idx] + 1
    return np.zeros_like(a)  # crash / hang never get this far


HOOK = OperatorFamily(
    name="hook",
    description="test-only kernels that crash, hang, hog memory or compute the wrong thing",
    params=(ShapeParam("kind", "ok", kind="choice", choices=KINDS, help="how it misbehaves"),),
    build=_build,
    flops=lambda p: 2 * SIZE,  # nominal: the hang kernel's true count would be refused
    reference=_reference,
)


_depth = 0  # nesting of registered()


@contextlib.contextmanager
def registered() -> Iterator[OperatorFamily]:
    """Make the ``hook`` family known to ``get_workload`` for the duration of the block."""
    global _depth
    if FAMILIES.get(HOOK.name, HOOK) is not HOOK:
        raise RuntimeError(f"another operator family is registered as {HOOK.name!r}")
    FAMILIES[HOOK.name] = HOOK
    _depth += 1
    try:
        yield HOOK
    finally:
        _depth -= 1
        if _depth == 0:
            FAMILIES.pop(HOOK.name, None)


def hook_workload(kind: str) -> Workload:
    """The ``hook`` workload of the given kind; call inside ``registered()``."""
    return get_workload("hook", kind=kind)


def unscheduled_trace(workload: Workload) -> Any:
    """The JSON trace of the workload's unscheduled module (replays to the module itself)."""
    return _tvm.trace_to_json(_tvm.Schedule(workload.mod()).trace)


# -- worker ``call`` hooks --------------------------------------------------------------------
def allocate_forever(step_mib: int = 32, pause_secs: float = 0.002) -> None:
    """Allocate and touch memory until killed (for testing memory limits)."""
    hoard = []
    while True:
        hoard.append(np.ones(step_mib << 18, dtype=np.float32))  # touched, so it is resident
        time.sleep(pause_secs)


def _uneven_double(kind: str, a: Any, b: Any) -> None:
    """``b = 2 * a`` after a pause that depends on how often ``kind`` was called here."""
    n = _uneven_calls[kind]
    _uneven_calls[kind] = n + 1
    if kind == "slow":
        time.sleep(SLOW_CALL_SECS)
    else:
        jittery = kind == "jitter" or n < SETTLE_CALLS
        time.sleep(_SLOW_SECS if jittery and n % 2 else _STEADY_SECS)
    b.copyfrom(a.numpy() * 2)


_tvm.tvm.register_global_func(UNEVEN_FUNC, _uneven_double, override=True)


def uneven_calls(kind: str) -> int:
    """How many times this process ran a ``jitter``, ``settle`` or ``slow`` kernel (a ``call``
    hook)."""
    return _uneven_calls[kind]


def sleep(secs: float) -> float:
    time.sleep(secs)
    return secs


def spin(secs: float) -> float:
    """Keep a CPU busy for ``secs`` of this process's own CPU time (not wall time)."""
    start = time.process_time()
    while time.process_time() - start < secs:
        pass
    return secs


def segfault() -> None:
    """Dereference a null pointer: the process dies with SIGSEGV."""
    ctypes.string_at(0)


def getpid() -> int:
    return os.getpid()


def thread_cores() -> dict[str, list[int]]:
    """The cores the calling thread may run on, and those of the process's other threads
    bound to a single core (a ``call`` hook: the thread that handles requests)."""
    bound = []
    for task in os.listdir("/proc/self/task"):
        if int(task) == threading.get_native_id():
            continue
        with open(f"/proc/self/task/{task}/status") as fh:
            cpus = [ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("Cpus_allowed_list")]
        if cpus and cpus[0].isdigit():
            bound.append(int(cpus[0]))
    return {"mine": sorted(os.sched_getaffinity(0)), "bound": sorted(bound)}


def getenv(name: str) -> str | None:
    return os.environ.get(name)
