"""The explorer's Fleet tab in a real JupyterLab: start a local fleet with its button, see its two
devices listed with their target, run a small search on it from the Search tab and see the
devices count its trials, stop the fleet, and find no process left.

The notebook's kernel gets its own fleet state file (``EXPLORER_FLEET_STATE``) and a free tracker
port, so neither a fleet of the user's nor the other tests' fleets are touched. Screenshots go
to ``artifacts/browser/`` (``$BROWSER_ARTIFACTS``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import (
    assert_page_clean,
    choose,
    explorer_page,
    full_shot,
    set_text,
    shot,
    text_input,
)
from playwright.sync_api import expect

from explorer.fleet import read_fleet, stop_fleet
from explorer.testing.ports import free_port

pytestmark = pytest.mark.browser

START_TIMEOUT = 180_000  # ms: a tracker and two servers importing TVM on a shared machine
SEARCH_TIMEOUT = 300_000  # ms: 2 trials built here and timed on the fleet, plus re-timings
MEASURED_JS = """() => [...document.querySelectorAll('.se-fleet-table .se-fleet-device')]
  .reduce((sum, row) => sum + parseInt(row.children[2].textContent, 10), 0)"""


@pytest.fixture
def fleet_state(tmp_path: Path) -> Iterator[Path]:
    state = tmp_path / "fleet.json"
    yield state
    stop_fleet(state)  # whatever the test left running (nothing, when it passes)


@pytest.fixture
def fleet_page(
    jupyter_lab: Any, browser: Any, fleet_state: Path, request: pytest.FixtureRequest
) -> Iterator[Any]:
    cells = [
        f"import os\nos.environ['EXPLORER_FLEET_STATE'] = {str(fleet_state)!r}\n"
        "from widgets import Explorer",
        f"ex = Explorer()\nex.fleet.port = {free_port()}\nex.fleet.poll_secs = 1.0",
        "ex",
    ]
    with explorer_page(jupyter_lab, browser, request, "fleet_tab.ipynb", cells) as page:
        yield page


def test_the_fleet_tab_starts_lists_and_stops_a_local_fleet(
    fleet_page: Any, fleet_state: Path
) -> None:
    page = fleet_page
    page.locator(".se-tabs .lm-TabBar-tab", has_text="Fleet").click()
    panel = page.locator(".se-fleet").first
    expect(panel).to_be_visible()
    status, notice = page.locator(".se-fleet-status"), page.locator(".se-fleet-notice")
    expect(status).to_contain_text("No fleet runs on this machine", timeout=30_000)
    stop = page.locator(".se-fleet-stop")
    expect(stop).to_be_disabled()

    page.locator(".se-fleet-start").click()
    expect(notice).to_contain_text("Starting a local fleet: a tracker and 2 servers")
    devices = page.locator(".se-fleet-table .se-fleet-device")
    expect(devices).to_have_count(2, timeout=START_TIMEOUT)
    expect(notice).to_contain_text("Started a local fleet: tracker 127.0.0.1:")
    expect(status).to_contain_text("2 devices under 1 key")
    # each key's target, asked of one of its devices
    expect(page.locator(".se-fleet-table .se-fleet-target")).to_contain_text(
        "llvm:", timeout=60_000
    )
    running = read_fleet(fleet_state)
    assert running is not None and len(running.servers) == 2
    for p in running.servers:
        expect(devices.filter(has_text=f"127.0.0.1:{p.port}")).to_have_count(1)
        expect(devices.filter(has_text=f"127.0.0.1:{p.port}")).to_contain_text("1 thread")
    expect(stop).to_be_enabled()
    expect(page.locator(".se-fleet-start")).to_be_disabled()
    shot(page, "fleet_tab_running", panel)
    assert_page_clean(page, page.log, "with the local fleet running")

    # The Search tab measures on this fleet when told to: it proposes its tracker
    tabs = page.locator(".se-tabs .lm-TabBar-tab")
    tabs.filter(has_text="Search").click()
    choose(page, "se-measure-on", "a fleet")
    expect(text_input(page, "se-search-tracker")).to_have_value(str(running.tracker))
    note = page.locator(".se-target-note")
    expect(note).to_contain_text("target: what the devices of key local report")
    choose(page, "se-strategy", "random")
    set_text(page, "se-trials", "2")
    page.locator(".se-start").click()
    expect(page.locator(".se-search-status")).to_contain_text(
        "Done: 2 trials", timeout=SEARCH_TIMEOUT
    )
    expect(note).to_contain_text("(reported by key local)")
    expect(note).to_contain_text("target: llvm:")
    shot(page, "fleet_search_done", page.locator(".se-search").first)
    # ...and the Fleet tab counted the search's trials on its devices, live
    tabs.filter(has_text="Fleet").click()
    page.wait_for_function(f"() => ({MEASURED_JS})() >= 2", timeout=30_000)
    shot(page, "fleet_tab_after_search", panel)

    stop.click()
    expect(notice).to_have_text("Stopped the local fleet (3 processes).", timeout=60_000)
    expect(status).to_contain_text("No fleet runs on this machine", timeout=30_000)
    expect(devices).to_have_count(0)
    assert not [p for p in running.processes if p.is_alive()]
    assert not fleet_state.exists()
    expect(page.locator(".se-fleet-start")).to_be_enabled()
    shot(page, "fleet_tab_stopped", panel)
    full_shot(page, "fleet_tab_page")
    assert_page_clean(page, page.log, "after stopping the local fleet")
