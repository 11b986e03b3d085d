"""The browser layer's own error detectors see what they claim to see (a blind check passes
everything). A tiny notebook with a failing cell and a Button whose callback raises."""

from __future__ import annotations

import pytest
from browser_helpers import (
    error_outputs,
    log_console_count,
    open_notebook,
    page_problems,
    pick_label,
    widget_errors,
    write_notebook,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_detectors_catch_tracebacks_and_callback_errors(jupyter_lab, page):
    name = write_notebook(
        jupyter_lab.root,
        "detectors_probe.ipynb",
        [
            "import ipywidgets as w\n"
            "b = w.Button(description='Explode')\n"
            "b.on_click(lambda _b: 1 / 0)\n"
            "b",
            "raise RuntimeError('expected by the detector self-test')",
        ],
    )
    try:
        open_notebook(page, jupyter_lab.lab_url(name))
        # Run All stops at the failing cell: wait for its traceback, not for every prompt.
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        failed = page.locator(".jp-OutputArea-output", has_text="expected by the detector")
        expect(failed.first).to_be_visible(timeout=60_000)
        assert any("RuntimeError" in t for t in error_outputs(page)), error_outputs(page)
        assert widget_errors(page) == []

        # A widget callback that raises in the kernel shows up only in the log console badge.
        assert log_console_count(page) == ""
        page.get_by_role("button", name="Explode").click()
        expect(page.locator(".jp-LogConsoleStatusItem").first).to_contain_text("1", timeout=15_000)
        problems = page_problems(page, page.log)
        assert any("log console" in p and "ZeroDivisionError" in p for p in problems), problems
    finally:
        jupyter_lab.shutdown_sessions(name)


def test_an_option_is_found_by_its_name_whichever_spaces_either_side_uses():
    """ipywidgets shows a label's spaces as no-break spaces; a test may write either."""
    options = ["this\xa0machine", "a\xa0fleet\xa0(TVM\xa0RPC\xa0tracker)", "a recording"]
    assert pick_label(options, "a fleet") == options[1]
    assert pick_label(options, "a\xa0fleet") == options[1]
    assert pick_label(options, "a\xa0recording") == options[2]
    assert pick_label(options, "a fle") is None  # a name stops at a word's end
    assert pick_label(options, "fleet") is None
