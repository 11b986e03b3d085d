"""The Explorer's tab titles after a reload of the page: a click on one shows its tab, in the page
and in the kernel (``ex.tabs.selected_index``).

Reproduced on main (a new user on notebook 07, then here): after a reload, clicks on the tab
titles of an explorer further down a notebook did nothing, while the kernel could still switch
tabs. The reloaded notebook attaches such a cell when the page is idle, and its widget views
arrive while it is being attached: the ipywidgets Tab gets Lumino's after-attach message without
the before-attach one, on which Lumino's TabBar adds its pointer listeners. The explorer's
JupyterLab extension (plugin ``schedule-explorer:tab-clicks``) adds them on after-attach too.
This test fails without it (checked by removing the plugin) and passes with it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from browser_helpers import (
    assert_page_clean,
    explorer_page,
    kernel_json,
    save_and_reload,
    settle,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PLUGIN = "schedule-explorer:tab-clicks"
CURRENT = re.compile(r"\blm-mod-current\b")
# A few cells with output above the explorer put its cell below the first screen.
FILLER = "print('\\n'.join(map(str, range(40))))"


def kernel_tab(page: Any, want: int, tries: int = 40) -> int:
    """The kernel's selected tab, once it is ``want`` (the click's update may still be queued
    behind the kernel's current work) or after ``tries`` looks half a second apart."""
    seen = kernel_json(page, "ex.tabs.selected_index")
    for _ in range(tries):
        if seen == want:
            break
        settle(page, 500)
        seen = kernel_json(page, "ex.tabs.selected_index")
    return int(seen)


def test_tab_titles_switch_tabs_after_a_reload(
    jupyter_lab: Any, browser: Any, request: Any
) -> None:
    cells = ["from widgets import Explorer", *[FILLER] * 4, "ex = Explorer()", "ex"]
    with explorer_page(jupyter_lab, browser, request, "tabs_reload.ipynb", cells) as page:
        page.set_viewport_size({"width": 1280, "height": 800})
        tabs = page.locator(".se-tabs .lm-TabBar-tab")
        titles = kernel_json(page, "list(ex.tabs.titles)")
        save_and_reload(page)
        page.wait_for_function(f"() => window.jupyterapp.isPluginActivated('{PLUGIN}')")
        expect(tabs.filter(has_text="Schedule").first).to_have_class(CURRENT, timeout=60_000)
        for title in ("Search", "Model", "Schedule"):
            tab = tabs.filter(has_text=title).first
            tab.click()
            expect(tab).to_have_class(CURRENT, timeout=10_000)
            assert kernel_tab(page, titles.index(title)) == titles.index(title), title
        assert_page_clean(page, page.log, "after clicking the tabs of a reloaded page")
