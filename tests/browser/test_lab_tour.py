"""The tour notebook, run top to bottom in a real JupyterLab in headless Chromium."""

from __future__ import annotations

import pytest
from browser_helpers import assert_page_clean, open_notebook, reveal, run_all_cells, shot
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_tour_runs_all_cells_without_errors(jupyter_lab, lab_notebook, page):
    open_notebook(page, jupyter_lab.lab_url(lab_notebook))
    shot(page, "01_tour_opened")

    seconds = run_all_cells(page)
    print(f"tour: run all cells took {seconds:.1f}s")

    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")
    assert cells.count() > 0
    # every code cell ran (the helper waited for [n] prompts) and the last one produced output
    last = cells.last
    last.scroll_into_view_if_needed()
    expect(last.locator(".jp-OutputArea-output").first).to_be_visible()
    shot(page, "01_tour_ran_end")
    cells.first.scroll_into_view_if_needed()
    shot(page, "01_tour_ran_top")

    # what the tour displays has rendered: its two explorers (the first cell's, and the one
    # that opens the best schedule) and plotly figures (their dashboards, the last cell's)
    explorer = page.locator(".se-explorer")
    expect(explorer).to_have_count(2)
    reveal(page, explorer.first)
    expect(explorer.first).to_be_visible()
    shot(page, "01_tour_explorer")
    plots = page.locator(".jp-OutputArea-output .js-plotly-plot")
    expect(plots).to_have_count(1)  # the last cell's; each explorer builds a tab when opened
    for tabs in explorer.locator(".se-tabs").all():
        tabs.locator(".lm-TabBar-tab").filter(has_text="Dashboards").click()
    # and 4 dashboards per explorer (each built when its tab is first opened: seconds when busy)
    expect(plots).to_have_count(9, timeout=60_000)
    for i in range(plots.count()):
        expect(plots.nth(i).locator(".main-svg").first).to_be_attached()
    shot(page, "01_tour_last_figure", plots.last)

    assert_page_clean(page, page.log, "after running the tour notebook")
