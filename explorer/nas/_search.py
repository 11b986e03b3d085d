"""The NAS-PTE search: sample transformed networks, keep the legal ones, tune their convolutions,
and keep the Pareto front of latency against Fisher Potential and parameters.

The paper's loop (ASPLOS 2021, section 6; card 5 of the algorithm notes):

1. draw random transformation plans per block (``sample_candidates``);
2. reject the illegal ones by Fisher Potential (milliseconds to seconds each, no training);
3. tune every distinct convolution of the original and of the legal candidates with one of the
   explorer's strategies at a small budget, each shape once: a shape already tuned on this
   target with the same strategy, budget and seed (a finished run in the store) is not tuned
   again, so a second search, or a network sharing layers with an earlier one, reuses it;
4. a network's latency is the sum over its convolutions of (times run) x (tuned latency). The
   batch norms, ReLUs, pooling and the concatenations of split layers are left out on every
   side alike: what is compared is the convolutions, which the transformations change;
5. the answer is the Pareto front of the legal networks (the original among them): lower
   latency, higher Fisher Potential, fewer parameters.

Every tuning is an ordinary run in the store (one per distinct shape), visible to
``explorer runs``, the dashboards and the schedule editor.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from explorer.core import RecordStore, RunInfo, RunStatus
from explorer.nas._fisher import check_seed, format_ratio
from explorer.nas._layer import Conv, Layer
from explorer.nas._network import Network
from explorer.nas._sample import KINDS, NasCandidate, NasSample, check_count, sample_candidates
from explorer.storage import summarize_run
from explorer.target import Target
from explorer.types import MAX_TRIALS

if TYPE_CHECKING:  # the measurer package imports TVM; describing a search does not need it
    from explorer.measure import Measurer


@dataclass(frozen=True, slots=True)
class ConvTuning:
    """One distinct convolution's tuning: its run and the run's best (confirmed) median.

    ``best_secs`` is ``None`` when no schedule of the run succeeded (a network that runs it then
    has no latency). ``is_cached``: the run existed before this search (nothing was measured).
    ``paired_secs``: the best schedule's median when re-timed beside every other shape's best
    at the end of the search (``None`` when it was not); networks are compared with it.
    """

    conv: Conv
    run_id: int
    best_secs: float | None
    is_cached: bool
    best_trial_id: int | None = None
    paired_secs: float | None = None

    @property
    def latency_secs(self) -> float | None:
        """What a network's latency sums for this shape: the side-by-side reading if any."""
        return self.paired_secs if self.paired_secs is not None else self.best_secs


@dataclass(frozen=True, slots=True)
class NasPoint:
    """A network of the search (the original or a candidate) with what is known of it.

    ``latency_secs`` is the sum of its convolutions' tuned latencies (``None`` for an illegal
    candidate, which is not tuned, or when a convolution has no successful schedule).
    """

    name: str  # "original" or "candidate 7"
    network: Network
    fisher_ratio: float
    is_legal: bool
    latency_secs: float | None
    candidate: NasCandidate | None = None  # what was sampled (``None``: the original)
    is_on_front: bool = False

    @property
    def macs(self) -> int:
        return self.network.macs

    @property
    def params(self) -> int:
        return self.network.params

    def summary(self) -> str:
        latency = "not tuned" if self.latency_secs is None else f"{self.latency_secs * 1e3:.3f} ms"
        verdict = "legal" if self.is_legal else "illegal"
        return (
            f"{self.name}: {latency}, FP x{format_ratio(self.fisher_ratio)} ({verdict}), "
            f"{self.macs / 1e6:.1f} MMACs, {self.params / 1e3:.1f} k params"
        )


@dataclass(frozen=True, slots=True)
class NasResult:
    """What ``nas_search`` found. ``points[0]`` is the original network."""

    sample: NasSample
    tunings: tuple[ConvTuning, ...]
    points: tuple[NasPoint, ...]
    strategy: str
    budget: int
    fisher_secs: float
    tuning_secs: float
    stopped: bool = False  # ``should_stop`` ended the tuning early (some points not tuned)

    @property
    def original(self) -> NasPoint:
        return self.points[0]

    @property
    def front(self) -> list[NasPoint]:
        return [p for p in self.points if p.is_on_front]

    def untimed_convs(self, point: NasPoint) -> list[ConvTuning]:
        """The tunings that leave ``point`` without a latency: no schedule of theirs
        succeeded (every trial failed to build or run, or the tuning was stopped)."""
        by_conv = {t.conv: t for t in self.tunings}
        return [
            by_conv[conv]
            for conv in point.network.conv_counts()
            if conv in by_conv and by_conv[conv].best_secs is None
        ]

    @property
    def fastest_legal(self) -> NasPoint | None:
        """The legal network with the lowest latency (the original when nothing beat it)."""
        timed = [p for p in self.points if p.is_legal and p.latency_secs is not None]
        return min(timed, key=lambda p: p.latency_secs or math.inf, default=None)

    @property
    def speedup(self) -> float | None:
        """Original latency / fastest legal latency (the paper: "over 3x in most cases")."""
        best, base = self.fastest_legal, self.original.latency_secs
        if best is None or base is None or not best.latency_secs:
            return None
        return base / best.latency_secs

    def tuning_of(self, conv: Conv) -> ConvTuning | None:
        return next((t for t in self.tunings if t.conv == conv), None)


@dataclass(frozen=True, slots=True)
class NasProgress:
    """Sent to ``on_progress`` before each convolution is tuned (and once at the end)."""

    done: int
    total: int
    conv: Conv | None  # the one about to be tuned (``None``: finished)
    is_cached: bool


def pareto_front(points: Sequence[tuple[float, float, float]]) -> list[bool]:
    """Which points no other dominates, for (latency to minimise, Fisher Potential to maximise,
    parameters to minimise). Equal points do not dominate each other.

    Example:
        >>> pareto_front([(1.0, 1.0, 10), (2.0, 1.0, 10), (2.0, 2.0, 5), (1.0, 1.0, 10)])
        [True, False, True, True]
    """
    keys = [(lat, -fp, params) for lat, fp, params in points]
    return [
        not any(
            all(o <= k for o, k in zip(other, key, strict=True)) and other != key for other in keys
        )
        for key in keys
    ]


def find_tuning(
    store: RecordStore, conv: Conv, target: Target, strategy: str, budget: int, seed: int
) -> ConvTuning | None:
    """The latest finished run of ``strategy`` for ``conv`` on ``target`` at ``budget`` trials and
    ``seed``, as a tuning, or ``None`` (a shape is tuned once per strategy, budget and seed)."""
    runs: Iterable[RunInfo] = store.runs(
        workload=conv.workload(), target=target, strategy=strategy
    )
    for run in reversed(list(runs)):
        s = run.settings
        if (
            run.status is RunStatus.FINISHED
            and s.get("max_trials") == budget
            and s.get("seed") == seed
        ):
            summary = summarize_run(run.id, store.trial_rows(run_id=run.id))
            return ConvTuning(
                conv, run.id, summary.best_secs, True, best_trial_id=summary.best_trial_id
            )
    return None


def retime_together(
    store: RecordStore, measurer: Measurer, tunings: Mapping[Conv, ConvTuning], *, rounds: int = 3
) -> dict[Conv, ConvTuning]:
    """Every shape's best schedule re-timed side by side (``Measurer.measure_paired``), as each
    tuning's ``paired_secs``.

    A network's latency is a sum over its shapes, and networks are compared by ratios of such
    sums. Each shape's best was timed by its own run, minutes (or sessions) apart from the
    others; on a busy machine the same kernel reads 2x apart from one minute to the next, which
    once turned a dense block's untuned-looking 5.4 ms (0.7 ms side by side) into a "62x"
    speed-up. Read together, in interleaved rounds, the shapes share the machine's state.
    """
    timed = [t for t in tunings.values() if t.best_trial_id is not None]
    out = dict(tunings)
    if len(timed) < 2:  # nothing to compare a shape with
        return out
    from explorer.measure import fastest_round

    cands = [store.get_trial(t.best_trial_id).candidate for t in timed if t.best_trial_id]
    for tuning, results in zip(timed, measurer.measure_paired(cands, rounds=rounds), strict=True):
        secs = fastest_round(results)
        if secs is not None:
            out[tuning.conv] = replace(tuning, paired_secs=secs)
    return out


def tuned_latency(item: Network | Layer, tunings: Mapping[Conv, ConvTuning]) -> float | None:
    """A network's or a layer's latency: each distinct convolution's tuned latency times how
    often it runs (``None`` when one has no tuned latency)."""
    total = 0.0
    for conv, count in item.conv_counts().items():
        tuning = tunings.get(conv)
        if tuning is None or tuning.latency_secs is None:
            return None
        total += count * tuning.latency_secs
    return total


def nas_search(
    network: Network,
    *,
    samples: int,
    budget: int,
    store: RecordStore,
    measurer: Measurer,
    target: Target,
    strategy: str = "random",
    tau: float = 1.0,
    seed: int = 0,
    tune_seed: int = 0,
    batch_size: int = 64,
    kinds: Sequence[str] = KINDS,
    inits: int = 1,
    tune_batch: int = 8,
    should_stop: Callable[[], bool] = lambda: False,
    on_progress: Callable[[NasProgress], None] | None = None,
) -> NasResult:
    """Sample ``samples`` transformed networks, tune the legal ones' convolutions at ``budget``
    trials per distinct shape, and rank them.

    Args:
        network: the original network.
        samples: candidates to draw (``sample_candidates``; ``seed`` draws them).
        budget: trials per distinct convolution (each shape tuned once, cached in ``store``).
        store: where every tuning run goes, and where earlier ones are found.
        measurer: builds and times the convolutions (the caller owns and closes it).
        target: what the convolutions are tuned for.
        strategy: a strategy name (``explorer.search.STRATEGIES``) used for every shape.
        tau: legal iff ``FP(candidate) >= tau * FP(original)``.
        seed: what draws the plans, and the Fisher Potential's initialisation and minibatch.
        tune_seed: the tuning runs' seed (apart from ``seed``: another sample of candidates
            reuses the shapes already tuned).
        batch_size: images in the Fisher Potential's minibatch.
        kinds: what a block may become (``explorer.nas.KINDS``).
        inits: initialisations each Fisher Potential averages (1: the paper's single draw).
        tune_batch: candidates per measured batch of a tuning run.
        should_stop: checked before each candidate is scored and each shape is tuned (and
            between a tuning's batches); true ends the search early: the candidates scored and
            the shapes tuned so far are kept, the other networks have no latency.
        on_progress: called before each shape is tuned.

    Raises:
        ValueError: ``samples``, ``budget`` or a seed out of range, a bad ``tau`` or kind (before
            anything is measured or stored).
        UnknownPluginError: an unknown strategy.
        MissingExtraError: JAX or scikit-learn is not installed.
    """
    _check_search(samples, budget, strategy, seed, tune_seed)
    # Step 1-2. Sample and judge.
    start = time.perf_counter()
    sample = sample_candidates(
        network,
        samples,
        np.random.default_rng(seed),
        tau=tau,
        batch_size=batch_size,
        seed=seed,
        kinds=kinds,
        inits=inits,
        should_stop=should_stop,
    )
    fisher_secs = time.perf_counter() - start
    # Step 3. Every distinct convolution tuned, then re-timed together.
    shapes = _ShapeTuner(
        store, measurer, target, strategy, budget, tune_seed, tune_batch, should_stop
    )
    wanted = _distinct_convs(network, sample)
    tunings, stopped, tuning_secs = shapes.tune_and_retime(wanted, sample.stopped, on_progress)
    return NasResult(
        sample,
        tuple(tunings.values()),
        _ranked_points(network, sample, tunings),
        strategy,
        budget,
        fisher_secs,
        tuning_secs,
        stopped,
    )


def _check_search(samples: int, budget: int, strategy: str, seed: int, tune_seed: int) -> None:
    """``nas_search``'s counts, seeds and strategy, before anything is computed or measured
    (an unknown strategy fails before the Fisher Potentials are computed)."""
    from explorer.search import make_strategy

    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be an integer >= 1 trials per shape (got {budget!r})")
    if budget > MAX_TRIALS:
        raise ValueError(f"budget must be at most {MAX_TRIALS} trials per shape (got {budget})")
    check_count("samples", samples)
    check_seed("seed", seed)
    check_seed("tune_seed", tune_seed)
    make_strategy(strategy)


@dataclass(frozen=True)
class _ShapeTuner:
    """Step 3 of the search: each distinct convolution tuned once (or found tuned in the
    store, by the same strategy, budget and seed)."""

    store: RecordStore
    measurer: Measurer
    target: Target
    strategy: str
    budget: int
    seed: int
    batch: int
    should_stop: Callable[[], bool]

    def tune(
        self, convs: Sequence[Conv], on_progress: Callable[[NasProgress], None] | None
    ) -> tuple[dict[Conv, ConvTuning], bool]:
        """The tunings of ``convs`` in order, and whether the search was stopped before the
        last one (the ones tuned so far are kept)."""
        from explorer.tuner import Tuner

        tuner = Tuner(measurer=self.measurer, store=self.store, batch_size=self.batch)
        tunings: dict[Conv, ConvTuning] = {}
        for i, conv in enumerate(convs):
            cached = find_tuning(
                self.store, conv, self.target, self.strategy, self.budget, self.seed
            )
            if on_progress is not None:
                on_progress(NasProgress(i, len(convs), conv, cached is not None))
            if cached is not None:
                tunings[conv] = cached
                continue
            if self.should_stop():
                return tunings, True
            result = tuner.run(
                conv.workload(),
                self.target,
                self.strategy,
                max_trials=self.budget,
                seed=self.seed,
                should_stop=self.should_stop,
            )
            if result.stopped_because == "cancelled":
                return tunings, True
            best_id = None if result.best is None else result.best.id
            tunings[conv] = ConvTuning(conv, result.run.id, result.best_secs, False, best_id)
        return tunings, False

    def tune_and_retime(
        self,
        convs: Sequence[Conv],
        stopped: bool,
        on_progress: Callable[[NasProgress], None] | None,
    ) -> tuple[dict[Conv, ConvTuning], bool, float]:
        """``tune``, then every tuning's best re-timed side by side (``retime_together``)
        unless this or the sampling before (``stopped``) was stopped; and the seconds it took."""
        start = time.perf_counter()
        tunings, stopped_here = self.tune(convs, on_progress)
        stopped = stopped or stopped_here
        if not stopped:
            tunings = retime_together(self.store, self.measurer, tunings)
        if on_progress is not None:
            on_progress(NasProgress(len(tunings), len(convs), None, False))
        return tunings, stopped, time.perf_counter() - start


def _distinct_convs(network: Network, sample: NasSample) -> list[Conv]:
    """Every distinct convolution of the original and the legal candidates, in order."""
    wanted: dict[Conv, None] = dict.fromkeys(network.conv_counts())
    for cand in sample.legal:
        wanted.update(dict.fromkeys(cand.network.conv_counts()))
    return list(wanted)


def _ranked_points(
    network: Network, sample: NasSample, tunings: Mapping[Conv, ConvTuning]
) -> tuple[NasPoint, ...]:
    """Steps 4-5: the original and every candidate with its latency, the legal ones with a
    latency marked when they are on the Pareto front (latency, Fisher ratio, parameters)."""
    points = [NasPoint("original", network, 1.0, True, tuned_latency(network, tunings))]
    points += [
        NasPoint(
            f"candidate {i}",
            c.network,
            c.fisher_ratio,
            c.is_legal,
            tuned_latency(c.network, tunings) if c.is_legal else None,
            c,
        )
        for i, c in enumerate(sample.candidates, start=1)
    ]
    ranked = [p for p in points if p.is_legal and p.latency_secs is not None]
    on_front = pareto_front(
        [(p.latency_secs or math.inf, p.fisher_ratio, p.params) for p in ranked]
    )
    front_ids = {id(p) for p, keep in zip(ranked, on_front, strict=True) if keep}
    return tuple(replace(p, is_on_front=id(p) in front_ids) for p in points)
