"""The child process of ``NumpyTimer``: one JSON request per stdin line, one reply per line.

Requests: ``{"workload": ..., "repeat": n, "min_secs": s}`` (time it) or ``{"info": true}``
(describe the BLAS only). Replies carry ``ok`` and either the timings or an ``error``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np


def _blas() -> dict[str, Any] | None:
    """threadpoolctl's entry for NumPy's own BLAS (other libraries may bring their own)."""
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    numpy_dir = os.path.dirname(os.path.dirname(np.__file__))
    mine = [i for i in blas if os.path.basename(i["filepath"]).startswith("libscipy_openblas")]
    mine = mine or [i for i in blas if i["filepath"].startswith(numpy_dir)] or blas
    return mine[0] if mine else None


def _time(request: dict[str, Any]) -> dict[str, Any]:
    from explorer.workloads import Workload

    workload = Workload.from_json(request["workload"])
    inputs = workload.random_inputs()  # the workload's own dtype, as a kernel sees them

    def run() -> Any:
        return workload.spec.reference(inputs, workload.param_dict)

    # The first call warms NumPy up and is the one checked (against float64 arithmetic).
    got, expected = np.asarray(run()), workload.reference(inputs)
    mismatch = workload.check_output(got, expected)
    if mismatch:
        return {"ok": False, "error": f"NumPy's result is wrong: {mismatch}"}
    run_secs = []
    for _ in range(int(request["repeat"])):
        calls, start = 0, time.perf_counter()
        while True:
            run()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= request["min_secs"]:
                break
        run_secs.append(elapsed / calls)
    return {
        "ok": True,
        "run_secs": run_secs,
        "blas": _blas(),
        "numpy": np.__version__,
        "rel_error": _rel_error(got, expected),
    }


def _rel_error(got: np.ndarray, expected: np.ndarray) -> float:
    wide = expected.astype(np.float64)
    finite = np.isfinite(wide)
    scale = max(float(np.abs(wide[finite]).max()) if finite.any() else 0.0, 1e-30)
    diff = np.abs(got.astype(np.float64)[finite] - wide[finite])
    return float(diff.max()) / scale if diff.size else 0.0


def main() -> None:
    # Replies use a private copy of stdout; anything else printing (TVM, a warning) goes to
    # stderr, so it cannot corrupt a reply.
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request.get("info"):
                reply = {"ok": True, "blas": _blas(), "numpy": np.__version__}
            else:
                reply = _time(request)
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it there
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
