"""Uniform random sampling of the knob space: the baseline every strategy is compared with."""

from __future__ import annotations

from collections.abc import Sequence

from explorer.core import Candidate, TrialRecord
from explorer.search._base import Capabilities, SearchStrategy
from explorer.space import KnobSpace, Point

ENUMERATE_BELOW = 100_000
"""Spaces up to this many points are enumerated once random draws keep hitting seen points."""


class RandomSearch(SearchStrategy):
    """Draw knob-space points uniformly, never the same one twice, until the space runs dry.

    Uniform over ``KnobSpace`` points (every point equally likely), not over TVM's sampler,
    which favours some tilings: on ``reduce_sum`` 4x8 TVM's sampler reached 20 of the 36 points.
    Points TVM refuses to build are skipped (counted in ``num_invalid_``), never proposed.

    Args:
        max_misses: consecutive draws of already-seen points after which the unseen remainder is
            enumerated (spaces under ``ENUMERATE_BELOW`` points; larger ones count as exhausted).
    """

    name = "random"
    # The uniform baseline every strategy is compared with: a start point would bias it.
    capabilities = Capabilities(start=False)

    def __init__(self, *, max_misses: int = 200):
        if max_misses < 1:
            raise ValueError(f"RandomSearch.max_misses must be at least 1 (got {max_misses})")
        self.max_misses = max_misses

    def _start(self, history: list[TrialRecord]) -> list[TrialRecord]:
        self.knob_space_ = KnobSpace(self.space)
        self._seen: set[Point] = set()
        self._remainder: list[Point] | None = None  # set once draws keep missing
        self._exhausted = False
        self.num_invalid_ = 0
        return history

    def tell(self, records: Sequence[TrialRecord]) -> None:
        for r in records:
            point = self.knob_space_.point_of_candidate(r.candidate)
            if point is not None:
                self._seen.add(point)

    def ask(self, n: int) -> list[Candidate]:
        out: list[Candidate] = []
        while len(out) < n:
            point = self._draw()
            if point is None:
                break
            self._seen.add(point)
            candidate = self.knob_space_.materialize(point)
            if candidate is None:
                self.num_invalid_ += 1
            else:
                out.append(candidate)
        return out

    def _draw(self) -> Point | None:
        """An unseen point, uniformly; ``None`` once none is left."""
        if self._remainder is not None:
            while self._remainder:
                point = self._remainder.pop()
                if point not in self._seen:
                    return point
            self._exhausted = True
        if self._exhausted or len(self._seen) >= self.knob_space_.size():
            return None
        for _ in range(self.max_misses):
            point = self.knob_space_.random_point(self.rng)
            if point not in self._seen:
                return point
        if self.knob_space_.size() > ENUMERATE_BELOW:
            self._exhausted = True  # too big to list, too full to sample: call it a day
            return None
        # The space is nearly all seen: list what is left, in a seeded random order.
        left = [p for p in self.knob_space_.points() if p not in self._seen]
        order = self.rng.permutation(len(left))
        self._remainder = [left[i] for i in order]
        return self._draw()
