"""The Search tab's race on a recording in a real JupyterLab (issue 25, section 2), at 1280x800:
a user picks "Measure on: a recording", names the shipped recording's file and races the five
default strategies over three seeds (the panel offers ten); the table and the best-so-far plot
show, drawn in the page, marked as replayed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser_helpers import (
    KERNEL_TRACES,
    assert_page_clean,
    choose,
    explorer_page,
    kernel_eval,
    kernel_json,
    save_and_reload,
    set_text,
    shot,
    show_tab,
    visible_text,
    wait_drawn,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

CELLS = [
    "import pathlib\n"
    "from explorer.replay import EXAMPLE, open_copy\n"
    "from explorer.workloads import get_workload\n"
    "from widgets import Explorer\n"
    "folder = {folder!r}\n"  # the test's own: a folder of the system's would outlive it
    "open_copy(EXAMPLE, folder).close()\n"
    "recording = str(pathlib.Path(folder) / EXAMPLE.name)\n"
    "ex = Explorer(get_workload('softmax', M=64, N=256), store=':memory:')",
    "ex",
]
RACE_TIMEOUT = 540_000  # ms: fifty replayed runs (about 100 s quiet) beside the rest of a suite
UI = 60_000


@pytest.fixture(scope="module")
def ui(
    jupyter_lab: Any,
    browser: Any,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Any]:
    folder = str(tmp_path_factory.mktemp("recording"))
    cells = [CELLS[0].format(folder=folder), *CELLS[1:]]
    with explorer_page(jupyter_lab, browser, request, "race.ipynb", cells) as page:
        yield page
        kernel_eval(page, "ex.close()")


def test_five_strategies_race_over_three_seeds_on_a_recording(ui):
    """Three seeds, not the default ten: 50 runs took 168 s of a loaded 2-core suite."""
    page = ui
    page.set_viewport_size({"width": 1280, "height": 800})
    show_tab(page, "Search")
    choose(page, "se-measure-on", "a recording")
    race_panel = page.locator(".se-race-panel").first
    expect(race_panel).to_be_visible(timeout=UI)
    expect(page.locator(".se-start").first).to_be_hidden()  # the race replaces the search
    set_text(page, "se-race-source", kernel_json(page, "recording"))
    set_text(page, "se-race-trials", "16")
    set_text(page, "se-race-seeds", "3")
    selected = page.locator(".se-race-strategies select").first.evaluate(
        "s => Array.from(s.selectedOptions).map(o => o.textContent)"
    )
    assert [s.replace("\xa0", " ") for s in selected] == [
        "random", "autotvm", "evolutionary", "droplet", "evolutionary+droplet",
    ]  # fmt: skip
    page.locator(".se-race").first.click()
    status = page.locator(".se-race-status").first
    expect(status).to_contain_text("Raced: 15 runs", timeout=RACE_TIMEOUT)
    said = visible_text(status)
    assert "replayed (nothing was built or timed)" in said, said
    table = page.locator(".se-race-table").first
    expect(table).to_contain_text("900 recorded schedules, 100% of the space", timeout=UI)
    rows = table.locator("table tr")
    assert rows.count() == 6  # a header and five strategies
    # the plot draws in the page what the kernel holds: a median, a band and the seeds'
    # lines per strategy, and the recording's best and its 90% line
    kernel_eval(page, KERNEL_TRACES)
    kernel = [kernel_json(page, "_se_traces(ex.search.race.figure)")]
    assert kernel[0].get("scatter", 0) >= 5 + 2, kernel  # at least the medians and two lines
    wait_drawn(page, {"the race": (race_panel, kernel)}, "after the race", timeout=UI)
    title = race_panel.locator(".gtitle").first
    expect(title).to_contain_text("Race on a recording (replayed)", timeout=UI)
    fits = race_panel.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    assert fits, "the race view scrolls sideways at 1280x800"
    shot(page, "race_on_a_recording_1280", race_panel)
    assert_page_clean(page, page.log, "after a race on a recording")

    # A reloaded page shows the race as it was: the table, and the plot drawn again.
    save_and_reload(page)
    show_tab(page, "Search")
    race_panel = page.locator(".se-race-panel").first
    expect(race_panel).to_be_visible(timeout=UI)
    table = page.locator(".se-race-table").first
    expect(table).to_contain_text("900 recorded schedules, 100% of the space", timeout=UI)
    assert table.locator("table tr").count() == 6
    expect(page.locator(".se-race-status").first).to_contain_text("Raced: 15 runs")
    wait_drawn(page, {"the race": (race_panel, kernel)}, "after a reload", timeout=UI)
    shot(page, "race_on_a_recording_reloaded", race_panel)
    assert_page_clean(page, page.log, "after a reload of the race")
