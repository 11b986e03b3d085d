"""Every plot draws, every time (issue 21): after Run All of the tour, the tour's last plot
showed empty axes (16 traces in the kernel) and 3 of the 4 Dashboards plots were blank; after a
page reload every plot of every open explorer was blank, with "[anywidget] Failed to initialize
model" in the console. plotly's FigureWidget was the cause (``widgets._plot`` says why).

The page runs 4x slower than the machine (a busy laptop), which made the old plots fail every
time. The traces plotly.js DREW are counted in the page (``browser_helpers.DRAWN_TRACES_JS``)
and compared with the kernel's figures, at first display, after Run All and after a reload.
Screenshots: ``artifacts/browser/plots_*``.

Run alone (``serial``): with the CPU shared (two busy processes beside it, or the rest of the
suite) a reload can still come back with "Error displaying widget: model not found" on every
widget, the explorer itself included. The page restores the kernel's widgets twice; the first,
empty restore lets each output look its model up for 2 s, and when the real one (832 widgets
here) takes longer than that, the outputs give up for good. plotly.js no longer rides in that
reply's JSON (tests/widgets/test_live_figure.py), which shortens it but does not close the race.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from browser_helpers import (
    KERNEL_TRACES,
    assert_page_clean,
    busy_laptop,
    kernel_eval,
    kernel_json,
    new_page,
    open_notebook,
    reveal,
    run_all_cells,
    save_and_reload,
    save_failure_screenshot,
    settle,
    shot,
    wait_drawn,
)
from conftest import NOTEBOOKS

pytestmark = [pytest.mark.browser, pytest.mark.serial]

# After the tour: a short search with a cost model, so that the predicted-vs-measured plot
# (WebGL) has points too, and every open explorer's dashboards redraw live. (Its timings are
# kept however noisy: the plots are under test, not the machine's quiet.)
MODEL_SEARCH = """\
from explorer.measure import MeasureConfig

with LocalMeasurer(MeasureConfig(max_spread=float("inf"))) as measurer:
    tuner = Tuner(measurer=measurer, store=store, batch_size=4)
    _ = tuner.run(w, target, "autotvm", max_trials=8, seed=0)
"""
DASHBOARDS = ("convergence", "pred-vs-meas", "comparison", "knobs")
FIGURES = {
    "convergence": "convergence_fig",
    "pred-vs-meas": "pred_vs_meas_fig",
    "comparison": "comparison_fig",
    "knobs": "knobs_fig",
}


def kernel_dashboards(page: Any, explorer: str) -> list[dict[str, int]]:
    """The traces of an explorer's four dashboards in the kernel, brought up to date first."""
    kernel_eval(page, f"{explorer}.dashboards.refresh()")
    figures = ", ".join(f"_se_traces({explorer}.dashboards.{FIGURES[d]})" for d in DASHBOARDS)
    return list(kernel_json(page, f"[{figures}]"))


def show_dashboards(page: Any) -> None:
    """Select the Dashboards tab of every explorer on the page, like a user would."""
    for explorer in page.locator(".se-explorer").all():
        tab = explorer.locator(".se-tabs .lm-TabBar-tab").filter(has_text="Dashboards").first
        tab.scroll_into_view_if_needed()
        tab.click()
    settle(page, 500)


def check_drawn(page: Any, want: dict[str, Any], when: str, timeout: float) -> None:
    """Show every explorer's dashboards, wait until every plot draws its traces, take
    screenshots, check that nothing broke on the page."""
    show_dashboards(page)
    wait_drawn(page, want, when, timeout=timeout)
    tag = when.replace(" ", "_")
    shot(page, f"plots_tour_last_plot_{tag}", want["the tour's last plot"][0].first)
    for i, explorer in enumerate(page.locator(".se-explorer").all()):
        reveal(page, explorer.locator(".se-pred-vs-meas").first)
        shot(page, f"plots_tour_dashboards_{i}_{tag}", explorer)
    assert_page_clean(page, page.log, when)


@pytest.mark.xfail(
    strict=False,
    reason="known defect, open (issue 21): after a reload, ipywidgets' restore can leave outputs "
    "'model not found' (seen beside two burners, and once quiet: the tour's last plot); it "
    "still runs every time and reports XPASS when every plot draws",
)
def test_every_tour_plot_draws_after_run_all_and_after_a_reload(jupyter_lab, browser, request):
    name = "plots_tour.ipynb"
    nb = json.loads((NOTEBOOKS / "00_tour.ipynb").read_text())
    search = {"cell_type": "code", "execution_count": None, "id": "model-search"}
    nb["cells"].append({**search, "metadata": {}, "outputs": [], "source": MODEL_SEARCH})
    (jupyter_lab.root / name).write_text(json.dumps(nb))
    ctx, page, plog = new_page(browser)
    page.log = plog
    try:
        open_notebook(page, jupyter_lab.lab_url(name))
        busy_laptop(page)
        run_all_cells(page)
        kernel_eval(page, KERNEL_TRACES)
        tour = kernel_json(page, "_se_traces(Out[max(Out)])")  # the tour's last output
        assert tour.get("scatter", 0) > 0, tour  # the runs' lines and bands, the baseline
        dashboards = kernel_dashboards(page, "ex") + kernel_dashboards(page, "best_view")
        assert all(dashboards), dashboards  # each of the 8 figures has traces to draw
        cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")
        tour_plot = cells.filter(has_text="make_convergence_figure(info)").locator(
            ".jp-OutputArea"
        )
        boxes = page.locator(", ".join(f".se-explorer .se-{d}" for d in DASHBOARDS))
        want = {
            "the tour's last plot": (tour_plot, [tour]),
            "the two explorers' dashboards": (boxes, dashboards),
        }
        check_drawn(page, want, "after Run All", timeout=120)
        save_and_reload(page)
        busy_laptop(page)
        check_drawn(page, want, "after a reload", timeout=180)
    finally:
        save_failure_screenshot(page, request)
        ctx.close()
        jupyter_lab.shutdown_sessions(name)
