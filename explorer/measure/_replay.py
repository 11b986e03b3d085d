"""``ReplayMeasurer``: answers from results measured earlier, without building anything.

For fast, deterministic tests of search strategies (Kernel Tuner's ``SimulationRunner``): record
real measurements once, then let any number of searches "measure" against the recording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from explorer.core import Candidate, MeasureResult, trace_key
from explorer.measure._base import Measurer
from explorer.types import JSON, MeasureStatus

Lookup = Callable[[Candidate], "MeasureResult | None"]


class ReplayMeasurer(Measurer):
    """Return stored results for known traces and ``INVALID`` for the rest.

    Args:
        records_or_lookup: either a mapping from trace (JSON text, any formatting, or the
            canonical ``trace_key``) to ``MeasureResult``, or a callable taking a ``Candidate``
            and returning its ``MeasureResult`` or ``None`` when unknown.

    Example:
        >>> from explorer.measure import MeasureResult, ReplayMeasurer
        >>> from explorer.types import MeasureStatus
        >>> m = ReplayMeasurer({"[[], []]": MeasureResult(MeasureStatus.OK, run_secs=(1e-3,))})
        >>> m.lookup_trace([[], []]).median_secs
        0.001
    """

    def __init__(self, records_or_lookup: Mapping[str, MeasureResult] | Lookup) -> None:
        self._table: dict[str, MeasureResult] | None = None
        self._lookup: Lookup | None = None
        if isinstance(records_or_lookup, Mapping):
            table = {}
            for key, result in records_or_lookup.items():
                if not isinstance(result, MeasureResult):
                    raise TypeError(f"values must be MeasureResult (got {type(result).__name__})")
                table[trace_key(key)] = result
            self._table = table
        elif callable(records_or_lookup):
            self._lookup = records_or_lookup
        else:
            raise TypeError(
                "ReplayMeasurer takes a mapping trace -> MeasureResult or a callable "
                f"Candidate -> MeasureResult | None (got {type(records_or_lookup).__name__})"
            )
        self.num_measured = 0  # how many candidates were asked for, known or not

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[Candidate, MeasureResult]]) -> ReplayMeasurer:
        """Build from ``(candidate, result)`` pairs, e.g. a recorded search; later pairs win."""
        return cls({trace_key(c.trace): r for c, r in pairs})

    def __len__(self) -> int:
        return len(self._table) if self._table is not None else 0

    def lookup_trace(self, trace: JSON) -> MeasureResult | None:
        """The stored result for a trace (mapping form only), or ``None``."""
        if self._table is None:
            raise TypeError("lookup_trace needs the mapping form of ReplayMeasurer")
        return self._table.get(trace_key(trace))

    def measure(
        self,
        candidates: Sequence[Candidate],
        *,
        best_secs: float | None = None,
        reference: bool = False,
    ) -> list[MeasureResult]:
        """The stored result of every candidate; ``INVALID`` for traces never recorded
        (``best_secs`` and ``reference`` change nothing: nothing is timed)."""
        out = []
        for cand in candidates:
            if not isinstance(cand, Candidate):
                raise TypeError(f"expected a Candidate (got {type(cand).__name__})")
            self.num_measured += 1
            found = self._find(cand)
            out.append(
                found
                if found is not None
                else MeasureResult(
                    MeasureStatus.INVALID, error_msg="no recorded result for this trace"
                )
            )
        return out

    def remeasure(
        self,
        candidates: Sequence[Candidate],
        *,
        rounds: int = 3,
        previous: Sequence[MeasureResult] | None = None,
    ) -> list[MeasureResult]:
        """Same as ``measure``: a recording has nothing new to add, so nothing is pooled."""
        return self.measure(candidates)

    def _find(self, cand: Candidate) -> MeasureResult | None:
        if self._table is not None:
            return self._table.get(trace_key(cand.trace))
        assert self._lookup is not None
        result: Any = self._lookup(cand)
        if result is not None and not isinstance(result, MeasureResult):
            raise TypeError(f"the lookup returned {type(result).__name__}, not a MeasureResult")
        return result
