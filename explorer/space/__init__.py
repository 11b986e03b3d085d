"""The search space every strategy shares: MetaSchedule's sketches and their sampling knobs."""

from __future__ import annotations

from explorer.space._design_space import DesignSpace, Knob, Sample
from explorer.space._knob_space import KnobDomain, KnobSpace, Point, factorizations

__all__ = [
    "DesignSpace",
    "Knob",
    "KnobDomain",
    "KnobSpace",
    "Point",
    "Sample",
    "factorizations",
]
