"""What is measured and what comes back: ``Candidate`` in, ``MeasureResult`` out.

The value types every layer shares (search proposes candidates, a measurer returns results,
the store keeps both, cost models learn from them), so they sit on the ground floor with no
dependency above ``explorer.target`` and ``explorer.types``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from explorer.target import Target
from explorer.types import JSON, CacheFlush, MeasureStatus

if TYPE_CHECKING:  # importing workloads imports TVM; the value types stay light without it
    from explorer.workloads import Workload


@dataclass(frozen=True)
class Candidate:
    """A schedule to measure: the workload, the target and the schedule as a JSON trace.

    The trace is what ``explorer._tvm.trace_to_json`` produces; replaying it on the workload's
    unscheduled module gives the schedule back. ``decisions`` optionally names the knob values a
    search chose (kept for analysis; measurement ignores it).
    """

    workload: Workload
    target: Target
    trace: JSON
    decisions: JSON = None

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload.to_json(),
            "target": self.target.to_json(),
            "trace": self.trace,
            "decisions": self.decisions,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Candidate:
        from explorer.workloads import Workload

        return Candidate(
            workload=Workload.from_json(data["workload"]),
            target=Target.from_json(data["target"]),
            trace=data["trace"],
            decisions=data.get("decisions"),
        )


@dataclass(frozen=True)
class MeasureResult:
    """The outcome for one candidate. Anything but ``OK`` has an ``error_msg`` (TVM's, verbatim
    where it came from TVM)."""

    status: MeasureStatus
    run_secs: tuple[float, ...] = ()
    error_msg: str | None = None
    build_secs: float | None = None
    flops: int = 0
    num_threads: int | None = None
    max_spread: float = field(default=0.25, compare=False)
    device: str | None = None  # which fleet device ran it (``key@host:port``); None: this machine
    cache_flush: CacheFlush = CacheFlush.NONE  # the protocol its repeats were timed under

    @property
    def median_secs(self) -> float | None:
        return statistics.median(self.run_secs) if self.run_secs else None

    @property
    def fastest_secs(self) -> float | None:
        """The fastest repeat (``None`` without timings): what a side-by-side comparison
        reads, since another process on the cores only ever adds time to a repeat."""
        return min(self.run_secs) if self.run_secs else None

    @property
    def spread(self) -> float | None:
        """(max - min) / median of the repeats; ``None`` without timings."""
        med = self.median_secs
        if not med:
            return None
        return (max(self.run_secs) - min(self.run_secs)) / med

    @property
    def is_noisy(self) -> bool:
        """Whether the repeats spread more than ``max_spread``: information about the reading
        (the machine was busy), never a failure."""
        spread = self.spread
        return spread is not None and spread > self.max_spread

    @property
    def noise_note(self) -> str | None:
        """One sentence on a noisy reading (``is_noisy``), ``None`` for a tight one."""
        if not self.is_noisy:
            return None
        return (
            f"the repeats spread {self.spread:.0%} (more than {self.max_spread:.0%}): something "
            "else was using the cores, which can only slow a kernel down; compare schedules "
            "measured side by side (as a search's final re-timing does) before trusting a "
            "small difference"
        )

    @property
    def gflops(self) -> float | None:
        med = self.median_secs
        if not med or not self.flops or self.status is not MeasureStatus.OK:
            return None
        return self.flops / med / 1e9

    @property
    def is_ok(self) -> bool:
        return self.status is MeasureStatus.OK

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "run_secs": list(self.run_secs),
            "error_msg": self.error_msg,
            "build_secs": self.build_secs,
            "flops": self.flops,
            "num_threads": self.num_threads,
            "device": self.device,
            "cache_flush": self.cache_flush.value,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> MeasureResult:
        return MeasureResult(
            status=MeasureStatus(data["status"]),
            run_secs=tuple(float(x) for x in data.get("run_secs") or ()),
            error_msg=data.get("error_msg"),
            build_secs=data.get("build_secs"),
            flops=int(data.get("flops") or 0),
            num_threads=data.get("num_threads"),
            device=data.get("device"),
            cache_flush=CacheFlush(data.get("cache_flush") or CacheFlush.NONE),
        )


class MeasuresCandidates(Protocol):
    """What code below the measurers needs of one (``explorer.measure.Measurer`` is the full
    contract): one result per candidate, in order."""

    def measure(
        self, candidates: Sequence[Candidate], *, best_secs: float | None = None
    ) -> list[MeasureResult]: ...


def trace_key(trace: JSON) -> str:
    """The canonical text of a JSON trace: the key ``ReplayMeasurer`` looks results up by, and
    searches tell schedules apart by.

    Without MetaSchedule's mark where the postprocessing starts (``EnterPostproc``): it changes
    nothing in the program, and schedules written before the design space marked its own
    (a recording, a database) are the same schedules as the marked ones proposed now.
    """
    if isinstance(trace, str):
        trace = json.loads(trace)  # already text: normalise spacing and key order
    return json.dumps(_unmarked(trace), sort_keys=True, separators=(",", ":"))


def _unmarked(trace: JSON) -> JSON:
    """``trace`` ([instructions, decisions]) without its ``EnterPostproc`` instruction, the
    decisions' instruction indices after it shifted down; any other value as it is."""
    try:
        insts, decisions = trace
        at = next(i for i, inst in enumerate(insts) if inst[0] == "EnterPostproc")
        return [insts[:at] + insts[at + 1 :], [[i - (i > at), d] for i, d in decisions]]
    except (TypeError, ValueError, KeyError, IndexError, StopIteration):
        return trace


def fastest_round(results: Sequence[MeasureResult]) -> float | None:
    """One schedule's reading from its rounds of ``Measurer.measure_paired``: its fastest
    repeat in any round (``None`` without a timed round); ``summarize_run`` reads a run's
    confirmation the same way.

    Load only ever adds time, and on a busy machine it can add it to most repeats of a round:
    beside two CPU burners on two cores, a 2-thread conv2d of 0.12 ms read 5.7, 5.9, 0.12, 4.0
    and 4.0 ms in one round (each parallel call waited for a burner's 4 ms time slice), so the
    round's median said 4.0 ms and a search called the unscheduled program (1.2 ms, one thread,
    no waits) the best. The fastest repeat is the one the load touched least."""
    return min((r.fastest_secs for r in results if r.is_ok and r.fastest_secs), default=None)


def pool_results(old: MeasureResult, new: MeasureResult) -> MeasureResult:
    """``new`` with ``old``'s repeats before its own, when both are ``OK``; otherwise the first
    of the two that failed."""
    if not old.is_ok:
        return old
    if not new.is_ok:
        return new
    return replace(new, run_secs=old.run_secs + new.run_secs)
