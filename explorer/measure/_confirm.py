"""Re-measure the apparent winners before calling one of them the best.

On a shared machine one lucky (or unlucky) timing can reorder candidates whose true speeds are
within noise. ``confirm_best`` takes the fastest few from a search and times them again,
interleaved, with every repeat pooled.
"""

from __future__ import annotations

from collections.abc import Sequence

from explorer.core import Candidate, MeasureResult
from explorer.measure._base import Measurer


def confirm_best(
    measurer: Measurer,
    candidates: Sequence[Candidate],
    results: Sequence[MeasureResult],
    *,
    top_k: int = 3,
    rounds: int = 3,
) -> list[tuple[Candidate, MeasureResult]]:
    """Re-time the ``top_k`` fastest ``OK`` candidates and rank them by the pooled median.

    Uses ``measurer.remeasure`` (``LocalMeasurer``'s: built once, rounds interleaved; the
    default calls ``measure`` ``rounds`` times and pools the repeats).

    Args:
        measurer: what to re-time with.
        candidates: all candidates of a search.
        results: their results, one per candidate.
        top_k: how many of the fastest to re-time.
        rounds: how many more timings each gets.

    Returns:
        ``(candidate, pooled result)`` pairs, fastest first. A candidate that fails on
        re-measurement keeps its failure and sorts last.
    """
    if len(candidates) != len(results):
        raise ValueError(f"{len(candidates)} candidates but {len(results)} results")
    if top_k < 1 or rounds < 1:
        raise ValueError(f"top_k and rounds must be at least 1 (got {top_k}, {rounds})")
    timed = [
        (secs, i) for i, r in enumerate(results) if r.is_ok and (secs := r.median_secs) is not None
    ]
    ranked = [i for _, i in sorted(timed)[:top_k]]  # fastest first; ties in the given order
    chosen = [candidates[i] for i in ranked]
    before = [results[i] for i in ranked]
    after = measurer.remeasure(chosen, rounds=rounds, previous=before)
    pairs = list(zip(chosen, after, strict=True))
    pairs.sort(key=lambda p: (not p[1].is_ok, p[1].median_secs or float("inf")))
    return pairs
