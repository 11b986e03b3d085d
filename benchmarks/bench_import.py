"""Start-up costs, against `import tvm` (their floor) measured in the same run.

* `import explorer`: target under 2 s.
* `import ml_dtypes` (after NumPy), the part of `import tvm` a dependency's release once
  slowed by 0.5 s (pinned below 0.7 in pyproject.toml).
* `explorer measure matmul -p M=64 -p N=64 -p K=64` (build, check and time one tiny kernel, then
  store it): target under 2 s. It needs at least two TVM imports (this process and the worker
  that builds and runs the kernel); on a 2-core machine they run side by side, so its floor is
  about one `import tvm` plus the build and the timing.
* A new measurement worker (a measurer's builder or runner, or one replacing a lost one), from
  its start to its first reply: forked from the process's fork server, which imported TVM
  once, against a worker started with `python -m explorer.measure._worker` (its own TVM
  import: how every worker started before the fork server), interleaved, 5 of each.

Each command runs in a fresh interpreter, 5 times; the median is reported.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXPLORER = str(Path(sys.executable).with_name("explorer"))


def _median_secs(cmd: list[str], runs: int = 5, env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        # `noisy` (exit 1) is a complete measurement on a busy machine; anything else is not.
        if out.returncode != 0 and not out.stdout.startswith("noisy:"):
            raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return statistics.median(times)


def _time_import(stmt: str) -> float:
    return _median_secs([sys.executable, "-c", stmt])


def _worker_start_secs(rounds: int = 5) -> tuple[float, float]:
    from explorer.core import WorkerPool, read_message

    server_up = WorkerPool(num_build_workers=1, memory_limit_bytes=0)
    server_up.call("os:getpid", role="build")
    forked, started = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        pool = WorkerPool(num_build_workers=1, memory_limit_bytes=0)
        assert pool.call("os:getpid", num_threads=1)["ok"]
        forked.append(time.perf_counter() - t0)
        pool.close()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "explorer.measure._worker", "--role", "run"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert read_message(proc.stdout)["ready"]
        started.append(time.perf_counter() - t0)
        proc.stdin.close()
        proc.wait()
        proc.stdout.close()
    server_up.close()
    return statistics.median(forked), statistics.median(started)


def main() -> None:
    base = _time_import("pass")
    tvm = _time_import("import tvm")
    # TVM imports ml_dtypes: 0.7.0 took 0.5 s of it on a 2-core Xeon (0.6.0: 0.01 s).
    ml_dtypes = _time_import("import numpy, ml_dtypes") - _time_import("import numpy")
    explorer = _time_import("import explorer")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, EXPLORER_DB=os.path.join(tmp, "bench.db"))
        tiny = ["measure", "matmul", "-p", "M=64", "-p", "N=64", "-p", "K=64"]
        measure = _median_secs([EXPLORER, *tiny], env=env)
    print(f"python start      {base:6.2f} s")
    print(f"import tvm        {tvm:6.2f} s")
    print(f"  of it ml_dtypes {ml_dtypes:6.2f} s   share of import tvm: {ml_dtypes / tvm:.2f}")
    print(f"import explorer   {explorer:6.2f} s   ratio to import tvm: {explorer / tvm:.2f}x")
    print(f"explorer measure  {measure:6.2f} s   ratio to import tvm: {measure / tvm:.2f}x")
    forked, started = _worker_start_secs()
    print(f"worker, forked    {forked:6.2f} s   ratio to python -m: {forked / started:.3f}x")
    print(f"worker, python -m {started:6.2f} s")
    print(f"import explorer < 2 s: {'met' if explorer < 2.0 else 'NOT met'}")
    print(f"explorer measure (tiny matmul) < 2 s: {'met' if measure < 2.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
