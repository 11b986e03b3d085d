"""A measurement worker process: ``python -m explorer.measure._worker --role build|run``.

The parent (``explorer.core._pool``) starts a few of these once and reuses them, each a fork
of the parent's fork server (``explorer.core._forkserver``), which imported this module and TVM
already; ``python -m`` runs it the same way, by hand. Everything
that could take a process down (TVM's compiler, the generated kernels) runs here, never in the
caller, which may be a notebook kernel.

Protocol: the parent writes requests to the worker's stdin and reads replies from its stdout,
one pickled ``dict`` per message, each preceded by its length as an 8-byte big-endian integer.
The worker answers every request with exactly one reply, in order, and announces itself first
with ``{"ok": True, "ready": True, "pid": ...}`` once TVM is imported, so that start-up time is
never charged to a candidate's timeout. Requests (``op``):

* ``build``: rebuild the workload's module (cached by ``Workload.mod``), replay the JSON trace,
  compile for the target and ``export_library`` to ``path``. Reply ``build_secs`` or an error
  with ``stage`` = ``"apply"`` (the trace does not replay) or ``"compile"``. A network's task
  whose schedule copies its weights into another layout is built as the network runs it: the
  kernel, and the copies apart (``split_weight_copies``); the reply's ``prepacked`` (else
  ``None``) says how to call them, and the run request passes it on.
* ``run``: load the shared library (cached) for ``device`` (``"cpu"``, or ``"cuda"``: a CUDA
  target's module holds CUDA source, which TVM compiles for the GPU as it loads), run once on
  ``Workload.random_inputs(seed)`` and compare with the NumPy reference (cached) --
  ``stage="wrong"`` on a mismatch -- run it untimed for ``warmup_secs``, then time it with
  ``time_evaluator``, again (up to ``timing_rounds`` rounds) while the repeats spread more
  than ``max_spread``. Reply ``run_secs`` (one per repeat, of the tightest round),
  ``timing_rounds`` (how many ran) and ``num_threads``.
* ``remote_run``: run a built ``.so`` on a device of a TVM RPC tracker (``_remote_run``): the
  same check and timing as ``run``, on the device; the reply also names the device.
* ``replay``: replay an untrusted JSON trace on a module (``save_json`` text) and reply the
  decisions TVM used (``explorer.session._trace_check``): if the trace kills TVM, it kills
  this process only.
* ``call``: run ``"module:function"`` with ``args``/``kwargs`` and reply its ``value``.
  Diagnostics and tests only (``explorer.testing.hooks``).
* ``exit``: leave. End of input means the same.

File descriptor 1 is redirected to stderr after the protocol stream is set aside, so stray
output from TVM or LLVM cannot corrupt the message stream.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

import numpy as np
import threadpoolctl

from explorer import _tvm
from explorer.core import leave_session, read_message, write_message
from explorer.measure._timing import keep_off_worker_cores, kernel_args, time_main
from explorer.measure._timing import message as _message
from explorer.measure._timing import warm_up as _warm_up
from explorer.session import replay_decisions
from explorer.target import Target
from explorer.workloads import FAMILIES, OperatorFamily, Workload

_MODULE_CACHE_SIZE = 16
# TVM compiles a CUDA schedule with no loop bound to blockIdx/threadIdx into a host function
# that reads the GPU's buffers from the CPU (verified: no CUDA module at all): it would crash.
NO_GPU_KERNEL = (
    "no loop is bound to a GPU block or thread (bind an outer loop to blockIdx.x and an inner "
    "one to threadIdx.x): TVM compiled it as host code, which cannot run on GPU buffers"
)
_REFERENCE_CACHE_SIZE = 8


# -- worker state -----------------------------------------------------------------------------
class _Worker:
    def __init__(self, role: str, memory_limit_bytes: int) -> None:
        self.role = role
        self.memory_limit_bytes = memory_limit_bytes
        self.tvm = _tvm
        self.pinned = False  # whether this thread was kept off TVM's worker cores yet
        self.targets: dict[str, Any] = {}
        self.modules: collections.OrderedDict[str, Any] = collections.OrderedDict()
        # (workload key, seed) -> (inputs, NumPy's reference output or None)
        self.references: collections.OrderedDict[tuple[str, int], tuple[list[Any], Any]] = (
            collections.OrderedDict()
        )

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "build":
            return self.build(req)
        if op == "run":
            return self.run(req)
        if op == "remote_run":
            from explorer.measure._remote_run import run_on_device

            return run_on_device(req, self.workload, self.reference)
        if op == "call":
            return self.call(req)
        if op == "replay":
            return replay_decisions(self.tvm.load_json(req["mod"]), req["trace"])
        return {"ok": False, "stage": "protocol", "error": f"unknown request {op!r}"}

    # -- helpers ------------------------------------------------------------------------------
    def workload(self, req: dict[str, Any]) -> Any:
        # A family defined outside the catalog (e.g. explorer.testing.hooks) is adopted from
        # the module that defines it; the caller may have registered it only for a while.
        name = req["workload"].get("family")
        if req.get("family_module") and name not in FAMILIES:
            module = importlib.import_module(req["family_module"])
            for value in vars(module).values():
                if isinstance(value, OperatorFamily) and value.name == name:
                    FAMILIES[name] = value
                    break
        return Workload.from_json(req["workload"])

    def target(self, spec: dict[str, Any]) -> Any:
        key = repr(sorted(spec.items()))
        if key not in self.targets:
            self.targets[key] = Target.from_json(spec).to_tvm()
        return self.targets[key]

    # -- operations ---------------------------------------------------------------------------
    def build(self, req: dict[str, Any]) -> dict[str, Any]:
        tvm = self.tvm
        start = time.perf_counter()
        workload = self.workload(req)
        sch = tvm.Schedule(workload.mod())
        try:
            tvm.apply_trace_json(req["trace"], sch)
        except Exception as exc:  # noqa: BLE001  (any failure to replay is the candidate's)
            return {"ok": False, "stage": "apply", "error": _message(exc)}
        try:
            split = tvm.split_weight_copies(sch.mod)
            mod, prepacked = split if split is not None else (sch.mod, None)
            executable = tvm.compile_mod(mod, self.target(req["target"]))
            if req["target"].get("kind") == "cuda" and not executable.mod.imports:
                return {"ok": False, "stage": "compile", "error": NO_GPU_KERNEL}
            executable.export_library(req["path"])
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "stage": "compile", "error": _message(exc)}
        return {"ok": True, "build_secs": time.perf_counter() - start, "prepacked": prepacked}

    def load(self, path: str) -> Any:
        module = self.modules.pop(path, None)
        if module is None:
            module = self.tvm.tvm.runtime.load_module(path)
        self.modules[path] = module
        while len(self.modules) > _MODULE_CACHE_SIZE:
            self.modules.popitem(last=False)
        return module

    def reference(self, workload: Any, seed: int, check: bool) -> tuple[list[Any], Any]:
        key = (workload.key(), seed)
        entry = self.references.pop(key, None)
        if entry is None or (check and entry[1] is None):
            inputs = workload.random_inputs(seed)
            entry = (inputs, workload.reference(inputs) if check else None)
        self.references[key] = entry
        while len(self.references) > _REFERENCE_CACHE_SIZE:
            self.references.popitem(last=False)
        return entry

    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        tvm = self.tvm.tvm
        workload = self.workload(req)
        check = bool(req.get("check", True))
        own = bool(req.get("own_reference", False))  # _base.is_own_reference
        try:
            if req.get("device") == "cuda":
                self.tvm.ensure_cuda_jit()
            module = self.load(req["path"])
            inputs, expected = self.reference(workload, int(req.get("seed", 0)), check and not own)
            dev = tvm.device(str(req.get("device", "cpu")), 0)
            shape, dtype = workload.output_spec()
            # NaN (not zeros) in the output buffer, so a kernel that skips elements is caught.
            fill = np.nan if np.dtype(dtype).kind == "f" else 0
            out = tvm.runtime.tensor(np.full(shape, fill, dtype=dtype), dev)
            args = kernel_args(module, dev, inputs, out, req.get("prepacked"))
            checked_secs = 0.0
            if check:
                before = time.perf_counter()
                module["main"](*args)
                dev.sync()  # a GPU launches asynchronously: the call's time is to its end
                checked_secs = time.perf_counter() - before  # also warmed it up
                mismatch = None if own else workload.check_output(out.numpy(), expected)
                if mismatch is not None:
                    return {"ok": False, "stage": "wrong", "error": mismatch}
            if not self.pinned and req.get("device", "cpu") == "cpu":
                # Until it worked: TVM's thread pool exists only once a parallel kernel ran
                # (a tune times the unscheduled program, with no parallel loop, first).
                self.pinned = keep_off_worker_cores() is not None
            warmup = float(req.get("warmup_secs", 0.0))
            call_secs = _warm_up(module["main"], args, warmup, done_secs=checked_secs)
            dev.sync()  # a GPU runs the warm-up's launches asynchronously: all done first
            run_secs, rounds = time_main(
                module, dev, args, req, first_call_secs=checked_secs, call_secs=call_secs
            )
        except Exception as exc:  # noqa: BLE001
            msg = _message(exc)
            if isinstance(exc, MemoryError) or "alloc" in msg.lower():
                limit = self.memory_limit_bytes >> 20
                msg += f"\n(allocation failed under the worker's memory limit of {limit} MiB)"
            return {"ok": False, "stage": "run", "error": msg}
        return {
            "ok": True,
            "run_secs": run_secs,
            "timing_rounds": rounds,
            "num_threads": int(tvm.runtime.num_threads()),
        }

    def call(self, req: dict[str, Any]) -> dict[str, Any]:
        module_name, _, func_name = str(req["target"]).partition(":")
        try:
            func = getattr(importlib.import_module(module_name), func_name)
            value = func(*req.get("args", ()), **req.get("kwargs", {}))
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "stage": "call", "error": _message(exc)}
        return {"ok": True, "value": value}


def _limit_memory(limit_bytes: int) -> None:
    """A second line behind the parent's RSS polling: refuse allocations far past the limit.

    RLIMIT_DATA counts reserved (not only touched) memory, and TVM plus LLVM already reserve a
    lot, so the cap is the current data size plus twice the limit. The parent's poll catches the
    normal case precisely; this catches one huge allocation that the poll would only see late.
    """
    if limit_bytes <= 0:
        return
    try:
        import resource

        with open("/proc/self/status") as fh:
            vm_data = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmData"))
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        cap = vm_data + 2 * limit_bytes
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    except (OSError, ValueError, StopIteration, ImportError):
        pass  # not Linux, or not allowed: the parent's RSS poll still applies


def _watch_parent(parent_pid: int) -> None:
    """Exit when the parent is gone, even while a hung kernel keeps the main thread busy."""

    def loop() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(3)

    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.measure._worker")
    parser.add_argument("--role", choices=("build", "run"), required=True)
    parser.add_argument("--memory-limit-bytes", type=int, default=0)
    opts = parser.parse_args(argv)

    # The parent decides when a worker dies; a Ctrl-C in the terminal or notebook is its business.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    proto_in = sys.stdin.buffer
    _watch_parent(os.getppid())
    # NumPy's BLAS (the reference outputs) was loaded by the fork server, before this worker's
    # thread count was in the environment.
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        threadpoolctl.threadpool_limits(int(os.environ["OMP_NUM_THREADS"]))

    if opts.role == "run":  # its kernels' threads share the cores as a group of their own
        leave_session()
    worker = _Worker(opts.role, opts.memory_limit_bytes)
    _limit_memory(opts.memory_limit_bytes)
    write_message(proto_out, {"ok": True, "ready": True, "pid": os.getpid()})
    while True:
        req = read_message(proto_in)
        if req is None or req.get("op") == "exit":
            # Skip the interpreter's teardown: unloading TVM and LLVM takes ~0.25 s a worker,
            # and the parent waits for it when it closes the pool. Nothing here needs finalizing.
            sys.stderr.flush()
            os._exit(0)
        try:
            reply = worker.handle(req)
        except Exception:  # noqa: BLE001  (report, stay alive: the parent decides)
            reply = {"ok": False, "stage": "internal", "error": traceback.format_exc()}
        write_message(proto_out, reply)


if __name__ == "__main__":
    sys.exit(main())
