"""The explorer widget in a real JupyterLab, used like a user would: edit, fail, measure, search.

One small notebook (``from widgets import Explorer``; ``ex = Explorer()``; ``ex``) is opened and
run once for the module; the tests then drive its UI in order, each asserting on what changed (so
each holds whatever state the previous one left). Selectors follow the widgets' DOM class
contract (``se-*`` classes; inputs are nested inside: ``.se-trials input``, ``.se-primitive
select``). Screenshots go to ``artifacts/browser/`` (``$BROWSER_ARTIFACTS``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import (
    KERNEL_IDLE_JS,
    assert_page_clean,
    choose,
    full_shot,
    new_page,
    open_notebook,
    options_of,
    plot_points,
    plot_svg_points,
    reveal,
    run_all_cells,
    save_failure_screenshot,
    select_of,
    set_text,
    shot,
    stderr_outputs,
    visible_text,
    write_notebook,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

NOTEBOOK = "explorer_ui.ipynb"
CELLS = ["from widgets import Explorer", "ex = Explorer()", "ex"]
MEASURE_TIMEOUT = 180_000  # ms: first use starts the measurer's worker processes
SEARCH_TIMEOUT = 300_000  # ms: 8 trials (build + time each), plus re-measuring the best
LATENCY = re.compile(r"\d+(?:\.\d+)?\s*ms\b")


@pytest.fixture(scope="module")
def ui(jupyter_lab: Any, browser: Any) -> Iterator[Any]:
    """A page showing a freshly run explorer notebook (shared by the tests of this module)."""
    ctx, page, plog = new_page(browser)
    page.log = plog
    name = write_notebook(jupyter_lab.root, NOTEBOOK, CELLS)
    try:
        open_notebook(page, jupyter_lab.lab_url(name))
        seconds = run_all_cells(page)
        print(f"explorer notebook: run all cells took {seconds:.1f}s")
        root = page.locator(".se-explorer").first
        expect(root).to_be_visible(timeout=60_000)
        assert_page_clean(page, plog, "after running the explorer notebook")
        ensure_workload(page)
        shot(page, "02_explorer_rendered")
    except BaseException:
        full_shot(page, "FAILED_explorer_setup")
        ctx.close()
        jupyter_lab.shutdown_sessions(name)
        raise
    try:
        yield page
    finally:
        others = [e for e in stderr_outputs(page) if "Traceback" not in e]
        if others:
            print("stderr shown in the explorer notebook:\n" + "\n---\n".join(others))
        ctx.close()
        jupyter_lab.shutdown_sessions(name)


@pytest.fixture(autouse=True)
def _evidence(ui: Any, request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    save_failure_screenshot(ui, request)


def ensure_workload(page: Any) -> None:
    """``Explorer()`` opens a default workload; if it shows none, build a small matmul."""
    script = page.locator(".se-script").first
    reveal(page, script)
    try:
        expect(script.locator("pre").first).to_be_visible(timeout=10_000)
        return
    except AssertionError:
        pass
    choose(page, "se-expr-family", "matmul")
    for dim in ("M", "N", "K"):
        if page.locator(f".se-expr-param-{dim}").count():
            set_text(page, f"se-expr-param-{dim}", "128")
    page.locator(".se-expr-build").first.click()
    expect(script.locator("pre")).to_be_visible(timeout=60_000)


def script_text(page: Any) -> str:
    return page.locator(".se-script").first.inner_text()


def choose_primitive(page: Any, name: str, params: list[str]) -> None:
    """Pick a primitive and wait until its form (exactly ``params``) replaced the old one."""
    choose(page, "se-primitive", name)
    page.wait_for_function(
        """(want) => {
          const ed = document.querySelector('.se-editor');
          if (!ed) return false;
          const have = new Set();
          for (const el of ed.querySelectorAll('[class*="se-param-"]'))
            for (const c of el.classList) {
              const m = c.match(/^se-param-([a-z_]+)$/);
              if (m) have.add(m[1]);
            }
          return want.length === have.size && want.every(p => have.has(p));
        }""",
        arg=params,
    )


def apply_step(page: Any, primitive: str, loop: str, factors: str | None = None) -> None:
    params = ["loop", "factors"] if factors is not None else ["loop"]
    choose_primitive(page, primitive, params)
    choose(page, "se-param-loop", loop)
    if factors is not None:
        set_text(page, "se-param-factors", factors)
    page.locator(".se-apply").first.click()


def wait_script_changed(page: Any, before: str, timeout: float = 30_000) -> str:
    page.wait_for_function(
        "(b) => { const s = document.querySelector('.se-script');"
        " return !!s && s.innerText !== b; }",
        arg=before,
        timeout=timeout,
    )
    return script_text(page)


def wait_kernel_settled(page: Any, timeout: float = 30_000) -> None:
    """Wait until the kernel processed the widget messages we sent (it is idle again)."""
    page.wait_for_timeout(200)  # let the kernel's "busy" status arrive first
    page.wait_for_function(KERNEL_IDLE_JS, timeout=timeout, polling=100)


# ------------------------------------------------------------------------------------- tests


def test_editor_split_changes_the_script(ui):
    page = ui
    script = page.locator(".se-script").first
    reveal(page, script)
    before = script_text(page)
    assert "T.prim_func" in before or "def main" in before, before[:500]

    apply_step(page, "split", "i", "None, 16")
    after = wait_script_changed(page, before)

    assert "i_0" in after and "i_1" in after, after
    expect(script.locator(".se-changed").first).to_be_visible()  # the diff is highlighted
    expect(page.locator(".se-error").first).to_be_hidden()
    loop_options = options_of(select_of(page, "se-param-loop"))
    assert "i_0" in loop_options and "i_1" in loop_options, loop_options
    shot(page, "03_editor_after_split", page.locator(".se-editor").first)
    shot(page, "03_explorer_after_split")

    # Undo restores the exact script, Redo brings the split back
    page.locator(".se-undo").first.click()
    assert wait_script_changed(page, after) == before
    page.locator(".se-redo").first.click()
    assert wait_script_changed(page, before) == after
    assert_page_clean(page, page.log, "after a split")


def test_editor_illegal_steps_show_the_banner_and_keep_the_script(ui):
    page = ui
    banner = page.locator(".se-error").first
    reveal(page, page.locator(".se-script").first)
    before = script_text(page)

    # 7 * 11 does not multiply to j's extent (128) and no factor is inferred
    apply_step(page, "split", "j", "7, 11")
    expect(banner).to_be_visible(timeout=30_000)
    message = visible_text(banner)
    assert re.search(r"factor", message, re.I), message
    wait_kernel_settled(page)
    assert script_text(page) == before, "a refused split changed the TVMScript"
    shot(page, "04_error_bad_factors", page.locator(".se-editor").first)

    # k is the reduction loop: it cannot be vectorized
    apply_step(page, "vectorize", "k")
    expect(banner).not_to_have_text(message, timeout=30_000)  # a new message
    expect(banner).to_be_visible()
    message2 = visible_text(banner)
    assert "vectorize" in message2.lower() and message2, message2
    wait_kernel_settled(page)
    assert script_text(page) == before, "a refused vectorize changed the TVMScript"
    shot(page, "04_error_vectorize_reduction", page.locator(".se-editor").first)

    # a legal step afterwards clears the banner
    apply_step(page, "split", "j", "None, 8")
    wait_script_changed(page, before)
    expect(banner).to_be_hidden()
    assert_page_clean(page, page.log, "after illegal steps")


def test_measure_shows_a_latency(ui):
    page = ui
    latency = page.locator(".se-latency").first
    button = page.locator(".se-measure").first
    reveal(page, button)
    expect(button).to_be_enabled()
    t0 = time.monotonic()
    button.click()
    page.wait_for_function(
        """() => {
          const t = (document.querySelector('.se-latency') || {}).innerText || '';
          return /\\d+(\\.\\d+)?\\s*ms\\b/.test(t) && !/measuring|not measured/i.test(t);
        }""",
        timeout=MEASURE_TIMEOUT,
        polling=250,
    )
    print(f"measure: latency shown after {time.monotonic() - t0:.1f}s")
    text = visible_text(latency)
    assert LATENCY.search(text), text
    shot(page, "05_cost_after_measure", page.locator(".se-cost").first)
    shot(page, "05_explorer_after_measure")
    assert_page_clean(page, page.log, "after Measure")


def test_short_search_fills_the_convergence_plot(ui):
    page = ui
    panel = page.locator(".se-search").first
    reveal(page, panel)
    strategies = options_of(select_of(page, "se-strategy"))
    if any(o.startswith("random") for o in strategies):
        choose(page, "se-strategy", "random")  # the cheapest strategy: no model to train
    set_text(page, "se-trials", "8")
    start, stop = page.locator(".se-start").first, page.locator(".se-stop").first
    expect(start).to_be_enabled()
    wait_kernel_settled(page)  # the kernel has the new settings before Start is pressed
    shot(page, "06_search_before_start", panel)

    convergence = page.locator(".se-convergence").first
    before = max(plot_points(page, "se-convergence"), 0)  # e.g. the manual measurement's point
    start.click()
    t0 = time.monotonic()
    wait_kernel_settled(page)  # Start handled: the panel now says it is running
    expect(stop).to_be_enabled()
    expect(start).to_be_disabled()
    shot(page, "06_search_running", panel)

    # a user switches to the dashboards while the search runs, and watches points arrive
    figure = convergence.locator(".js-plotly-plot").first
    reveal(page, figure)
    expect(figure).to_be_visible(timeout=60_000)
    first = _wait_points(page, lambda n: n > before, SEARCH_TIMEOUT)
    print(f"search: {first - before} new point(s) after {time.monotonic() - t0:.1f}s")
    shot(page, "06_convergence_first_points", convergence)

    expect(start).to_be_enabled(timeout=SEARCH_TIMEOUT)  # the search ended by itself
    expect(stop).to_be_disabled()
    print(f"search: finished after {time.monotonic() - t0:.1f}s")
    page.wait_for_timeout(1_500)  # the dashboards coalesce refreshes (0.5 s): let the last land
    final = plot_points(page, "se-convergence")
    print(f"search: convergence plot holds {final} point(s) (before the search: {before})")
    assert final >= first > before
    assert plot_svg_points(page, "se-convergence") > 0, "plotly holds data but draws nothing"
    shot(page, "06_convergence_after_search", convergence)
    shot(page, "06_dashboards_after_search")
    for box in ("se-pred-vs-meas", "se-comparison", "se-knobs"):
        if page.locator(f".{box}").count():
            shot(page, f"06_{box}_after_search", page.locator(f".{box}").first)

    reveal(page, panel)
    status = visible_text(page.locator(".se-search-status").first)
    print("search status:", status)
    assert not re.search(r"fail|error|not started", status, re.I), status
    assert re.search(r"\b8\s*(?:/\s*8\s*)?trials", status), f"Max trials 8 not used: {status}"
    shot(page, "06_search_finished", panel)
    assert_page_clean(page, page.log, "after a search")


def _wait_points(page: Any, done: Any, timeout_ms: float) -> int:
    deadline = time.monotonic() + timeout_ms / 1000
    n = plot_points(page, "se-convergence")
    while not done(n):
        if time.monotonic() > deadline:
            raise AssertionError(f"convergence plot: still {n} point(s) after {timeout_ms}ms")
        page.wait_for_timeout(500)
        n = plot_points(page, "se-convergence")
    return n
