"""The explorer on laptop and desktop screens (issue 21, section 4): at 1280x800 and 1920x1080,
with JupyterLab's file browser open as ``make lab`` leaves it, no part of the explorer scrolls
sideways or cuts its text (the operator form, the factors field, the history, the editor
column, the search's final sentence), plot titles do not overlap their subtitles, and plots
take the width of the panel.

Scrollbars are hidden in headless screenshots, so these checks read the DOM (``scrollWidth``
against ``clientWidth``, bounding boxes). The explorer holds a small reduction (a few seconds
to search, for real). Screenshots: ``artifacts/browser/layout_<width>_<tab>.png``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import (
    assert_page_clean,
    choose,
    explorer_page,
    reveal,
    set_text,
    settle,
    shot,
    show_tab,
)
from playwright.sync_api import expect
from test_lab_explorer import heading_problems

pytestmark = pytest.mark.browser

SCREENS = {"laptop": (1280, 800), "desktop": (1920, 1080)}
TABS = ("Schedule", "Search", "Dashboards", "Fleet", "NAS")
PLOTS = ("se-convergence", "se-pred-vs-meas", "se-comparison", "se-knobs")

CELLS = [
    """from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.session import ScheduleSession
from explorer.testing.recordings import TINY
from widgets import Explorer""",
    # Timings are kept however noisy: the screen is under test, not the machine's quiet.
    """measurer = LocalMeasurer(MeasureConfig(max_spread=float("inf")))
ex = Explorer(TINY, measurer=measurer)
ex""",
    # A schedule of a few steps in the editor (its history), for a search to start from.
    """s = ScheduleSession(TINY, ex.ctx.target)
s.apply("split", loop="r", factors=[None, 2])
s.apply("split", loop="i", factors=[None, 2])
s.apply("reorder", loops=["i_0", "r_0", "i_1", "r_1"])
s.apply("fuse", loops=["i_0", "r_0"])
ex.ctx.set_session(s)""",
]

# Elements of the explorer that scroll or cut sideways: their content is wider than their box
# and their overflow is auto, scroll (a scrollbar) or hidden (cut, "..."). Code (<pre>) and the
# loop table scroll sideways by design (wrapping TVMScript mid-token would be worse); plotly
# draws its own figure.
OVERFLOW_JS = """(root) => {
  const out = [];
  const name = (el) => {
    const se = [];
    for (let n = el; n && n !== root.parentElement; n = n.parentElement)
      se.push(...[...n.classList].filter(c => c.startsWith('se-') && c !== 'se-ui'));
    return `${el.tagName.toLowerCase()} in .${se.slice(0, 3).join(' < .')}`;
  };
  for (const el of root.querySelectorAll('*')) {
    if (!el.offsetParent || el.closest('pre, .se-loops, .js-plotly-plot, select')) continue;
    const x = getComputedStyle(el).overflowX;
    if (['auto', 'scroll', 'hidden'].includes(x) && el.scrollWidth > el.clientWidth + 1) {
      const text = (el.innerText || '').trim().replace(/\\s+/g, ' ').slice(0, 70);
      out.push(`${name(el)} (overflow-x ${x}): ${el.scrollWidth} > ${el.clientWidth} px` +
               (text ? `, "${text}"` : ''));
    }
  }
  return [...new Set(out)];
}"""

# Text of a plot (axis names, tick labels, legend, notes) drawn over its title or subtitle.
OVER_HEADING_JS = """(cls) => {
  const gd = document.querySelector('.' + cls + ' .js-plotly-plot');
  const heading = [...gd.querySelectorAll('.gtitle, .gtitle-subtitle')];
  const boxes = heading.map(e => e.getBoundingClientRect());
  const out = [];
  for (const t of gd.querySelectorAll('text')) {
    if (heading.some(h => h === t || h.contains(t))) continue;
    const r = t.getBoundingClientRect();
    if (r.width && boxes.some(b => r.left < b.right && b.left < r.right
                                   && r.top < b.bottom && b.top < r.bottom))
      out.push(`"${t.textContent}" is drawn over the heading`);
  }
  return out;
}"""

PLOT_WIDTH_JS = """(cls) => {
  const box = document.querySelector('.' + cls);
  const svg = box && box.querySelector('.js-plotly-plot .main-svg');
  return svg ? [svg.getBoundingClientRect().width, box.clientWidth] : null;
}"""


@pytest.fixture(scope="module")
def ui(jupyter_lab: Any, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    with explorer_page(jupyter_lab, browser, request, "layout.ipynb", CELLS) as page:
        yield page


def overflow(page: Any) -> list[str]:
    return list(page.locator(".se-explorer").first.evaluate(OVERFLOW_JS))


def open_file_browser(page: Any) -> None:
    """JupyterLab's file browser open beside the notebook, as `make lab` leaves it."""
    if not page.locator("#filebrowser").first.is_visible():
        page.locator('[data-id="filebrowser"]').first.click()
    settle(page, 800)


def test_a_search_from_my_schedule_ends_with_a_whole_sentence(ui: Any) -> None:
    """Its final sentence ("... Nothing beat your schedule: it is the answer.") was cut to
    "...Nothing beat yo..." on a laptop."""
    page = ui
    page.set_viewport_size(dict(zip(("width", "height"), SCREENS["laptop"], strict=True)))
    open_file_browser(page)
    show_tab(page, "Search")
    choose(page, "se-strategy", "autotvm")
    set_text(page, "se-trials", "8")
    page.locator(".se-from-session input").first.check()
    page.locator(".se-start").first.click()
    status = page.locator(".se-search-status").first
    expect(status).to_contain_text(re.compile(r"^(Done|Stopped):"), timeout=300_000)
    text = status.inner_text()
    # "... 1.52x faster than unscheduled (...). 1.10x faster than your start (...)." or
    # "... No faster schedule found: your start (...) is the answer."
    assert re.search(r"unscheduled.*your start", text), text
    shot(page, "layout_search_done", page.locator(".se-search").first)
    width, room = status.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert width <= room + 1, f"the sentence is cut ({width} > {room} px): {text!r}"
    assert_page_clean(page, page.log, "after a search from my schedule")


@pytest.mark.parametrize("screen", list(SCREENS))
def test_nothing_scrolls_sideways_and_plots_fit(ui: Any, screen: str) -> None:
    page = ui
    width, height = SCREENS[screen]
    page.set_viewport_size({"width": width, "height": height})
    open_file_browser(page)
    problems: list[str] = []
    for tab in TABS:
        show_tab(page, tab)
        problems += [f"{tab} tab: {p}" for p in overflow(page)]
        reveal(page, page.locator(".se-tabs").first)
        shot(page, f"layout_{width}_{tab}")
    # The dashboards: each heading clear of its subtitle and toolbar, each plot as wide as
    # its panel.
    show_tab(page, "Dashboards")
    for cls in PLOTS:
        figure = page.locator(f".{cls} .js-plotly-plot").first
        reveal(page, figure)
        figure.hover()  # the toolbar shows while the mouse is over the plot
        settle(page, 300)
        problems += [f"{cls}: {p}" for p in heading_problems(page, cls)]
        problems += [f"{cls}: {p}" for p in page.evaluate(OVER_HEADING_JS, cls)]
        drawn, box = page.evaluate(PLOT_WIDTH_JS, cls)
        if drawn < box - 8:
            problems.append(f"{cls}: the plot is {drawn:.0f} px wide in a {box} px panel")
        shot(page, f"layout_{width}_{cls}", page.locator(f".{cls}").first)
    # The operator form of the operator with the most parameters, and a custom expression.
    for family in ("conv2d", "custom\xa0expression\xa0(einsum-like)"):
        choose(page, "se-expr-family", family)
        settle(page, 500)
        problems += [f"{family} form: {p}" for p in overflow(page)]
        shot(page, f"layout_{width}_{family.split()[0]}_form", page.locator(".se-expr").first)
    choose(page, "se-expr-family", "reduce_sum")
    assert problems == []
    assert_page_clean(page, page.log, f"at {width}x{height}")
