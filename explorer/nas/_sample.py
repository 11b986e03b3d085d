"""Random transformation plans for a network, each scored by its Fisher Potential.

The authors' sampler (``pytorch/example.py`` of the NAS-PTE code) draws, per residual block,
one of ``Conv`` (unchanged), ``Seq1`` (split + group), ``Seq2`` ("unroll" + group) and ``Seq3``
(spatial split) with their parameters, both convolutions of a block sharing the choice, and
counts the configurations whose shapes do not work. ``draw_plan`` does the same over a wider
menu (``KINDS``): the paper's single transformations (group, depthwise, bottleneck) and
BlockSwap's bottleneck + group are drawn too, and a bottleneck narrows the block's first
convolution (the second then reads the narrower output).

A drawn block plan whose shapes do not work (depthwise on a block that doubles its channels,
groups that do not divide) is a ``Refusal``: data, not an error. ``sample_candidates`` keeps every
refusal it met and draws that block again (up to ``MAX_DRAWS`` times, then keeps the block as
it is), so each candidate is a network that computes; whether it is *legal* is then the Fisher
Potential's call. With eight kinds per block most whole-network draws would otherwise fail
somewhere (21 of 30 did, on ResNet-18).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from explorer.nas._fisher import (
    FisherPotential,
    check_seed,
    check_tau,
    fisher_potential,
    format_ratio,
    is_legal,
)
from explorer.nas._network import Block, BlockPlan, Network
from explorer.nas._transforms import (
    Bottleneck,
    Depthwise,
    Group,
    Refusal,
    SpatialSplit,
    SplitGroup,
    Transformation,
    UnrollGroup,
)

KINDS = (
    "keep",
    "group",
    "depthwise",
    "bottleneck",
    "bottleneck_group",
    "split_group",
    "unroll_group",
    "spatial_split",
)
"""What ``draw_plan`` chooses from, uniformly, for each block."""

# The authors' parameter ranges (pytorch/example.py); group and bottleneck factors as BlockSwap's.
SPLIT_FACTORS = (1, 2, 4, 8)
SPLIT_GROUPS = (1, 2, 4, 8)
UNROLL_FACTORS = (1, 2, 4, 8, 16)
UNROLL_GROUPS = (1, 2, 3, 4)
GROUPS = (2, 4, 8, 16)
BOTTLENECKS = (2, 4, 8)
MAX_DRAWS = 20
MAX_SAMPLES = 100_000
"""Candidates one sample draws at most (each is a Fisher Potential: seconds apiece)."""


def check_count(name: str, n: object) -> None:
    """``ValueError`` naming ``name`` unless ``n`` is a number of candidates to draw (misuse)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_SAMPLES:
        raise ValueError(
            f"{name} must be an integer from 0 to {MAX_SAMPLES} (got {n!r}); each candidate's "
            "Fisher Potential takes seconds"
        )


def _pick(rng: np.random.Generator, values: Sequence[int]) -> int:
    return int(values[int(rng.integers(len(values)))])


def check_kinds(kinds: Sequence[str]) -> None:
    """``ValueError`` unless ``kinds`` is a selection of ``KINDS`` with a transformation in it
    (``keep`` alone would only draw the original again) (misuse)."""
    if isinstance(kinds, str) or not kinds or set(kinds) - set(KINDS):
        raise ValueError(f"kinds must be taken from {', '.join(KINDS)} (got {kinds!r})")
    if set(kinds) == {"keep"}:
        raise ValueError(
            "kinds needs a transformation besides keep (keep alone draws the original)"
        )


def draw_plan(block: Block, rng: np.random.Generator, kinds: Sequence[str] = KINDS) -> BlockPlan:
    """One random plan for ``block``: a kind from ``kinds`` and its parameters, shared by the
    block's convolutions (a bottleneck goes on the first one only).

    Raises:
        ValueError: an unknown kind (misuse).
    """
    check_kinds(kinds)
    kind = kinds[int(rng.integers(len(kinds)))]
    n = len(block.convs)
    shared: tuple[Transformation, ...]
    if kind == "keep":
        return ((),) * n
    if kind in ("bottleneck", "bottleneck_group"):
        narrow = Bottleneck(_pick(rng, BOTTLENECKS))
        if kind == "bottleneck":
            return ((narrow,), *(((),) * (n - 1)))
        g = Group(_pick(rng, GROUPS[:3]))
        return ((narrow, g), *(((g,),) * (n - 1)))
    if kind == "group":
        shared = (Group(_pick(rng, GROUPS)),)
    elif kind == "depthwise":
        shared = (Depthwise(),)
    elif kind == "split_group":
        sf = _pick(rng, SPLIT_FACTORS)
        groups = tuple(_pick(rng, SPLIT_GROUPS) for _ in range(sf))
        # Dense slices of a convolution are that convolution: as the authors' sampler, such a
        # draw keeps the block (it would read as a change that changes nothing).
        if set(groups) == {1}:
            return ((),) * n
        shared = (SplitGroup(groups),)
    elif kind == "unroll_group":
        shared = (UnrollGroup(_pick(rng, UNROLL_FACTORS), _pick(rng, UNROLL_GROUPS)),)
    else:
        parts = _pick(rng, SPLIT_FACTORS)
        if parts == 1:  # one strip is the layer itself
            return ((),) * n
        shared = (SpatialSplit(parts),)
    return (shared,) * n


@dataclass(frozen=True, slots=True)
class NasCandidate:
    """One sampled plan, the network it makes and that network's Fisher Potential.

    ``fisher_secs`` is the wall time of the Fisher Potential, its XLA compilation included
    (0 for a network already scored in the same sample).
    """

    plans: tuple[BlockPlan, ...]
    network: Network
    fisher: FisherPotential
    fisher_ratio: float
    is_legal: bool
    fisher_secs: float

    @property
    def macs(self) -> int:
        return self.network.macs

    @property
    def params(self) -> int:
        return self.network.params

    def summary(self) -> str:
        verdict = "legal" if self.is_legal else "illegal"
        return f"{self.network.summary()} | FP x{format_ratio(self.fisher_ratio)} {verdict}"


@dataclass(frozen=True, slots=True)
class NasSample:
    """What ``sample_candidates`` returns: the original network's score, the candidates and
    every block plan that was drawn but did not apply."""

    network: Network
    original: FisherPotential
    tau: float
    candidates: tuple[NasCandidate, ...]
    refusals: tuple[Refusal, ...]
    stopped: bool = False  # ``should_stop`` ended the drawing before ``n`` candidates

    @property
    def legal(self) -> list[NasCandidate]:
        return [c for c in self.candidates if c.is_legal]


def _draw_block(
    block: Block, rng: np.random.Generator, kinds: Sequence[str], refusals: list[Refusal]
) -> BlockPlan:
    for _ in range(MAX_DRAWS):
        plan = draw_plan(block, rng, kinds)
        result = block.transform(plan)
        if not isinstance(result, Refusal):
            return plan
        refusals.append(result)
    return ((),) * len(block.convs)


def sample_candidates(
    network: Network,
    n: int,
    rng: np.random.Generator | int,
    *,
    tau: float = 1.0,
    batch_size: int = 64,
    seed: int = 0,
    kinds: Sequence[str] = KINDS,
    inits: int = 1,
    should_stop: Callable[[], bool] = lambda: False,
) -> NasSample:
    """Draw ``n`` plans (one per block, ``draw_plan``) and score each transformed network.

    Args:
        network: the original network.
        n: how many candidates to draw.
        rng: the generator plans are drawn from, or a seed for one (never the global RNG).
        tau: legal iff ``FP(candidate) >= tau * FP(original)``.
        batch_size: digits in the Fisher Potential's minibatch.
        seed: the initialisation and minibatch seed, the same for the original and every
            candidate.
        kinds: what a block may become (``KINDS``).
        inits: initialisations the Fisher Potentials average (``fisher_potential``).
        should_stop: checked before each candidate; true ends the sample early (``stopped``).

    Raises:
        MissingExtraError: JAX or scikit-learn is not installed (the ``nas`` extra).
        ValueError: ``n < 0``, a bad ``tau`` or an unknown kind.
    """
    check_count("n", n)
    if not isinstance(rng, np.random.Generator):
        check_seed("rng", rng)
    check_seed("seed", seed)
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    check_tau(tau)
    check_kinds(kinds)
    original = fisher_potential(network, batch_size=batch_size, seed=seed, inits=inits)
    seen: dict[Network, FisherPotential] = {network: original}
    candidates = []
    refusals: list[Refusal] = []
    stopped = False
    for _ in range(n):
        if should_stop():
            stopped = True
            break
        plans = tuple(_draw_block(b, generator, kinds, refusals) for b in network.blocks)
        result = network.transform(plans)
        if isinstance(result, Refusal):  # each block plan applied on its own: a bug if not
            raise AssertionError(f"a plan of applicable blocks was refused: {result}")
        start = time.perf_counter()
        fp = seen.get(result)
        if fp is None:
            fp = seen[result] = fisher_potential(
                result, batch_size=batch_size, seed=seed, inits=inits
            )
        secs = time.perf_counter() - start
        legal = is_legal(fp, original, tau)
        candidates.append(NasCandidate(plans, result, fp, fp.ratio(original), legal, secs))
    return NasSample(network, original, tau, tuple(candidates), tuple(refusals), stopped)
