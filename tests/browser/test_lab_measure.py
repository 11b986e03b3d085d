"""The cost panel's Measure button under a user's clicks in a real JupyterLab (issue 21).

A user saw "Latency (step 28): 11.269 ms" while step 29 was still measuring, nine more clicks
made seven trials without a word, and Apply and Measure clicked together measured the schedule
from before the Apply. This drives the same clicks: while a measurement is busy, after an undo
and a redo, and Apply with Measure in one go.

The notebook's measurer is a real ``LocalMeasurer`` that waits for the test before each batch
(``held.release()``, run in the kernel): "busy" lasts exactly as long as the test needs, so
nothing here depends on how fast the machine is.
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
    kernel_settled,
    reveal,
    set_text,
    shot,
    visible_text,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

CELLS = [
    "import threading\n"
    "from explorer.measure import LocalMeasurer\n"
    "from widgets import Explorer\n"
    "\n"
    "class HeldMeasurer(LocalMeasurer):\n"
    "    '''Measures a batch only once the test released it.'''\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.gate = threading.Semaphore(0)\n"
    "    def release(self):\n"
    "        self.gate.release()\n"
    "    def measure(self, candidates, **kwargs):\n"
    "        if not self.gate.acquire(timeout=600):\n"
    "            raise TimeoutError('the test never released this measurement')\n"
    "        return super().measure(candidates, **kwargs)\n",
    "held = HeldMeasurer()\nex = Explorer(store=':memory:', measurer=held)",
    "ex",
]
READING_TIMEOUT = 180_000  # ms: the first measurement starts the measurer's worker processes
# ms: a click's answer can wait for the kernel's earlier work (an Apply redraws the editor and
# refreshes the dashboards) on a busy machine
UI = 60_000
READING = re.compile(r"\d+(?:\.\d+)?\s*(?:ms|\u00b5s)\b")

KERNEL_RUN_JS = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  let out = '';
  const future = kernel.requestExecute({code, store_history: false});
  future.onIOPub = (msg) => {
    const t = msg.header.msg_type;
    if (t === 'stream') out += msg.content.text;
    if (t === 'error') out += `${msg.content.ename}: ${msg.content.evalue}`;
  };
  await future.done;
  return out;
}"""


def in_kernel(page: Any, code: str) -> str:
    """Run ``code`` in the notebook's kernel (not in a cell); its printed output."""
    return str(page.evaluate(KERNEL_RUN_JS, code)).strip()


def release(page: Any) -> None:
    """Let the measurer take one more batch."""
    in_kernel(page, "held.release()")


def settled(page: Any) -> None:
    kernel_settled(page, timeout=60_000)


@pytest.fixture(scope="module")
def ui(jupyter_lab: Any, browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    with explorer_page(jupyter_lab, browser, request, "measure_clicks.ipynb", CELLS) as page:
        reveal(page, page.locator(".se-measure").first)
        yield page
        in_kernel(page, "ex.close(); held.close()")


def latency(page: Any) -> Any:
    return page.locator(".se-latency").first


def status(page: Any) -> Any:
    return page.locator(".se-measure-status").first


def step_on_screen(page: Any) -> int:
    title = visible_text(page.locator(".se-editor-title").first)
    match = re.search(r"step (\d+)", title)
    assert match, title
    return int(match.group(1))


def apply_split(page: Any, loop: str, factors: str) -> int:
    """Apply a split like a user; the step it made (the editor's title says it)."""
    before = step_on_screen(page)
    choose(page, "se-primitive", "split")
    choose(page, "se-param-loop", loop)
    set_text(page, "se-param-factors", factors)
    settled(page)
    page.locator(".se-apply").first.click()
    expect(page.locator(".se-editor-title").first).not_to_contain_text(
        f"step {before}", timeout=UI
    )
    settled(page)
    return step_on_screen(page)


def stored_trials(page: Any) -> int:
    return int(in_kernel(page, "print(len(ex.ctx.store.trials()))"))


def test_clicks_while_busy_are_answered_and_readings_stay_with_their_schedule(ui):
    page = ui
    step1 = apply_split(page, "i", "None, 16")
    button = page.locator(".se-measure").first
    button.click()
    expect(latency(page)).to_contain_text(f"Measuring step {step1}", timeout=UI)

    # More clicks while it measures: each is answered on screen, none is a silent trial.
    for _ in range(3):
        button.click()
    settled(page)
    notice = page.locator(".se-cost-message").first
    expect(notice).to_be_visible(timeout=UI)
    expect(notice).to_contain_text(f"step {step1} is being measured", timeout=UI)
    shot(page, "measure_busy_click_refused", page.locator(".se-cost").first)

    # An edit meanwhile: the new schedule shows no number, and the running measurement is
    # still named until its reading arrives.
    step2 = apply_split(page, "j", "None, 8")
    expect(latency(page)).to_contain_text("not measured yet", timeout=UI)
    assert not READING.search(visible_text(latency(page))), visible_text(latency(page))
    expect(status(page)).to_contain_text(f"Measuring step {step1}", timeout=UI)

    # Measure now: queued behind the running one, and said so.
    button.click()
    expect(latency(page)).to_contain_text(f"Queued: step {step2}", timeout=UI)
    expect(status(page)).to_contain_text(f"Measuring step {step1}", timeout=UI)
    shot(page, "measure_queued", page.locator(".se-cost").first)

    release(page)  # step 1's reading arrives; the queued step 2 starts
    expect(status(page)).to_contain_text(f"Step {step1} measured", timeout=READING_TIMEOUT)
    expect(latency(page)).to_contain_text(f"Measuring step {step2}", timeout=UI)
    release(page)
    expect(latency(page)).to_contain_text(f"Latency (step {step2})", timeout=READING_TIMEOUT)
    assert READING.search(visible_text(latency(page)))
    settled(page)
    assert stored_trials(page) == 2  # one per accepted click: the refused ones stored nothing

    # Undo to a measured schedule while another measures, then redo: each screen shows only
    # its own schedule's reading ("Latency (step 28)" under step 29 was the bug).
    step3 = apply_split(page, "k", "None, 4")
    button.click()
    expect(latency(page)).to_contain_text(f"Measuring step {step3}", timeout=UI)
    page.locator(".se-undo").first.click()
    expect(latency(page)).to_contain_text(f"Latency (step {step2})", timeout=UI)
    expect(status(page)).to_contain_text(f"Measuring step {step3}", timeout=UI)
    page.locator(".se-redo").first.click()
    expect(latency(page)).to_contain_text(f"Measuring step {step3}", timeout=UI)
    assert f"step {step2}" not in visible_text(latency(page))
    release(page)
    expect(latency(page)).to_contain_text(f"Latency (step {step3})", timeout=READING_TIMEOUT)
    assert_page_clean(page, page.log, "after Measure clicks while busy")


def test_apply_and_measure_clicked_together_measure_the_applied_schedule(ui):
    page = ui
    before = step_on_screen(page)
    choose(page, "se-primitive", "split")
    choose(page, "se-param-loop", "i_1")
    set_text(page, "se-param-factors", "None, 4")
    settled(page)
    # Both clicks in one go, before the kernel answered the first: the Apply is pending when
    # Measure is clicked, and Measure must measure what the Apply makes.
    page.evaluate(
        "() => { document.querySelector('.se-apply').click();"
        " document.querySelector('.se-measure').click(); }"
    )
    expect(page.locator(".se-editor-title").first).not_to_contain_text(
        f"step {before}", timeout=UI
    )
    after = step_on_screen(page)
    settled(page)
    what = visible_text(page.locator(".se-cost").first)
    expect(latency(page), what).to_contain_text(f"Measuring step {after}", timeout=UI)
    assert f"step {before}" not in visible_text(status(page)), "it measured the step before"
    release(page)
    expect(latency(page)).to_contain_text(f"Latency (step {after})", timeout=READING_TIMEOUT)
    settled(page)
    same = in_kernel(
        page, "print(ex.ctx.store.trials()[-1].candidate.trace == ex.session.candidate().trace)"
    )
    assert same == "True", "the measurement is not of the schedule the Apply made"
    shot(page, "measure_after_apply_and_measure", page.locator(".se-schedule").first)
    assert_page_clean(page, page.log, "after Apply and Measure together")


def test_the_cost_panel_says_which_instructions_changed_between_two_schedules(ui):
    """Issue 25: the generated code of the schedule on screen, what an edit changed in its hot
    loop, and, for two measured schedules, which ran faster, read in the cost panel
    (1280x800)."""
    page = ui
    page.set_viewport_size({"width": 1280, "height": 800})
    measured = step_on_screen(page)  # the previous test measured it
    show = page.locator(".se-show-code").first
    reveal(page, show)
    # the whole label shows (ipywidgets' default button width cut it to "Show generat...")
    assert show.evaluate("b => b.scrollWidth <= b.clientWidth"), visible_text(show)
    show.click()
    mix = page.locator(".se-code-mix").first
    expect(mix.locator("table.se-mix")).to_be_visible(timeout=READING_TIMEOUT)
    expect(mix).to_contain_text("vector FMA", timeout=UI)
    expect(mix.locator(".se-hot-loop")).to_be_visible(timeout=UI)
    # a loop of whatever schedule is on screen that splits in two (this test needs no other)
    loop = in_kernel(
        page,
        "print(next(lp.name for lp in ex.session.snapshot.loops"
        " if lp.kind == 'serial' and lp.extent and lp.extent % 2 == 0 and lp.extent >= 4))",
    )
    step = apply_split(page, loop, "None, 2")
    change = mix.locator(".se-code-change")
    expect(change).to_contain_text("against the schedule shown before", timeout=READING_TIMEOUT)
    said = visible_text(change)
    assert re.match(r"The hot loop (now issues|is the same: )", said), said
    assert re.search(r"\d+ (?:[xyz]mm )?(?:FMA|vector op|scalar op|store)s? per \d+ loads?", said)
    shot(page, "code_mix_after_edit", page.locator(".se-cost").first)

    # Measure this one too, then compare it with the measured step before it, picked by name.
    page.locator(".se-measure").first.click()
    release(page)
    expect(latency(page)).to_contain_text(f"Latency (step {step})", timeout=READING_TIMEOUT)
    choose(page, "se-code-compare", f"step {measured}:")
    expect(change).to_contain_text(
        f"(against step {measured}). Measured:", timeout=READING_TIMEOUT
    )
    said = visible_text(change)
    assert re.search(r"this schedule runs \d+\.\d\dx (faster|slower)\.$", said), said
    assert "hot loop of step" in visible_text(mix.locator("table.se-mix"))
    if "now issues" in said:  # the code changed: the hot loops' diff shows how
        expect(mix.locator(".se-hot-diff")).to_be_visible(timeout=UI)
    page.locator(".se-show-ir").first.click()
    expect(page.locator(".se-llvm-ir").first).to_contain_text("define ", timeout=UI)
    fits = page.locator(".se-cost").first.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    assert fits, "the cost panel scrolls sideways at 1280x800"
    shot(page, "code_compared_with_a_measured_step", page.locator(".se-cost").first)
    assert_page_clean(page, page.log, "after Show generated code, an edit and a comparison")
