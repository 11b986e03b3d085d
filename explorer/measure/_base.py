"""How to measure: ``MeasureConfig`` and the ``Measurer`` contract (the values measured and
returned, ``Candidate`` and ``MeasureResult``, live in ``explorer.core``)."""

from __future__ import annotations

import abc
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from explorer.core import BASELINE_MARK, Candidate, MeasureResult, has_mark, pool_results
from explorer.target import Target
from explorer.types import CacheFlush

if TYPE_CHECKING:
    from explorer.machine import BusyElsewhere


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

    * a hopeless kernel, when a search measures it (``Measurer.measure(..., best_secs=...)``):
      one whose check call and first 2 repeats each took at least ``hopeless_ratio`` times the
      search's best so far (or the batch's fastest kernel timed before it) stops after those
      2, and one whose check's call alone took that long and a second or more
      (``_timing.LONG_CALL_SECS``) after that call. It cannot be the best, and on matmul 1024
      the repeats of such kernels (20 ms to 2 s a call) were most of a search's time. A
      side-by-side re-timing (``measure_paired``) cuts only kernels whose check's call took
      ``_batch.CUT_MIN_CALL_SECS`` (0.1 s) or more, against the fastest kernel it timed
      before (the unscheduled matmul 1024 beside a run's best: one call of 6-7 s instead of
      two). A reference (``Measurer.measure(..., reference=True)``: a run's unscheduled
      program before its search) is cut the same way from 0.1 s a call on, with no kernel
      to compare: the re-timing beside the run's best, which decides, reads it so too.
      ``None`` times every kernel in full.
    * a kernel too slow for ``repeat`` repeats within half of ``run_timeout_secs`` gets as many
      as fit, at least 2 (it was a ``TIMEOUT``, with no time at all).

    From a second a call on, repeats are timed call by call and the check's call is the first
    (``_timing.LONG_CALL_SECS``).

    ``cache_flush`` (``CacheFlush``): what leaves the CPU caches before each sample; ``None``
    (the default) takes each workload's own (``OperatorFamily.cache_flush``: a network's task
    flushes its weights, a catalog operator nothing), so that every timing of one workload is
    made the same way. A sample of back-to-back calls (a kernel under ``SAMPLE_SECS``) has only
    its first call cold, and calls timed call by call are not flushed (at a second a call the
    caches are a rounding). A result names the protocol it was timed under.
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
    cache_flush: CacheFlush | None = None
    hopeless_ratio: float | None = 3.0

    def __post_init__(self) -> None:
        if self.repeat < 1:
            raise ValueError(f"MeasureConfig.repeat must be at least 1 (got {self.repeat})")
        if self.timing_rounds < 1:
            raise ValueError(
                f"MeasureConfig.timing_rounds must be at least 1 (got {self.timing_rounds})"
            )
        if self.cache_flush is not None and not isinstance(self.cache_flush, CacheFlush):
            raise TypeError(
                "MeasureConfig.cache_flush must be a CacheFlush or None "
                f"(got {type(self.cache_flush).__name__} {self.cache_flush!r})"
            )
        if self.hopeless_ratio is not None and not self.hopeless_ratio > 1:
            raise ValueError(
                "MeasureConfig.hopeless_ratio must be above 1, or None "
                f"(got {self.hopeless_ratio})"
            )
        for name in ("min_repeat_secs", "warmup_secs", "build_timeout_secs", "run_timeout_secs"):
            if getattr(self, name) < 0:
                raise ValueError(f"MeasureConfig.{name} must be >= 0 (got {getattr(self, name)})")

    def flush_for(self, cand: Candidate) -> CacheFlush:
        """The caches a sample of ``cand`` finds flushed: the configured protocol, else the
        workload's own; nothing on a GPU (TVM flushes CPU caches only)."""
        if cand.target.kind != "llvm":
            return CacheFlush.NONE
        return self.cache_flush if self.cache_flush is not None else cand.workload.spec.cache_flush


def is_own_reference(cand: Candidate) -> bool:
    """Whether ``cand`` is a run's baseline whose workload's reference is that very program
    (a model's task): its check's call is made and timed as any other, but compared with
    nothing, as computing the reference would only compile the same program a second time."""
    return cand.workload.spec.reference_is_unscheduled and has_mark(cand.decisions, BASELINE_MARK)


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

    times_here: ClassVar[bool] = False
    """Whether it times kernels on this machine's cores, so that other processes here slow its
    readings (what measures with it watches them: ``explorer.machine.BusyElsewhere``)."""

    @abc.abstractmethod
    def measure(
        self,
        candidates: Sequence[Candidate],
        *,
        best_secs: float | None = None,
        reference: bool = False,
    ) -> list[MeasureResult]:
        """Build, run and check every candidate; one result each, in order.

        ``best_secs``: the fastest time the caller has seen for the batch's workload and target
        (a search's best so far; ``math.inf`` when it has none yet). A measurer may time
        kernels far slower than it, or than the batch's fastest, with fewer repeats
        (``MeasureConfig.hopeless_ratio``); without it every kernel gets all of them.
        ``reference``: the candidates are timed to compare against, not to be ranked (a run's
        unscheduled program before its search, re-timed beside the best at the end): a
        measurer may time those of a tenth of a second or more a call with fewer repeats.
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

    def helper_pids(self) -> list[int]:
        """Process ids of the processes working for it on this machine (none by default)."""
        return []

    def watch_busy(self) -> BusyElsewhere | None:
        """From now, how much of the CPUs other processes use (its workers' time is its own),
        or ``None`` where it does not time kernels here (``times_here``)."""
        from explorer.machine import BusyElsewhere

        if not self.times_here:
            return None
        return BusyElsewhere(self.helper_pids)

    def run_environment(self, target: Target) -> dict[str, Any]:
        """What a run records about where this measurer times kernels for ``target`` (merged
        into the run's ``environment``): the device and its measured peak, when known. Cheap:
        nothing is measured here."""
        return {}

    def __enter__(self: M) -> M:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
