"""Running one built kernel on a fleet device, inside a measurement worker (``op="remote_run"``).

The worker asks the tracker for a free device of the key, uploads the ``.so`` the builder
wrote, runs it once on the host's inputs and checks the output here against NumPy, then times
it on the device with the same protocol as a local run (``_timing``: untimed warm-up, rounds
of repeats until one is tight enough). Everything that talks to the network runs in the worker,
so a device that hangs or vanishes can at worst cost the worker, never the caller.

The reply says what happened in ``stage`` when it is not ``ok``: ``"queue"`` (no device became
free in time), ``"lost"`` (the device or tracker went away, or refused: worth another try on
another device), ``"timeout"`` (the device ended the session at its time limit: the kernel
hangs), ``"wrong"`` (the output differs from NumPy) or ``"run"`` (the kernel failed).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.errors import FleetError
from explorer.fleet._tracker import QueueTimeout, TrackerAddress, device_info, open_session
from explorer.measure._timing import message, time_main

Reference = Callable[[Any, int, bool], tuple[list[Any], Any]]


def run_on_device(req: dict[str, Any], workload: Any, reference: Reference) -> dict[str, Any]:
    address = TrackerAddress.parse(req["tracker"])
    try:
        session, device = open_session(
            address,
            req["key"],
            session_timeout=float(req["session_timeout"]),
            queue_timeout=float(req["queue_timeout"]),
        )
    except QueueTimeout as exc:
        return {"ok": False, "stage": "queue", "error": str(exc), "device": None}
    except FleetError as exc:
        return {"ok": False, "stage": "lost", "error": str(exc), "device": None}
    try:
        reply = _run(session, req, workload, reference)
    except Exception as exc:  # noqa: BLE001  (classified below; the worker must answer)
        reply = {"ok": False, "stage": _stage_of(exc, session), "error": message(exc)}
    finally:
        with contextlib.suppress(Exception):
            del session  # ends the session, so the server serves the next request
    reply["device"] = device
    return reply


def _run(session: Any, req: dict[str, Any], workload: Any, reference: Reference) -> dict[str, Any]:
    tvm = _tvm.tvm
    info = device_info(session)
    if req.get("num_threads"):
        session.get_function("runtime.config_threadpool")(0, int(req["num_threads"]))
    session.upload(req["path"])
    module = session.load_module(os.path.basename(req["path"]))
    dev = session.cpu(0)
    check = bool(req.get("check", True))
    inputs, expected = reference(workload, int(req.get("seed", 0)), check)
    shape, dtype = workload.output_spec()
    fill = np.nan if np.dtype(dtype).kind == "f" else 0  # as local runs: skipped elements show
    out = tvm.runtime.tensor(np.full(shape, fill, dtype=dtype), dev)
    args = [tvm.runtime.tensor(x, dev) for x in inputs] + [out]
    if check:
        module["main"](*args)
        mismatch = workload.check_output(out.numpy(), expected)
        if mismatch is not None:
            return {"ok": False, "stage": "wrong", "error": mismatch}
    warmup_ms = int(round(float(req.get("warmup_secs", 0.0)) * 1000))
    # On the device, not one RPC call per run: a warm-up loop over the network would time the
    # network.
    module.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=max(warmup_ms, 1))(*args)
    run_secs, rounds = time_main(module, dev, args, req)
    threads = int(session.get_function("runtime.NumThreads")())
    return {
        "ok": True,
        "run_secs": run_secs,
        "timing_rounds": rounds,
        "num_threads": threads,
        "device_info": info,
    }


def _stage_of(exc: BaseException, session: Any) -> str:
    """``"timeout"``, ``"lost"`` or ``"run"`` for an exception raised during a session."""
    if "RPCSessionTimeoutError" in str(exc):
        return "timeout"
    try:  # a session that still answers had a kernel fail; one that does not, lost its device
        session.get_function("runtime.NumThreads")()
    except Exception:  # noqa: BLE001
        return "lost"
    return "run"
