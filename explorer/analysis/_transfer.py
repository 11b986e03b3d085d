"""How a schedule tuned for one target fares on another: the "transfer" view of a fleet.

Each target's best schedule is measured on every target (``explorer.fleet.measure_transfer``
does the measuring, interleaved per target so that load hits every schedule alike); this module
turns those measurements into a table: ``slowdown(a, b)`` is how many times slower the schedule
tuned for ``a`` runs on ``b`` than ``b``'s own best, so the diagonal is 1 and a row shows what
tuning for the wrong target costs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from explorer.core import MeasureResult


@dataclass(frozen=True, slots=True)
class TransferCell:
    """The best schedule tuned for ``tuned_for`` (a target key), measured on ``measured_on``."""

    tuned_for: str
    measured_on: str
    result: MeasureResult

    @property
    def secs(self) -> float | None:
        """Its median time, when the measurement is one to trust (``OK``)."""
        return self.result.median_secs if self.result.is_ok else None


@dataclass(frozen=True, slots=True)
class TransferInfo:
    """Every (tuned for, measured on) pair of ``targets``, for one workload."""

    workload_key: str
    targets: tuple[str, ...]
    cells: tuple[TransferCell, ...]

    def cell(self, tuned_for: str, measured_on: str) -> TransferCell | None:
        for c in self.cells:
            if c.tuned_for == tuned_for and c.measured_on == measured_on:
                return c
        return None

    def secs(self, tuned_for: str, measured_on: str) -> float | None:
        c = self.cell(tuned_for, measured_on)
        return None if c is None else c.secs

    def slowdown(self, tuned_for: str, measured_on: str) -> float:
        """Time of ``tuned_for``'s best on ``measured_on`` over ``measured_on``'s own best
        there (NaN where either did not measure OK)."""
        mine, own = self.secs(tuned_for, measured_on), self.secs(measured_on, measured_on)
        if mine is None or own is None or own <= 0:
            return math.nan
        return mine / own

    def matrix(self) -> list[list[float]]:
        """``slowdown`` with rows = tuned for, columns = measured on, in ``targets`` order."""
        return [[self.slowdown(a, b) for b in self.targets] for a in self.targets]


def transfer_info(workload_key: str, cells: Sequence[TransferCell]) -> TransferInfo:
    """The table of ``cells``; targets in order of first appearance.

    Raises:
        ValueError: two cells for the same pair.
    """
    seen: set[tuple[str, str]] = set()
    targets: list[str] = []
    for c in cells:
        pair = (c.tuned_for, c.measured_on)
        if pair in seen:
            raise ValueError(f"two measurements of {pair[0]}'s best on {pair[1]}")
        seen.add(pair)
        for key in pair:
            if key not in targets:
                targets.append(key)
    return TransferInfo(workload_key, tuple(targets), tuple(cells))
