"""``Batch``: what one measurement call of a CPU measurer knows so far, candidate by
candidate (paths, builds, each round's timings, failures), and the cut of hopeless kernels
between the rounds of a side-by-side re-timing."""

from __future__ import annotations

import math
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from explorer.core import Candidate, MeasureResult, WorkerLost
from explorer.types import CacheFlush, MeasureStatus

CUT_MIN_CALL_SECS = 0.1
"""Between the rounds of a side-by-side re-timing, only kernels this slow a call are cut as
hopeless (``Batch.settled``): far above any scheduler time slice a busy machine makes a
fast kernel wait (4-12 ms seen), and a round of a faster kernel costs well under a second."""


@dataclass
class Batch:
    """What one ``measure`` call knows so far, by candidate index."""

    cands: list[Candidate]
    # The caller's best so far (measure only; None: no kernel is cut short), and the fastest
    # timing of this batch so far: kernels hopeless_ratio times slower stop after 2 repeats
    # (``_timing.time_main``). A side-by-side re-timing (``retiming``) has no best, and cuts
    # only kernels of ``CUT_MIN_CALL_SECS`` or more a call against its fastest. A reference
    # (a run's baseline) cuts every kernel of ``CUT_MIN_CALL_SECS`` or more a call, with or
    # without a best.
    best_secs: float | None = None
    fastest_secs: float = math.inf
    retiming: bool = False
    reference: bool = False
    todo: list[int] = field(default_factory=list)  # the candidates to build and run
    results: list[MeasureResult | None] = field(default_factory=list)  # failures so far
    paths: dict[int, str] = field(default_factory=dict)
    futures: dict[int, Future[dict[str, Any] | WorkerLost]] = field(default_factory=dict)
    build_secs: dict[int, float] = field(default_factory=dict)
    prepacked: dict[int, Any] = field(default_factory=dict)  # a build's weight copies apart
    round_secs: dict[int, list[list[float]]] = field(default_factory=dict)  # each round's
    threads: dict[int, int] = field(default_factory=dict)
    devices: dict[int, str] = field(default_factory=dict)
    flushes: dict[int, CacheFlush] = field(default_factory=dict)  # each one's timing protocol

    def __post_init__(self) -> None:
        self.results = [None] * len(self.cands)

    def add_timings(self, i: int, reply: dict[str, Any]) -> None:
        """A successful run's reply: its repeats, one list a round (a device's reply holds
        the rounds it timed in one session), after the candidate's earlier rounds."""
        for secs in reply.get("round_secs") or [reply["run_secs"]]:
            timed = [float(x) for x in secs]
            self.round_secs.setdefault(i, []).append(timed)
            if timed:
                self.fastest_secs = min(self.fastest_secs, *timed)
        self.threads[i] = int(reply["num_threads"])
        if reply.get("device"):
            self.devices[i] = str(reply["device"])

    def settled(self, ratio: float | None) -> set[int]:
        """The candidates not worth another round: their latest round (its fastest repeat, as
        a confirmation reads it) was ``ratio`` times the fastest of that round or slower, and
        a call of theirs takes ``CUT_MIN_CALL_SECS`` or more.

        The cut saves the rounds of kernels that cost seconds (the unscheduled matmul 1024
        takes 7 s a call). A faster kernel's round costs a fraction of a second, and one slow
        round of it may be the machine's doing: beside four CPU-bound processes on two cores, a
        2-thread conv2d of 60 us read 12 ms in every repeat of a round (each call waited for a
        time slice) and was cut after it, so the re-timing called the 1.1 ms unscheduled
        program faster; later rounds read it at 60 us again.
        """
        latest = {
            i: min(rounds[-1])
            for i, rounds in self.round_secs.items()
            if rounds[-1] and self.results[i] is None
        }
        if ratio is None or not latest:
            return set()
        bar = max(ratio * min(latest.values()), CUT_MIN_CALL_SECS)
        return {i for i, secs in latest.items() if secs >= bar}

    def per_round(self, max_spread: float) -> list[list[MeasureResult]]:
        """Per candidate, a result for each round it was timed in, then its failure if any."""
        out: list[list[MeasureResult]] = []
        for i, cand in enumerate(self.cands):
            results = [
                MeasureResult(
                    MeasureStatus.OK,
                    run_secs=tuple(secs),
                    build_secs=self.build_secs[i],
                    flops=cand.workload.flops(),
                    num_threads=self.threads[i],
                    max_spread=max_spread,
                    device=self.devices.get(i),
                    cache_flush=self.flushes.get(i, CacheFlush.NONE),
                )
                for secs in self.round_secs.get(i, [])
            ]
            failure = self.results[i]
            out.append(results + [failure] if failure is not None else results)
        return out
