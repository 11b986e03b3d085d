"""A search process for the resume tests: a real ``Tuner`` on a real SQLite file, measuring with
the shipped recording (``explorer.testing.recordings``), so its timings are the same in every
process.

Usage: python _tune_replay.py DB STRATEGY --scratch DIR [--trials N --batch B --seed S]
       [--resume RUN]

``--scratch``: a folder of the calling test's (its ``tmp_path``) for the copy of the recording,
so a search killed with ``kill -9`` leaves nothing behind outside it.

Prints ``measuring <batch>`` (flushed) when a batch starts measuring, then takes ``--delay``
seconds to measure it, so the parent can ``kill -9`` it mid-batch, before that batch is stored.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence

from explorer.measure import Candidate, Measurer, MeasureResult
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.testing.recordings import TINY, open_recording, recorded_trials, replay_measurer
from explorer.tuner import Tuner

# Small enough to run in seconds, large enough that autotvm fits its model several times.
STRATEGY_OPTIONS = {
    "random": {},
    "autotvm": {"plan_size": 8, "parallel_size": 16, "n_iter": 40, "early_stop": 10},
}


class SlowReplay(Measurer):
    """The recording's answers, ``delay`` seconds per batch, announcing each batch."""

    def __init__(self, replay: Measurer, delay: float) -> None:
        self.replay = replay
        self.delay = delay
        self.batches = 0

    def measure(
        self,
        candidates: Sequence[Candidate],
        *,
        best_secs: float | None = None,
        reference: bool = False,
    ) -> list[MeasureResult]:
        # The run's baseline (the unscheduled program) is measured alone before the search;
        # it is not a batch of trials.
        if [c.decisions for c in candidates] != [{"baseline": True}]:
            print(f"measuring {self.batches}", flush=True)
            self.batches += 1
            time.sleep(self.delay)
        return self.replay.measure(candidates)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("strategy", choices=sorted(STRATEGY_OPTIONS))
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--resume", type=int, default=None)
    parser.add_argument("--scratch", required=True)
    args = parser.parse_args()

    recording = open_recording(tempfile.mkdtemp(prefix="replay-", dir=args.scratch))
    target = recorded_trials(recording, TINY)[0].candidate.target
    measurer = SlowReplay(replay_measurer(recording, TINY), args.delay)
    tuner = Tuner(measurer=measurer, store=get_store(args.db), batch_size=args.batch)
    if args.resume is not None:
        result = tuner.resume(args.resume)
    else:
        strategy = make_strategy(args.strategy, **STRATEGY_OPTIONS[args.strategy])
        result = tuner.run(TINY, target, strategy, max_trials=args.trials, seed=args.seed)
    print(f"done {result.run.id} {result.num_trials}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
