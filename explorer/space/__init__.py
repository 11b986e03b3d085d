"""The search space every strategy shares: MetaSchedule's sketches and their sampling knobs."""

from __future__ import annotations

from explorer.space._design_space import DesignSpace, Knob, Sample, decisions_key

__all__ = ["DesignSpace", "Knob", "Sample", "decisions_key"]
