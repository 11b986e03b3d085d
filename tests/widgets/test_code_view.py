"""The cost panel's generated-code view (issue 25): the instruction mix of the schedule on
screen, built off the UI thread, following every edit once shown, kept per schedule."""

from __future__ import annotations

import html
import re

from explorer.session import ScheduleSession
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobState
from widgets.cost import CostPanel

WAIT = 120


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def built(job: Job | None) -> None:
    assert job is not None and job.wait(WAIT), "the code was not built"
    assert job.state is JobState.FINISHED, job.exception
    _ui.drain()


def row(markup: str, label: str) -> list[str]:
    cells = re.search(rf"<tr><td>{label}</td><td>([^<]*)</td><td>([^<]*)</td></tr>", markup)
    assert cells is not None, markup
    return [cells.group(1), cells.group(2)]


def test_the_code_view_shows_the_mix_and_follows_edits(ctx: Context, session: ScheduleSession):
    panel = CostPanel(ctx)
    view = panel.code
    assert view.mix.value == ""  # nothing is compiled until asked
    built(view.show())
    unscheduled = view.mix.value
    assert row(unscheduled, "vector FMA")[0] == "0"  # scalar FMAs before any schedule
    assert int(row(unscheduled, "scalar arithmetic")[0]) > 0
    assert "se-hot-loop" in unscheduled and "flops per pass" in text_of(unscheduled)
    # an edit is followed: split j by 16 and vectorize the inner loop
    session.apply("split", loop="j", factors=[None, 16])
    session.apply("reorder", loops=["i", "k", "j_0", "j_1"])
    session.apply("vectorize", loop="j_1")
    for _ in range(4):  # the build each edit asked for runs one after another: the last one's
        built(view.job)
        if view.mix.value and "Compiling" not in view.status.value:
            break
    assert int(row(view.mix.value, "vector FMA")[0]) > 0
    # compared with the schedule shown before it (the edits' builds run one after another, so
    # which earlier step was on screen depends on the machine's speed)
    change = text_of(view.mix.value.split("</p>")[0]).strip()
    assert re.fullmatch(
        r"The hot loop now issues \d+ [yz]mm FMAs per \d+ loads instead of .+ \(against the "
        r"schedule shown before\)",
        change,
    ), change
    # back to the start: shown at once, from what was built before (no new job)
    before = view.job
    session.checkout(0)
    _ui.drain()
    assert view.job is before and view.mix.value.endswith(unscheduled)
    assert "se-code-change" in view.mix.value  # compared with the vectorised one
    panel.close()
