"""A database of real measurements shipped for offline tests (Kernel Tuner's simulation cache).

``replay.db`` (next to this module) holds trials measured once on a real CPU with the
``LocalMeasurer``; ``ReplayMeasurer``-based tests search it instead of the hardware, so a
strategy's contract is checked in seconds and deterministically. Two workloads:

* ``TINY`` (``reduce_sum`` 4x8): every point of its knob space (36 in 3 sketches), so searches
  can exhaust it and must find its recorded optimum;
* ``SMALL`` (``matmul`` 64^3): a few hundred random points, a realistic landscape for cost
  models and for strategies that stop early.

The timings are whatever the recording machine measured; tests compare strategies with the
recording, never with constants. Regenerate with ``python -m explorer.testing.recordings``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from explorer.measure import (
    Candidate,
    LocalMeasurer,
    MeasureConfig,
    MeasureResult,
    ReplayMeasurer,
    trace_key,
)
from explorer.replay import open_copy
from explorer.space import KnobSpace, Point
from explorer.storage import NewTrial, RecordStore, TrialRecord, get_store
from explorer.target import Target
from explorer.workloads import Workload, get_workload

PATH = Path(__file__).with_name("data") / "replay.db"
TINY = get_workload("reduce_sum", D0=4, D1=8)
SMALL = get_workload("matmul", M=64, N=64, K=64)
SMALL_POINTS = 240
RECORDING = "recording"
"""The strategy name of the runs in ``replay.db``."""


def buildable(space: KnobSpace, points: Iterator[Point]) -> list[Candidate]:
    return [c for c in map(space.materialize, points) if c is not None]


def open_recording(directory: str | Path | None = None) -> RecordStore:
    """A private copy of ``replay.db`` (the shipped file is never opened for writing), in
    ``directory``, or else in a temporary folder removed when this process exits."""
    return open_copy(PATH, directory)


def recorded_trials(store: RecordStore, workload: Workload) -> list[TrialRecord]:
    return [t for t in store.trials(workload=workload) if t.candidate.workload == workload]


def replay_measurer(store: RecordStore, workload: Workload) -> ReplayMeasurer:
    """Answers for the recorded points of ``workload``; ``INVALID`` for everything else.

    A candidate is found by its trace, or else by its knob-space point: MetaSchedule's
    evolutionary search rebuilds a point's schedule through its own path, and the trace text it
    gets differs from ``KnobSpace.materialize``'s although the program is the same.
    """
    trials = recorded_trials(store, workload)
    by_trace = {trace_key(t.candidate.trace): t.result for t in trials}
    by_point = {_point_key(t.candidate): t.result for t in trials}
    by_point.pop(None, None)

    def lookup(candidate: Candidate) -> MeasureResult | None:
        found = by_trace.get(trace_key(candidate.trace))
        return found if found is not None else by_point.get(_point_key(candidate))

    return ReplayMeasurer(lookup)


def _point_key(candidate: Candidate) -> tuple[int, tuple[int, ...]] | None:
    d = candidate.decisions
    if isinstance(d, dict) and "sketch" in d and "point" in d:
        return int(d["sketch"]), tuple(int(i) for i in d["point"])
    return None


def record(path: Path, target: Target, *, seed: int = 0) -> None:
    """Measure every point of ``TINY`` and ``SMALL_POINTS`` random points of ``SMALL``."""
    rng = np.random.default_rng(seed)
    store = get_store(path)
    small = KnobSpace.of(SMALL, target)
    seen: set[Point] = set()
    small_cands: list[Candidate] = []
    while len(small_cands) < SMALL_POINTS:
        point = small.random_point(rng)
        if point not in seen:
            seen.add(point)
            cand = small.materialize(point)
            if cand is not None:
                small_cands.append(cand)
    tiny = KnobSpace.of(TINY, target)
    work = [(TINY, buildable(tiny, tiny.points())), (SMALL, small_cands)]
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as measurer:
        for workload, cands in work:
            run = store.create_run(workload, target, RECORDING, settings={"seed": seed})
            for start in range(0, len(cands), 16):
                batch = cands[start : start + 16]
                results = measurer.measure(batch)
                store.add_trials(
                    run.id, [NewTrial(c, r) for c, r in zip(batch, results, strict=True)]
                )
            store.finish_run(run.id)
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=PATH)
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists; remove it first (recordings are never rewritten)")
    record(args.out, Target.local_cpu())
    print(f"recorded into {args.out}")


if __name__ == "__main__":
    main()
