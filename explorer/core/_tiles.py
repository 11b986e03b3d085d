"""Perfect tilings: the ways to cut a loop into ``n`` nested loops whose extents multiply to
its own (the knob space's tile domains, and what a trace's tile decisions are checked against,
docs/tvm-notes.md section 3)."""

from __future__ import annotations

import functools
import math


@functools.lru_cache(maxsize=256)
def factorizations(extent: int, n: int, max_innermost: int) -> tuple[tuple[int, ...], ...]:
    """Every ordered ``n``-tuple of positive ints with product ``extent`` and last <= the max."""
    if n == 1:
        return ((extent,),) if max_innermost <= 0 or extent <= max_innermost else ()
    out: list[tuple[int, ...]] = []
    for d in divisors(extent):
        out.extend((d, *rest) for rest in factorizations(extent // d, n - 1, max_innermost))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def divisors(x: int) -> tuple[int, ...]:
    """The positive divisors of ``x``, ascending (the factors a loop or a dimension splits by)."""
    small = [d for d in range(1, math.isqrt(x) + 1) if x % d == 0]
    return tuple(sorted({*small, *(x // d for d in small)}))
