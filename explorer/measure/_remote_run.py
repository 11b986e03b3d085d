"""Running one built kernel on a fleet device, inside a measurement worker (``op="remote_run"``).

The worker asks the tracker for a free device of the key, uploads the ``.so`` files the builders
wrote, runs each once on the host's inputs and checks the output here against NumPy, then times
it on the device with the same protocol as a local run (``_timing``: untimed warm-up, rounds
of repeats until one is tight enough). A request holds one kernel or several, timed ``rounds``
times round-robin in the same session. Everything that talks to the network runs in the worker,
so a device that hangs or vanishes can at worst cost the worker, never the caller.

Each item's reply says what happened in ``stage`` when it is not ``ok``: ``"queue"`` (no device
became free in time), ``"lost"`` (the device or tracker went away, or refused: worth another try
on another device), ``"timeout"`` (the device ended the session at its time limit: the kernel
hangs), ``"wrong"`` (the output differs from NumPy) or ``"run"`` (the kernel failed).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.core import (
    QueueTimeout,
    TrackerAddress,
    device_info,
    keep_launcher_off_workers,
    open_session,
)
from explorer.errors import FleetError
from explorer.measure._timing import kernel_args, message, time_main

Reference = Callable[[Any, int, bool], tuple[list[Any], Any]]


def run_on_device(
    req: dict[str, Any], workload_of: Callable[[dict[str, Any]], Any], reference: Reference
) -> dict[str, Any]:
    """Run ``req["items"]`` (built kernels) in one session on one device, ``req["rounds"]``
    times each, round-robin; reply the device and one reply per item."""
    address = TrackerAddress.parse(req["tracker"])
    items: list[dict[str, Any]] = req["items"]
    try:
        session, device = open_session(
            address,
            req["key"],
            session_timeout=float(req["session_timeout"]),
            queue_timeout=float(req["queue_timeout"]),
        )
    except QueueTimeout as exc:
        return _all(items, None, {"ok": False, "stage": "queue", "error": str(exc)})
    except FleetError as exc:
        return _all(items, None, {"ok": False, "stage": "lost", "error": str(exc)})
    try:
        replies = _run_items(session, req, items, workload_of, reference)
    finally:
        with contextlib.suppress(Exception):
            del session  # ends the session, so the server serves the next request
    return {"device": device, "items": replies}


def _all(items: list[dict[str, Any]], device: str | None, reply: dict[str, Any]) -> dict[str, Any]:
    return {"device": device, "items": [dict(reply) for _ in items]}


def _run_items(
    session: Any,
    req: dict[str, Any],
    items: list[dict[str, Any]],
    workload_of: Callable[[dict[str, Any]], Any],
    reference: Reference,
) -> list[dict[str, Any]]:
    """Each item's reply: its repeats of every round, or why it failed. When the session
    itself is lost, every item not failed yet is ``"lost"`` (to be tried again, whole)."""
    try:
        info = device_info(session)
        if req.get("num_threads"):
            session.get_function("runtime.config_threadpool")(0, int(req["num_threads"]))
        kind = str(req.get("device", "cpu"))
        dev = session.device(kind, 0)
        if not dev.exist:  # a device of the key has no GPU: none of the key has (not retried)
            why = f"the device has no {kind.upper()} device 0 to run these kernels on"
            return [{"ok": False, "stage": "run", "error": why} for _ in items]
    except Exception as exc:  # noqa: BLE001
        return [{"ok": False, "stage": "lost", "error": message(exc)} for _ in items]
    # The session's thread launches the kernels: kept off TVM's worker cores once their pool
    # exists (a kernel ran), as local runs do. Nothing to do on one thread; a plain TVM server
    # (no device_info) cannot.
    pinned = kind != "cpu" or int(info.get("threads") or 1) < 2
    ready: list[tuple[Any, list[Any], float, float] | None] = [None] * len(items)
    replies: list[dict[str, Any]] = [
        {"ok": True, "round_secs": [], "timing_rounds": 0, "device_info": info} for _ in items
    ]
    for _ in range(int(req.get("rounds", 1))):
        for k, item in enumerate(items):
            if not replies[k]["ok"]:
                continue  # failed in an earlier round: its failure is the result
            try:
                if ready[k] is None:
                    ready[k], failure = _prepare(session, dev, item, req, workload_of, reference)
                    if failure is not None:
                        replies[k] = failure
                        continue
                    pinned = pinned or keep_launcher_off_workers(session)
                module, args, first_secs, call_secs = ready[k]  # type: ignore[misc]  # set just above when it was None
                run_secs, rounds = time_main(
                    module, dev, args, req, first_call_secs=first_secs, call_secs=call_secs
                )
            except Exception as exc:  # noqa: BLE001  (classified: the worker must answer)
                stage = _stage_of(exc, session)
                replies[k] = {"ok": False, "stage": stage, "error": message(exc)}
                if stage != "run":  # the session is gone: whatever has not failed is lost
                    for j, r in enumerate(replies):
                        if r["ok"]:
                            replies[j] = {"ok": False, "stage": "lost", "error": message(exc)}
                    return replies
                continue
            replies[k]["round_secs"].append(run_secs)
            replies[k]["timing_rounds"] = max(replies[k]["timing_rounds"], rounds)
    threads = int(session.get_function("runtime.NumThreads")())
    for r in replies:
        r.setdefault("num_threads", threads)
    return replies


def _prepare(
    session: Any,
    dev: Any,
    item: dict[str, Any],
    req: dict[str, Any],
    workload_of: Callable[[dict[str, Any]], Any],
    reference: Reference,
) -> tuple[tuple[Any, list[Any], float, float] | None, dict[str, Any] | None]:
    """Upload and load an item's kernel, check its output (when asked) and warm it up: the
    module, its arguments, how long the check's call took (a round trip to the device
    included; 0 without a check) and the warm-up's mean call, or the reply of a wrong result."""
    tvm = _tvm.tvm
    workload = workload_of(item)
    session.upload(item["path"])
    module = session.load_module(os.path.basename(item["path"]))
    check = bool(item.get("check", True))
    own = bool(item.get("own_reference", False))  # _base.is_own_reference
    inputs, expected = reference(workload, int(req.get("seed", 0)), check and not own)
    shape, dtype = workload.output_spec()
    fill = np.nan if np.dtype(dtype).kind == "f" else 0  # as local runs: skipped elements show
    out = tvm.runtime.tensor(np.full(shape, fill, dtype=dtype), dev)
    args = kernel_args(module, dev, inputs, out, item.get("prepacked"))
    first_call_secs = 0.0
    if check:
        before = time.perf_counter()
        module["main"](*args)
        dev.sync()
        first_call_secs = time.perf_counter() - before
        mismatch = None if own else workload.check_output(out.numpy(), expected)
        if mismatch is not None:
            return None, {"ok": False, "stage": "wrong", "error": mismatch}
    warmup_ms = int(round(float(req.get("warmup_secs", 0.0)) * 1000))
    # On the device, not one RPC call per run: a warm-up loop over the network would time the
    # network.
    warm = module.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=max(warmup_ms, 1))
    call_secs = float(warm(*args).results[0])  # the mean call of the warm-up sizes the samples
    return (module, args, first_call_secs, call_secs), None


def _stage_of(exc: BaseException, session: Any) -> str:
    """``"timeout"``, ``"lost"`` or ``"run"`` for an exception raised during a session."""
    if "RPCSessionTimeoutError" in str(exc):
        return "timeout"
    try:  # a session that still answers had a kernel fail; one that does not, lost its device
        session.get_function("runtime.NumThreads")()
    except Exception:  # noqa: BLE001
        return "lost"
    return "run"
