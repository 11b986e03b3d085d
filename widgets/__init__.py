"""The notebook explorer: ipywidgets panels and plotly dashboards, thin clients of ``explorer``.

Everything here can also be done with ``explorer`` alone; these widgets only call its public API.
"""

from __future__ import annotations

from widgets._imports import require

require("ipywidgets")
require("plotly")

__all__: list[str] = []
