"""Races on a recording (issue 25): how long five strategies x ten seeds take replayed, against
what measuring the same trials would take on this machine, measured in the same run.

1. **The race.** ``explorer.replay.race`` on the shipped recording (every schedule of softmax
   64x256's knob space): random, autotvm, evolutionary, droplet and evolutionary+droplet, seeds
   0-9, ``--trials`` trials each. Printed: the wall time, each strategy's runs' own time (in
   their worker processes), and each strategy's row (median best, trials to 90% of the
   recording's best). Target: under 60 s.
2. **The same trials measured.** ``--sample`` real trials of softmax 64x256 (a random run with
   the ``LocalMeasurer``, this machine's target) give the seconds one measured trial costs
   here; the race's trials at that cost are what replaying saved (printed as a ratio).

    python benchmarks/bench_race.py [--trials 32] [--seeds 10] [--sample 16]
"""

from __future__ import annotations

import argparse
import time

import _checkout  # noqa: F401  (first: this checkout's explorer)

from explorer.analysis import race_info
from explorer.measure import LocalMeasurer
from explorer.replay import DEFAULT_STRATEGIES, example_recording, race
from explorer.storage import get_store
from explorer.target import Target, cpu_model
from explorer.tuner import Tuner

TARGET_SECS = 60.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--sample", type=int, default=16)
    args = p.parse_args()
    target = Target.local_cpu()
    print(f"machine: {cpu_model()}, {target.num_cores} cores")
    recording = example_recording()
    print(f"recording: {recording.describe()}")

    store = get_store(":memory:")
    started = time.monotonic()
    result = race(recording, DEFAULT_STRATEGIES, seeds=args.seeds, trials=args.trials, store=store)
    race_secs = time.monotonic() - started
    info = race_info(result, store)
    trials = sum(len(r.best_so_far) for r in result.runs)
    print(
        f"race: {len(DEFAULT_STRATEGIES)} strategies x {args.seeds} seeds x {args.trials} "
        f"trials = {trials} replayed trials in {race_secs:.1f} s "
        f"(target < {TARGET_SECS:.0f} s: {'met' if race_secs < TARGET_SECS else 'NOT met'})"
    )
    for name in result.strategies:  # each run's own time in its worker process
        secs = sum(r.secs for r in result.runs if r.strategy == name)
        print(f"  {name:22s} {secs:6.1f} s for {args.seeds} seeds (its runs' own time)")
    for row in info.rows:
        needed = "never" if row.trials_to_reach == float("inf") else f"{row.trials_to_reach:g}"
        print(
            f"  {row.strategy:22s} median best {row.median_best_ms or 0:.4g} ms, "
            f"{row.of_best or 0:.2f} of the recording's best, trials to 90%: {needed} "
            f"({row.reached}/{row.num_seeds} seeds)"
        )

    with LocalMeasurer() as measurer:
        tuner = Tuner(measurer=measurer, store=get_store(":memory:"), confirm_top=0)
        started = time.monotonic()
        measured = tuner.run(recording.workload, target, "random", max_trials=args.sample, seed=0)
        sample_secs = time.monotonic() - started
    per_trial = sample_secs / max(measured.num_trials, 1)
    estimate = per_trial * trials
    print(
        f"measured here: {measured.num_trials} real trials in {sample_secs:.1f} s "
        f"({per_trial:.2f} s per trial, worker start and baseline included); the race's "
        f"{trials} trials measured would take about {estimate / 60:.1f} min: replay is "
        f"{estimate / race_secs:.0f}x faster"
    )


if __name__ == "__main__":
    main()
