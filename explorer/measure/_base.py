"""What is measured and what comes back: ``Candidate`` in, ``MeasureResult`` out."""

from __future__ import annotations

import abc
import functools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from explorer.target import Target
from explorer.types import JSON, MeasureStatus

if TYPE_CHECKING:  # importing workloads imports TVM; `explorer.measure` stays light without it
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
class MeasureConfig:
    """How long and how often to time a kernel.

    Each repeat times about ``min_repeat_secs`` of samples (one call each, or back-to-back
    calls of 0.1 ms in all for a short kernel, so the timer's resolution never dominates) and
    reads the fastest sample: another process on the cores only ever adds time, and the
    fastest of many short samples is the one it touched least. The median over ``repeat``
    repeats is reported.

    Before timing, the kernel runs untimed for ``warmup_secs`` (the runtime's thread pool
    sleeps after idle and the caches are cold: the first repeats after a pause were slow). When
    the relative spread ``(max - min) / median`` of the repeats exceeds ``max_spread``, the
    kernel is timed again, up to ``timing_rounds`` rounds in all (fewer if they would take more
    than half of ``run_timeout_secs``); the round with the lowest median is kept whole, rounds
    are never mixed. A result still that spread is ``OK`` all the same, and says so
    (``MeasureResult.is_noisy``, ``noise_note``): noise is information about the reading.

    Two cases get fewer repeats, and their results say so by holding fewer ``run_secs``:

    * a hopeless kernel, when a search measures it (``Measurer.measure(..., best_secs=...)``;
      never when re-timing): one whose check call and first 2 repeats each took at least
      ``hopeless_ratio`` times the search's best so far (or the batch's fastest kernel timed
      before it) stops after those 2. It cannot be the best, and on matmul 1024 the repeats of
      such kernels (20 ms to 2 s a call) were most of a search's time. ``None`` times every
      kernel in full.
    * a kernel too slow for ``repeat`` repeats within half of ``run_timeout_secs`` gets as many
      as fit, at least 2 (it was a ``TIMEOUT``, with no time at all).

    From a second a call on, repeats are timed call by call and the check's call is the first
    (``_timing.LONG_CALL_SECS``).
    """

    repeat: int = 5
    min_repeat_secs: float = 0.02
    max_spread: float = 0.25
    warmup_secs: float = 0.02
    timing_rounds: int = 3
    build_timeout_secs: float = 60.0
    run_timeout_secs: float = 20.0
    memory_limit_bytes: int = 4 << 30
    num_threads: int | None = None  # None: the target's core count
    check_correctness: bool = True
    cache_flush: bool = False
    hopeless_ratio: float | None = 3.0

    def __post_init__(self) -> None:
        if self.repeat < 1:
            raise ValueError(f"MeasureConfig.repeat must be at least 1 (got {self.repeat})")
        if self.timing_rounds < 1:
            raise ValueError(
                f"MeasureConfig.timing_rounds must be at least 1 (got {self.timing_rounds})"
            )
        if self.hopeless_ratio is not None and not self.hopeless_ratio > 1:
            raise ValueError(
                "MeasureConfig.hopeless_ratio must be above 1, or None "
                f"(got {self.hopeless_ratio})"
            )
        for name in ("min_repeat_secs", "warmup_secs", "build_timeout_secs", "run_timeout_secs"):
            if getattr(self, name) < 0:
                raise ValueError(f"MeasureConfig.{name} must be >= 0 (got {getattr(self, name)})")


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

    @property
    def median_secs(self) -> float | None:
        return statistics.median(self.run_secs) if self.run_secs else None

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
        )


M = TypeVar("M", bound="Measurer")


class Measurer(abc.ABC):
    """Builds and times candidates.

    Contract:
        * ``measure`` returns one result per candidate, in order, and never raises because a
          candidate is bad: a trace that does not apply, a kernel that fails to compile, crashes,
          hangs, exhausts memory or computes a wrong result all become a ``MeasureResult`` with the
          matching status. The calling process survives all of them.
        * ``remeasure`` times candidates again and pools the repeats, one result each, in order
          (the default measures the batch ``rounds`` times; a measurer that can build once and
          interleave the rounds overrides it).
        * It may raise for misuse (closed measurer, wrong argument types).
        * ``close`` releases worker processes; a measurer is also a context manager.
    """

    @abc.abstractmethod
    def measure(
        self, candidates: Sequence[Candidate], *, best_secs: float | None = None
    ) -> list[MeasureResult]:
        """Build, run and check every candidate; one result each, in order.

        ``best_secs``: the fastest time the caller has seen for the batch's workload and target
        (a search's best so far; ``math.inf`` when it has none yet). A measurer may time
        kernels far slower than it, or than the batch's fastest, with fewer repeats
        (``MeasureConfig.hopeless_ratio``); without it every kernel gets all of them.
        """

    def measure_paired(
        self, candidates: Sequence[Candidate], *, rounds: int = 3
    ) -> list[list[MeasureResult]]:
        """Time candidates side by side, in ``rounds`` rounds that each time every candidate
        once, so that two candidates' readings of one round were taken under the same load:
        comparing them round by round (paired) is fair on a busy machine, where comparing
        readings from different moments is not.

        The default measures the batch once a round; a measurer that can build once and
        interleave the rounds overrides it. It may stop timing a candidate that a round showed
        far slower than the others (``LocalMeasurer``).

        Returns:
            Per candidate, its result of each round it was timed in, in order; a failure ends
            a candidate's rounds (its last result is the failure).
        """
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1 (got {rounds})")
        per: list[list[MeasureResult]] = [[] for _ in candidates]
        for _ in range(rounds):
            todo = [i for i, rs in enumerate(per) if not rs or rs[-1].is_ok]
            if not todo:
                break
            for i, r in zip(todo, self.measure([candidates[i] for i in todo]), strict=True):
                per[i].append(r)
        return per

    def remeasure(
        self,
        candidates: Sequence[Candidate],
        *,
        rounds: int = 3,
        previous: Sequence[MeasureResult] | None = None,
    ) -> list[MeasureResult]:
        """Time candidates again, ``rounds`` times each, and pool every repeat.

        Args:
            candidates: what to re-time.
            rounds: how many times each candidate is measured again (``measure_paired``).
            previous: earlier results, one per candidate; the run_secs of those that are
                ``OK`` are pooled into the new results.

        Returns:
            One result per candidate whose ``run_secs`` holds the previous repeats followed by
            the new ones; a failure stops a candidate's rounds (its result is the failure).
        """
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1 (got {rounds})")
        if previous is not None and len(previous) != len(candidates):
            raise ValueError(
                f"previous must hold one result per candidate ({len(previous)} != "
                f"{len(candidates)})"
            )
        pooled = []
        for i, results in enumerate(self.measure_paired(candidates, rounds=rounds)):
            old = [previous[i]] if previous is not None and previous[i].is_ok else []
            merged = functools.reduce(pool_results, old + results)
            pooled.append(merged)
        return pooled

    def start_workers(  # noqa: B027  (optional hook, default: nothing to start)
        self, *, num_candidates: int | None = None, num_threads: int | None = None
    ) -> None:
        """Start what measuring needs (worker processes) in the background, if anything."""

    def close(self) -> None:  # noqa: B027  (optional hook, default: nothing to release)
        """Release workers and temporary files."""

    def run_environment(self, target: Target) -> dict[str, Any]:
        """What a run records about where this measurer times kernels for ``target`` (merged
        into the run's ``environment``): the device and its measured peak, when known. Cheap:
        nothing is measured here."""
        return {}

    def __enter__(self: M) -> M:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fastest_round(results: Sequence[MeasureResult]) -> float | None:
    """One schedule's reading from its rounds of ``Measurer.measure_paired``: the median of
    its fastest round (``None`` without a timed round). Load only ever slows a round down, and
    a whole round of a small parallel kernel can read 2x slow while its threads share a core,
    so the fastest round is the least disturbed one; ``summarize_run`` reads a run's
    confirmation the same way."""
    return min((r.median_secs for r in results if r.is_ok and r.median_secs), default=None)


def pool_results(old: MeasureResult, new: MeasureResult) -> MeasureResult:
    """``new`` with ``old``'s repeats before its own, when both are ``OK``; otherwise the first
    of the two that failed."""
    if not old.is_ok:
        return old
    if not new.is_ok:
        return new
    return MeasureResult(
        old.status,
        run_secs=old.run_secs + new.run_secs,
        build_secs=new.build_secs,
        flops=new.flops,
        num_threads=new.num_threads,
        max_spread=new.max_spread,
        device=new.device,
    )
