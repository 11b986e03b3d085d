"""The benchmarks' final word on a row: its best schedules re-timed, interleaved, with one timer.

A search row's own "best" is chosen on the timings taken while it searched (for ``tune_tir``,
single noisy timings from MetaSchedule's runner, never checked against NumPy). Before rows are
compared, each row's fastest few schedules (within the row's own trial budget, re-measurements
excluded) are re-timed with the same ``LocalMeasurer`` in interleaved rounds: every round visits
every schedule of the workload once, so a change in machine load hits all rows alike. The NumPy
baseline is timed between rounds, in its own clean subprocess.

A schedule's reading is its fastest repeat in any round (``explorer.measure.fastest_round``, as a
run's confirmation reads it), NumPy's likewise. Load only adds time, and this machine also
slows down by itself for seconds at a time: one kernel, timed again and again in one process
with the same buffers, read 220 GFLOPS 12 times, 192 8 times, 220 4 times, then 191; kernels near
the peak lose up to a fifth in such a phase, slow ones barely anything. A pooled median took a
slow phase in for whichever schedules it covered; with 3 rounds a phase still covered 8 of 20
near-peak rows of one workload in every round, with 9 none. So: 9 rounds, each schedule's
fastest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import _checkout  # noqa: F401  (first: this checkout's explorer)

from explorer.core._records import RecordStore, TrialRecord
from explorer.measure import Candidate, LocalMeasurer, MeasureResult, fastest_round, trace_key
from explorer.types import MeasureStatus

TOP = 3  # schedules re-timed per row: its first timings may have ranked them wrongly
ROUNDS = 9  # interleaved rounds over all the rows of one workload (see above)
TIMED = (MeasureStatus.OK, MeasureStatus.UNCHECKED)


@dataclass(frozen=True)
class Retimed:
    """One workload's re-timing: the best reading of each row (by run id), the NumPy readings
    timed between the rounds, and ``spread``: the largest ratio, over the schedules, of a
    schedule's slowest round to its fastest (1.2 and more: the machine changed speed)."""

    best_secs: dict[int, float]
    numpy_secs: tuple[float, ...]
    spread: float

    def describe(self) -> str:
        return (
            f"re-timing: {ROUNDS} rounds; a schedule's slowest round read up to "
            f"{self.spread:.2f}x its fastest, which counts"
        )


def searched_trials(store: RecordStore, run_id: int, budget: int) -> list[TrialRecord]:
    """The run's first ``budget`` searched trials: no re-timings, no baseline, no repeats."""
    out, seen = [], set()
    for t in store.trials(run_id=run_id):
        if t.is_remeasure:
            continue
        key = trace_key(t.candidate.trace)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out[:budget]


def top_candidates(store: RecordStore, run_id: int, budget: int) -> list[Candidate]:
    """The row's ``TOP`` fastest schedules by its own timings."""
    timed = [
        t for t in searched_trials(store, run_id, budget) if t.status in TIMED and t.median_secs
    ]
    timed.sort(key=lambda t: t.median_secs or 0.0)
    return [t.candidate for t in timed[:TOP]]


def retime(
    measurer: LocalMeasurer,
    rows: Sequence[tuple[int, Sequence[Candidate]]],
    numpy_secs: Callable[[], float] | None = None,
) -> Retimed:
    """Re-time every row's candidates in ``ROUNDS`` interleaved rounds (NumPy between rounds).

    Args:
        rows: ``(run_id, candidates)`` per row, all of one workload; a schedule found by several
            rows is timed once and counts for each.
        numpy_secs: times the NumPy baseline once and returns its fastest repeat (seconds per
            call); ``None``: no baseline.
    """
    unique: dict[str, Candidate] = {}
    for _, cands in rows:
        for c in cands:
            unique.setdefault(trace_key(c.trace), c)
    keys = list(unique)
    rounds: dict[str, list[MeasureResult]] = {k: [] for k in keys}
    failed: set[str] = set()
    numpy: list[float] = []
    for _ in range(ROUNDS):
        if numpy_secs is not None:
            numpy.append(numpy_secs())
        results = measurer.remeasure([unique[k] for k in keys], rounds=1)
        for k, r in zip(keys, results, strict=True):
            # A noisy round (a correct result whose repeats spread) is ok: read like the others.
            if r.is_ok and r.run_secs:
                rounds[k].append(r)
            else:
                failed.add(k)  # wrong results or crashes: never a row's best
    if numpy_secs is not None:
        numpy.append(numpy_secs())
    reading = {k: fastest_round(rs) for k, rs in rounds.items() if k not in failed and rs}
    best: dict[int, float] = {}
    for run_id, cands in rows:
        secs = [s for c in cands if (s := reading.get(trace_key(c.trace)))]
        if secs:
            best[run_id] = min(secs)
    spread = max(
        (max(r.fastest_secs for r in rs) / reading[k] for k, rs in rounds.items() if k in reading),
        default=1.0,
    )
    return Retimed(best, tuple(numpy), spread)
