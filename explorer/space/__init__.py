"""The search space every strategy shares: MetaSchedule's sketches and their sampling knobs."""

from __future__ import annotations

from explorer.core import factorizations
from explorer.space._design_space import SAMPLING_KINDS, DesignSpace, Knob, Sample
from explorer.space._knob_space import KnobDomain, KnobSpace, Point
from explorer.space._nearest import StartMapping, nearest_point, start_mapping

__all__ = [
    "SAMPLING_KINDS",
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
