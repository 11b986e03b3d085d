"""Uniform random sampling of the design space: the baseline every strategy is compared with."""

from __future__ import annotations

from collections.abc import Sequence

from explorer.errors import SearchError
from explorer.measure._base import Candidate
from explorer.search._base import SearchStrategy
from explorer.space import decisions_key
from explorer.storage._base import TrialRecord


class RandomSearch(SearchStrategy):
    """Draw points uniformly (TVM's own sampler over a random sketch), never the same one twice.

    Args:
        max_misses: consecutive duplicate or invalid draws after which the space is considered
            exhausted (small spaces run out; ``ask`` then returns fewer candidates or ``[]``).
    """

    name = "random"

    def __init__(self, *, max_misses: int = 200):
        self.max_misses = max_misses
        self._seen: set[str] = set()
        self._exhausted = False

    def tell(self, records: Sequence[TrialRecord]) -> None:
        for r in records:
            self._seen.add(decisions_key(r.candidate.decisions))

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        misses = 0
        while len(out) < n and not self._exhausted:
            try:
                sample = self.space.sample(self.rng)
            except SearchError:
                self._exhausted = True
                break
            key = decisions_key(sample.candidate.decisions)
            if key in self._seen:
                misses += 1
                # Random draws cannot prove a space empty; this many repeats in a row means the
                # unseen remainder is too small to find, and stays so (ask keeps returning []).
                self._exhausted = misses >= self.max_misses
                continue
            self._seen.add(key)
            out.append(sample.candidate)
            misses = 0
        return out
