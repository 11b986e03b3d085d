"""How long `import explorer` takes, against `import tvm` (its floor) measured in the same run.

Target: `import explorer` under 2 s. Each import runs in a fresh interpreter, 5 times; the median
is reported.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def _time_import(stmt: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", stmt], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    base = _time_import("pass")
    tvm = _time_import("import tvm")
    explorer = _time_import("import explorer")
    print(f"python start      {base:6.2f} s")
    print(f"import tvm        {tvm:6.2f} s")
    print(f"import explorer   {explorer:6.2f} s   ratio to import tvm: {explorer / tvm:.2f}x")
    print(f"target < 2 s: {'met' if explorer < 2.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
