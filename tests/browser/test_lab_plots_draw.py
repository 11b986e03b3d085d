"""Every plot draws, every time (issue 21): after Run All of the tour, the tour's last plot
showed empty axes (16 traces in the kernel) and 3 of the 4 Dashboards plots were blank; after a
page reload every plot of every open explorer was blank, with "[anywidget] Failed to initialize
model" in the console. plotly's FigureWidget was the cause (``widgets._plot`` says why).

The page runs 4x slower than the machine (a busy laptop), which made the old plots fail every
time. The traces plotly.js DREW are counted in the page (``browser_helpers.DRAWN_TRACES_JS``)
and compared with the kernel's figures, at first display, after Run All and after a reload.
Screenshots: ``artifacts/browser/plots_*``.

After a reload the page gets every live widget back from the kernel in one reply, and an
output whose widget is not back within 2 s shows "Error displaying widget: model not found" for
good. That reply was 5.4 MB (plotly.js 4.8 MB of it, and 832 widgets for the tour's two
explorers); it arrived 2.2 s after the request and every output of the tour failed, the
explorers included (3 of 5 runs beside two CPU burners, once on a quiet machine). plotly.js now
comes with its model's opening only (a reloaded page asks for it), and an explorer's other tabs
are built when first opened: the reply is 0.57 MB and arrived in 0.35 s (page slowed 4x), and
this test passed 3 of 3 beside two CPU burners. It then failed in both clean-clone CI runs of
2026-11-27 and in 2 of 5 runs beside two burners here: the explorer's output said "model not
found" although the reply came 1.6 s after it started waiting. The widget manager's wait gave
up without a last look at a model the restore had registered during its last sleep
(test_lab_widget_restore replays it; the explorer's JupyterLab extension takes that look).
Run alone (``serial``): a page and a kernel beside the parallel suite would test the suite's
load.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from browser_helpers import (
    KERNEL_TRACES,
    NOTEBOOKS,
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
