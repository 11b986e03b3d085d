"""One kernel timed again and again in one runner process: does this machine's speed hold?

``python docs/reproduction/search/2026-12-05-machine-modes.py DB RUN [N]``: the fastest
schedule of run ``RUN`` in the database ``DB`` (a ``bench_search.py`` database), built once and
re-timed ``N`` times (default 80) with ``bench_search.py``'s protocol by one ``LocalMeasurer``
(one runner process, nothing else running), each time as one ``remeasure`` round. Printed:
every tenth time since the start, and the GFLOPS of the last ten timings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from _retime import top_candidates
from bench_search import MEASURE

from explorer.measure import LocalMeasurer
from explorer.storage import environment, get_store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("run", type=int)
    parser.add_argument("n", type=int, nargs="?", default=80)
    args = parser.parse_args()
    print(f"machine: {environment()['cpu_model']}", flush=True)
    with get_store(args.db, read_only=True) as store:
        kernel = top_candidates(store, args.run, 64)[0]
    flops = kernel.workload.flops()
    print(f"{kernel.workload.key()}: run {args.run}'s fastest schedule", flush=True)
    start, readings = time.time(), []
    with LocalMeasurer(MEASURE) as measurer:
        for i in range(args.n):
            result = measurer.remeasure([kernel], rounds=1)[0]
            readings.append(round(flops / result.median_secs / 1e9))
            if i % 10 == 9:
                print(f"{time.time() - start:6.1f} s  GFLOPS {readings[-10:]}", flush=True)


if __name__ == "__main__":
    main()
