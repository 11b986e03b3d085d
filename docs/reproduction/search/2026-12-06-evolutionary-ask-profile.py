"""Where `evolutionary`'s asking goes on matmul 512 (64 trials, seed 0): one run through the
real Tuner, LocalMeasurer and SQLite store, cProfile on inside `ask` only, and the register-tile
postprocessor's calls timed apart.

usage (from a checkout): TVM_NUM_THREADS=2 PYTHONPATH=. python \
    docs/reproduction/search/2026-12-06-evolutionary-ask-profile.py
"""

import cProfile
import io
import os
import pstats
import tempfile
import time

import explorer.space._packing as packing
from explorer.measure import LocalMeasurer
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.target import Target
from explorer.tuner import Tuner
from explorer.workloads import get_workload

print("explorer from", os.path.dirname(packing.__file__))
fits = [0.0, 0]
inner_fits = packing._fits


def timed_fits(*args):
    t0 = time.perf_counter()
    try:
        return inner_fits(*args)
    finally:
        fits[0] += time.perf_counter() - t0
        fits[1] += 1


packing._fits = timed_fits  # the postprocessor looks it up at each call
prof = cProfile.Profile()
asks = []
with tempfile.TemporaryDirectory() as tmp:
    store = get_store(os.path.join(tmp, "profile.db"))
    with LocalMeasurer() as measurer:
        strategy = make_strategy("evolutionary")
        inner_ask = strategy.ask

        def ask(n):
            t0 = time.perf_counter()
            prof.enable()
            try:
                return inner_ask(n)
            finally:
                prof.disable()
                asks.append((n, time.perf_counter() - t0))

        strategy.ask = ask
        t0 = time.perf_counter()
        run = Tuner(measurer=measurer, store=store).run(
            get_workload("matmul_512"), Target.local_cpu(), strategy, max_trials=64, seed=0
        )
        print(f"run: {run.num_trials} trials in {time.perf_counter() - t0:.1f} s")
    store.close()
print(
    "asks (n, s):", [(n, round(t, 2)) for n, t in asks], f"in all {sum(t for _, t in asks):.2f} s"
)
print(f"register-tile postprocessor: {fits[0]:.2f} s in {fits[1]} calls")
out = io.StringIO()
pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(20)
print(out.getvalue())
