"""The notebook explorer: ipywidgets panels and plotly dashboards, thin clients of ``explorer``.

Everything here can also be done with ``explorer`` alone; these widgets only call its public API.
"""

from __future__ import annotations

from widgets._imports import check_explorer, require

check_explorer()  # this project's explorer, not another package of that name

require("ipywidgets")
require("plotly")
require("anywidget")

from explorer import plots  # noqa: E402
from explorer.plots import (  # noqa: E402
    update_convergence_figure,
    update_knob_effects_figure,
    update_nas_pareto_figure,
    update_predicted_vs_measured_figure,
    update_strategy_comparison_figure,
)
from widgets._plot import LiveFigure, live  # noqa: E402  (after the install-hint checks)
from widgets.cost import CostPanel  # noqa: E402
from widgets.dashboards import Dashboards  # noqa: E402
from widgets.editor import ScheduleEditor  # noqa: E402
from widgets.explorer import Explorer  # noqa: E402
from widgets.expression import ExpressionBuilder  # noqa: E402
from widgets.fleet import FleetPanel  # noqa: E402
from widgets.nas import NasPanel  # noqa: E402
from widgets.search_panel import SearchPanel  # noqa: E402

# explorer.plots' figures, drawn live in the notebook (their update functions work on them).
make_convergence_figure = live(plots.make_convergence_figure)
make_knob_effects_figure = live(plots.make_knob_effects_figure)
make_nas_pareto_figure = live(plots.make_nas_pareto_figure)
make_predicted_vs_measured_figure = live(plots.make_predicted_vs_measured_figure)
make_race_figure = live(plots.make_race_figure)
make_strategy_comparison_figure = live(plots.make_strategy_comparison_figure)
make_transfer_figure = live(plots.make_transfer_figure)

__all__: list[str] = [
    "CostPanel",
    "Dashboards",
    "Explorer",
    "ExpressionBuilder",
    "FleetPanel",
    "LiveFigure",
    "NasPanel",
    "ScheduleEditor",
    "SearchPanel",
    "make_convergence_figure",
    "make_knob_effects_figure",
    "make_nas_pareto_figure",
    "make_predicted_vs_measured_figure",
    "make_race_figure",
    "make_strategy_comparison_figure",
    "make_transfer_figure",
    "update_convergence_figure",
    "update_knob_effects_figure",
    "update_nas_pareto_figure",
    "update_predicted_vs_measured_figure",
    "update_strategy_comparison_figure",
]
