"""The notebook explorer: ipywidgets panels and plotly dashboards, thin clients of ``explorer``.

Everything here can also be done with ``explorer`` alone; these widgets only call its public API.
"""

from __future__ import annotations

from widgets._imports import require

require("ipywidgets")
require("plotly")

from explorer._plots_nas import (  # noqa: E402
    make_nas_pareto_figure,
    update_nas_pareto_figure,
)
from explorer.plots import (  # noqa: E402
    make_convergence_figure,
    make_knob_effects_figure,
    make_predicted_vs_measured_figure,
    make_strategy_comparison_figure,
    update_convergence_figure,
    update_knob_effects_figure,
    update_predicted_vs_measured_figure,
    update_strategy_comparison_figure,
)
from widgets.cost import CostPanel  # noqa: E402  (after the install-hint checks)
from widgets.dashboards import Dashboards  # noqa: E402
from widgets.editor import ScheduleEditor  # noqa: E402
from widgets.explorer import Explorer  # noqa: E402
from widgets.expression import ExpressionBuilder  # noqa: E402
from widgets.fleet import FleetPanel  # noqa: E402
from widgets.nas import NasPanel  # noqa: E402
from widgets.search_panel import SearchPanel  # noqa: E402

__all__: list[str] = [
    "CostPanel",
    "Dashboards",
    "Explorer",
    "ExpressionBuilder",
    "FleetPanel",
    "NasPanel",
    "ScheduleEditor",
    "SearchPanel",
    "make_convergence_figure",
    "make_knob_effects_figure",
    "make_nas_pareto_figure",
    "make_predicted_vs_measured_figure",
    "make_strategy_comparison_figure",
    "update_convergence_figure",
    "update_knob_effects_figure",
    "update_nas_pareto_figure",
    "update_predicted_vs_measured_figure",
    "update_strategy_comparison_figure",
]
