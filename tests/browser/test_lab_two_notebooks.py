"""Two notebooks, two kernels, one database, in one real JupyterLab: what one searches, the
other's dashboards show, without a click in it; and a reload of the first page shows it still."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    assert_page_clean,
    choose,
    explorer_page,
    kernel_eval,
    kernel_settled,
    options_of,
    plot_points,
    plot_svg_points,
    save_and_reload,
    select_of,
    set_text,
    shot,
    show_tab,
    wait_plot_points,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

SEARCH_TIMEOUT = 300_000  # ms: 4 trials (build + time each), the baseline and the re-timing
SHOWN_TIMEOUT = 60_000  # ms: the first notebook's poll of the database (seconds) and a redraw


def _cells(db: Path) -> list[str]:
    return [
        "from explorer.measure import LocalMeasurer\nfrom widgets import Explorer",
        f"ex = Explorer(store={str(db)!r}, measurer=LocalMeasurer())",
        "ex",
    ]


def dashboards_say(page: Any) -> Any:
    return lambda: f"the dashboards say: {kernel_eval(page, 'print(ex.dashboards.status.value)')}"


def test_a_search_in_a_second_notebook_shows_in_the_first_and_after_its_reload(
    jupyter_lab: Any, browser: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    db = tmp_path / "shared.db"  # these two notebooks', and no other test's
    with explorer_page(jupyter_lab, browser, request, "first.ipynb", _cells(db)) as first:
        first.set_viewport_size({"width": 1400, "height": 1000})
        show_tab(first, "Dashboards")
        kernel_settled(first)
        summary = first.locator(".se-dashboards-status").first
        expect(summary).not_to_contain_text(re.compile(r"\b[1-9]\d* trials?\b"))
        before = max(plot_points(first, "se-convergence"), 0)

        with explorer_page(jupyter_lab, browser, request, "second.ipynb", _cells(db)) as second:
            second.set_viewport_size({"width": 1400, "height": 1000})
            # Both opened the same default workload: the second's search is the first's too.
            assert kernel_eval(second, "print(ex.session.workload.key())") == kernel_eval(
                first, "print(ex.session.workload.key())"
            )
            show_tab(second, "Search")
            if any(o.startswith("random") for o in options_of(select_of(second, "se-strategy"))):
                choose(second, "se-strategy", "random")  # no model to train: seconds
            set_text(second, "se-trials", "4")
            start = second.locator(".se-start").first
            expect(start).to_be_enabled()
            start.click()
            kernel_settled(second)
            expect(second.locator(".se-stop").first).to_be_enabled()
            started = time.monotonic()
            expect(start).to_be_enabled(timeout=SEARCH_TIMEOUT)  # the search ended by itself
            print(f"second notebook: its search took {time.monotonic() - started:.1f} s")
            status = second.locator(".se-search-status").first.inner_text()
            assert re.search(r"\b4\s*(?:/\s*4\s*)?trials", status), status
            assert_page_clean(second, second.log, "after the second notebook's search")

        # No click in the first page from here on: only its poll of the database brings it in.
        t0 = time.monotonic()
        shown = wait_plot_points(
            first, "se-convergence", lambda n: n > before, SHOWN_TIMEOUT, dashboards_say(first)
        )
        print(f"first notebook: {shown} point(s) {time.monotonic() - t0:.1f} s after the search")
        expect(summary).to_contain_text(re.compile(r"\b4 trials\b"), timeout=SHOWN_TIMEOUT)
        assert plot_svg_points(first, "se-convergence") > 0, "plotly holds data, draws nothing"
        shot(first, "two_notebooks_first_after_the_second_searched")

        # A reload of the first page (its kernel kept): the widgets come back with the run.
        save_and_reload(first)
        first.locator(".se-explorer").first.wait_for(state="visible", timeout=60_000)
        show_tab(first, "Dashboards")
        again = wait_plot_points(
            first, "se-convergence", lambda n: n >= shown, SHOWN_TIMEOUT, dashboards_say(first)
        )
        assert again == shown, f"{again} point(s) after the reload, {shown} before it"
        expect(first.locator(".se-dashboards-status").first).to_contain_text(
            re.compile(r"\b4 trials\b")
        )
        shot(first, "two_notebooks_first_after_its_reload")
        assert_page_clean(first, first.log, "after the reload")
