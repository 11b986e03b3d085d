"""AutoTVM's simulated-annealing model optimiser (TVM v0.8 ``sa_model_optimizer.py``), over a
knob space with several sketches, with all chains scored in one call per step.

A point is a key tuple ``(sketch, i_0, ..., i_k)``; internally the chains are two arrays,
``sketches (P,)`` and ``indices (P, max_knobs)``, so a step proposes and scores all ``P``
chains at once. ``diversity_pick`` is AutoTVM's greedy submodular selection.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Container, Sequence

import numpy as np

Key = tuple[int, ...]
ScoreFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


class SimulatedAnnealing:
    """Parallel simulated annealing that returns the best unvisited points a model predicts.

    Args:
        dims: per sketch, the domain size of each knob.
        parallel_size: chains (AutoTVM: 128).
        n_iter: most steps per call (500).
        early_stop: stop after this many steps without a change to the top list (50).
        temp: linear cooling from ``temp[0]`` to ``temp[1]`` over ``n_iter`` steps.
        persistent: the chains continue from where the previous call left them.

    The walk changes one knob per chain per step. As in AutoTVM's ``random_walk`` (draw a knob
    uniformly, draw a value uniformly, redraw until the point changes), knob ``j`` is the one
    changed with probability proportional to ``(d_j - 1) / d_j`` and its new value is uniform
    over the other ``d_j - 1``. The sketch counts as one more knob; when it changes, each knob
    index is kept where the new sketch has that knob with that many values, and redrawn
    otherwise.
    """

    def __init__(
        self,
        dims: Sequence[Sequence[int]],
        *,
        parallel_size: int = 128,
        n_iter: int = 500,
        early_stop: int = 50,
        temp: tuple[float, float] = (1.0, 0.0),
        persistent: bool = True,
    ):
        self.dims = [tuple(int(d) for d in ds) for ds in dims]
        self.parallel_size = parallel_size
        self.n_iter = n_iter
        self.early_stop = early_stop
        self.temp = temp
        self.persistent = persistent
        self.num_sketches = len(self.dims)
        self.max_knobs = max((len(d) for d in self.dims), default=0)
        self.num_knobs = np.array([len(d) for d in self.dims])
        # (sketch, knob) -> domain size, 1 where the sketch has no such knob.
        self._dim = np.ones((self.num_sketches, max(self.max_knobs, 1)), dtype=np.int64)
        for s, ds in enumerate(self.dims):
            self._dim[s, : len(ds)] = ds
        # Column 0 is the sketch "knob", then the knobs: AutoTVM's chance of changing each.
        weights = np.zeros((self.num_sketches, 1 + self._dim.shape[1]))
        weights[:, 0] = (self.num_sketches - 1) / self.num_sketches
        weights[:, 1:] = (self._dim - 1) / self._dim
        self._weights = weights
        sizes = np.array([math.prod(d) for d in self.dims], dtype=np.float64)
        self.size = int(sizes.sum())
        self._sketch_p = sizes / sizes.sum()
        self._sk: np.ndarray | None = None  # persisted chains
        self._idx: np.ndarray | None = None
        self._started = False  # start_at() set the chains for the next call
        self.num_scored = 0  # points scored over all calls (for reports and tests)

    # -- points -----------------------------------------------------------------------------
    def key(self, sketch: int, indices: np.ndarray) -> Key:
        return (int(sketch), *(int(i) for i in indices[: self.num_knobs[sketch]]))

    def arrays(self, keys: Sequence[Key]) -> tuple[np.ndarray, np.ndarray]:
        """Keys to ``(sketches, indices)`` arrays."""
        sk = np.array([k[0] for k in keys], dtype=np.int64)
        idx = np.zeros((len(keys), max(self.max_knobs, 1)), dtype=np.int64)
        for r, k in enumerate(keys):
            idx[r, : len(k) - 1] = k[1:]
        return sk, idx

    def random_keys(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` uniform points of the whole space (sketches weighted by their size)."""
        sk = rng.choice(self.num_sketches, size=n, p=self._sketch_p)
        idx = np.floor(rng.random((n, self._dim.shape[1])) * self._dim[sk]).astype(np.int64)
        return sk, idx

    def random_walk(
        self, sk: np.ndarray, idx: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Change one knob (or the sketch) of every point; points with nothing to change stay."""
        n = len(sk)
        w = self._weights[sk]
        total = w.sum(axis=1)
        u = rng.random(n) * total
        col = np.minimum((np.cumsum(w, axis=1) <= u[:, None]).sum(axis=1), w.shape[1] - 1)
        step = rng.random(n)
        new_sk, new_idx = sk.copy(), idx.copy()
        knob = np.nonzero((col > 0) & (total > 0))[0]
        j = col[knob] - 1
        d = self._dim[sk[knob], j]
        new_idx[knob, j] = (idx[knob, j] + 1 + np.floor(step[knob] * (d - 1))) % d
        for r in np.nonzero((col == 0) & (total > 0))[0]:
            s = (sk[r] + 1 + int(step[r] * (self.num_sketches - 1))) % self.num_sketches
            new_sk[r] = s
            keep = idx[r] < self._dim[s]
            redraw = np.floor(rng.random(self._dim.shape[1]) * self._dim[s]).astype(np.int64)
            new_idx[r] = np.where(keep, idx[r], redraw)
            new_idx[r, self.num_knobs[s] :] = 0
        return new_sk, new_idx

    def start_at(self, key: Key) -> None:
        """Begin every chain's walk at one point (a start point); the next ``find_maximums``
        walks from there, also without ``persistent``."""
        sk, idx = self.arrays([key] * max(min(self.parallel_size, self.size), 1))
        self._sk, self._idx = sk, idx
        self._started = True

    # -- search -----------------------------------------------------------------------------
    def find_maximums(
        self,
        score_fn: ScoreFn,
        num: int,
        exclude: Container[Key],
        rng: np.random.Generator,
    ) -> list[tuple[Key, float]]:
        """The ``num`` best-scoring points not in ``exclude``, best first, with their scores.

        ``score_fn(sketches, indices)`` scores a batch (higher = better); ``-inf`` marks a
        point that must never be returned. Fewer than ``num`` come back when the annealing
        meets fewer distinct eligible points.
        """
        if (self.persistent or self._started) and self._sk is not None and self._idx is not None:
            sk, idx = self._sk, self._idx
            self._started = False
        else:
            sk, idx = self._initial_points(rng)
        scores = self._score(score_fn, sk, idx)

        # The heap holds (score, key); placeholders have keys no point has.
        heap: list[tuple[float, Key]] = [(-math.inf, (-1 - i,)) for i in range(num)]
        heapq.heapify(heap)
        in_heap = {k for _, k in heap}

        def push(batch_scores: np.ndarray, bsk: np.ndarray, bidx: np.ndarray) -> bool:
            changed = False
            for r in np.nonzero(np.isfinite(batch_scores) & (batch_scores > heap[0][0]))[0]:
                s = float(batch_scores[r])
                if s <= heap[0][0]:
                    continue
                key = self.key(bsk[r], bidx[r])
                if key in in_heap or key in exclude:
                    continue
                _, popped = heapq.heapreplace(heap, (s, key))
                in_heap.discard(popped)
                in_heap.add(key)
                changed = True
            return changed

        push(scores, sk, idx)
        t = self.temp[0]
        cool = (self.temp[0] - self.temp[1]) / (self.n_iter + 1)
        k = last_change = 0
        while k < self.n_iter and k < last_change + self.early_stop:
            new_sk, new_idx = self.random_walk(sk, idx, rng)
            new_scores = self._score(score_fn, new_sk, new_idx)
            # AutoTVM accepts with exp(min(delta / T, 1)): every improvement, some declines.
            with np.errstate(invalid="ignore", over="ignore"):
                prob = np.exp(np.minimum((new_scores - scores) / (t + 1e-5), 1.0))
            accept = rng.random(len(prob)) < np.nan_to_num(prob, nan=0.0)
            sk = np.where(accept, new_sk, sk)
            idx = np.where(accept[:, None], new_idx, idx)
            scores = np.where(accept, new_scores, scores)
            # Proposals enter the top list whether or not the chain moved to them.
            if push(new_scores, new_sk, new_idx):
                last_change = k
            k += 1
            t -= cool
        if self.persistent:
            self._sk, self._idx = sk, idx
        # AutoTVM also drops items scoring below 0, which discards real picks of a rank model
        # (its margins are often negative); only the placeholders are dropped here.
        best = sorted(((s, key) for s, key in heap if math.isfinite(s)), reverse=True)
        return [(key, s) for s, key in best]

    def _initial_points(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        # AutoTVM starts from `parallel_size` distinct random points.
        want = min(self.parallel_size, self.size)
        seen: set[Key] = set()
        sks, idxs = [], []
        for _ in range(20):
            sk, idx = self.random_keys(want, rng)
            for s, i in zip(sk, idx, strict=True):
                key = self.key(s, i)
                if key not in seen and len(seen) < want:
                    seen.add(key)
                    sks.append(s)
                    idxs.append(i)
            if len(seen) >= want:
                break
        return np.array(sks, dtype=np.int64), np.array(idxs, dtype=np.int64)

    def _score(self, score_fn: ScoreFn, sk: np.ndarray, idx: np.ndarray) -> np.ndarray:
        self.num_scored += len(sk)
        return np.asarray(score_fn(sk, idx), dtype=np.float64)


def diversity_pick(keys: Sequence[Key], num: int, *, knob_weight: float = 1.0) -> list[int]:
    """AutoTVM's ``submodular_pick`` with its scores zeroed (as the released tuner calls it):
    greedily take the point adding the most knob values not yet covered, ties to the earlier
    (better-scored) point. Returns positions into ``keys``."""
    n_knobs = max((len(k) for k in keys), default=0)
    covered: list[set[int]] = [set() for _ in range(n_knobs)]
    remain = list(range(len(keys)))
    picked: list[int] = []
    for _ in range(min(num, len(keys))):
        best, best_gain = remain[0], -1.0
        for x in remain:
            gain = knob_weight * sum(1 for i, v in enumerate(keys[x]) if v not in covered[i])
            if gain > best_gain:
                best, best_gain = x, gain
        picked.append(best)
        remain.remove(best)
        for i, v in enumerate(keys[best]):
            covered[i].add(v)
    return picked
