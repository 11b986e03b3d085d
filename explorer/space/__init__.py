"""The search space every strategy shares: MetaSchedule's sketches and their sampling knobs."""

from __future__ import annotations

from explorer.space._design_space import DesignSpace, Knob, Sample
from explorer.space._knob_space import KnobDomain, KnobSpace, Point, factorizations
from explorer.space._nearest import StartMapping, nearest_point, start_mapping

__all__ = [
    "DesignSpace",
    "Knob",
    "KnobDomain",
    "KnobSpace",
    "Point",
    "Sample",
    "StartMapping",
    "factorizations",
    "nearest_point",
    "start_mapping",
]
