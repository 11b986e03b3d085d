"""The cost panel's generated-code view (issue 25): the instruction mix of the schedule on
screen, built off the UI thread, following every edit once shown, kept per schedule."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from explorer.measure import LocalMeasurer, MeasureResult
from explorer.session import ScheduleSession
from explorer.storage import NewTrial
from explorer.text import format_secs
from explorer.types import MeasureStatus
from explorer.workloads import Workload
from widgets import _ui
from widgets._context import Context
from widgets._cost_views import candidate_key
from widgets._jobs import Job, JobState
from widgets.code_view import TRIAL
from widgets.cost import CostPanel

WAIT = 120


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def built(job: Job | None) -> None:
    assert job is not None and job.wait(WAIT), "the code was not built"
    assert job.state is JobState.FINISHED, job.exception
    _ui.drain()


def row(markup: str, label: str, columns: int = 2) -> list[str]:
    cells = re.search(rf"<tr><td>{label}</td>{'<td>([^<]*)</td>' * columns}</tr>", markup)
    assert cells is not None, markup
    return list(cells.groups())


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
    assert int(row(view.mix.value, "vector FMA", 3)[0]) > 0
    # compared with the schedule shown before it (the edits' builds run one after another, so
    # which earlier step was on screen depends on the machine's speed)
    change = text_of(view.mix.value.split("</p>")[0]).strip()
    assert re.fullmatch(
        r"The hot loop now issues \d+ [yz]mm FMAs per \d+ loads instead of .+ \(against the "
        r"schedule shown before\)\.",
        change,
    ), change
    # back to the start: shown at once, from what was built before (no new job)
    before = view.job
    session.checkout(0)
    _ui.drain()
    assert view.job is before
    assert row(view.mix.value, "vector FMA", 3)[0] == "0"  # this schedule's hot loop ...
    assert int(row(view.mix.value, "vector FMA", 3)[2]) > 0  # ... beside the vectorised one's
    assert "se-code-change" in view.mix.value and "se-hot-diff" in view.mix.value
    panel.close()


def test_two_measured_schedules_are_compared_instruction_by_instruction(
    make_ctx: Callable[..., Context], matmul64: Workload, local_measurer: LocalMeasurer
):
    """Issue 25's user: measure two schedules, pick the earlier step in "Compare with", read
    which instructions changed (the mixes side by side, the hot loops diffed) and how much
    faster the measurements say this one runs."""
    ctx = make_ctx(local_measurer)
    session = ScheduleSession(matmul64, ctx.target)
    ctx.set_session(session)
    panel = CostPanel(ctx)
    view = panel.code
    built(panel.measure())  # step 0, unscheduled
    session.apply("split", loop="j", factors=[None, 16])
    session.apply("reorder", loops=["i", "k", "j_0", "j_1"])
    step = session.apply("vectorize", loop="j_1").step_id
    built(panel.measure())
    _ui.drain()
    built(view.show())
    view.compare.value = 0
    for _ in range(3):  # step 0's code is built after the vectorised one's
        if "Compiling" not in view.status.value:
            break
        built(view.job)
    change = text_of(view.mix.value.split("</p>")[0]).strip()
    match = re.fullmatch(
        r"The hot loop now issues (\d+) [yz]mm FMAs per \d+ loads instead of (\d+) scalar ops? "
        r"per \d+ loads?.* \(against step 0\)\. Measured: (\S+ \S+) against (\S+ \S+), this "
        r"schedule runs (\d+\.\d\d)x (faster|slower)\.",
        change,
    )
    assert match is not None, change
    latency = {
        s: format_secs(panel._latency_of(candidate_key(session.candidate_at(s))))
        for s in (0, step)
    }
    assert match.group(3, 4) == (latency[step], latency[0])  # the panel's own readings
    assert int(match.group(1)) > 0
    vectorised, unscheduled = row(view.mix.value, "vector FMA", 3)[0::2]
    assert int(vectorised) > 0 and unscheduled == "0"
    assert "<th>hot loop of step 0</th>" in view.mix.value
    diff = re.findall(r"<span class='se-diff-(add|del)'>([^<]*)</span>", view.mix.value)
    assert any(kind == "add" and "vfmadd" in line for kind, line in diff), diff
    assert any(kind == "del" for kind, _line in diff), diff
    # the LLVM IR on request, of the schedule on screen
    assert view.ir.value == ""
    view.show_ir.value = True
    assert "define " in text_of(view.ir.value)  # the IR's functions
    assert re.search(r"<\d+ x float>", html.unescape(view.ir.value))  # vectorised: LLVM vectors
    view.show_ir.value = False
    assert view.ir.value == ""
    panel.close()


def test_a_step_to_compare_with_is_any_step_of_any_branch(ctx: Context, session: ScheduleSession):
    panel = CostPanel(ctx)
    view = panel.code
    session.apply("split", loop="j", factors=[None, 16])
    session.undo()
    session.apply("split", loop="i", factors=[None, 8])  # a second branch from the start
    _ui.drain()
    labels = [label for label, _value in view.compare.options]
    assert labels == [
        "the schedule shown before",
        "step 0: the unscheduled program",
        "step 1: split(loop='j', factors=[None, 16])",
        "step 2: split(loop='i', factors=[None, 8])",
    ]
    view.compare.value = 1
    built(view.show())  # this step's code, then step 1's
    for _ in range(3):
        if "Compiling" not in view.status.value:
            break
        built(view.job)
    assert "(against step 1)" in text_of(view.mix.value)
    assert "Measured" not in text_of(view.mix.value)  # nothing was measured: nothing claimed
    panel.close()


def test_a_stored_schedule_of_the_workload_is_a_choice_to_compare_with(
    ctx: Context, session: ScheduleSession
):
    """ "Any two from history or the database": the workload's fastest stored schedules are
    offered by their names in their runs, and a comparison with one says its stored timing
    beside the panel's reading of the schedule on screen."""
    panel = CostPanel(ctx)
    view = panel.code
    session.apply("split", loop="j", factors=[None, 16])
    stored = session.candidate()
    run = ctx.store.create_run(session.workload, session.target, "random")
    (record,) = ctx.store.add_trials(
        run.id, [NewTrial(stored, MeasureResult(MeasureStatus.OK, run_secs=(2e-3, 2e-3, 2e-3)))]
    )
    session.undo()
    built(panel.measure())  # the unscheduled program, read by the panel
    labels = {value: label for label, value in view.compare.options}
    assert labels[f"{TRIAL}{record.id}"] == f"stored trial 1 of run 1: {format_secs(2e-3)}"
    view.compare.value = f"{TRIAL}{record.id}"
    built(view.show())
    for _ in range(3):
        if "Compiling" not in view.status.value:
            break
        built(view.job)
    said = text_of(view.mix.value.split("</p>")[0]).strip()
    mine = panel._latency_of(candidate_key(session.candidate()))
    assert said.endswith(
        f"(against trial 1 of run 1). Measured: {format_secs(mine)} against "
        f"{format_secs(2e-3)}, this "
        f"schedule runs {2e-3 / mine:.2f}x faster."
        if mine <= 2e-3
        else f"this schedule runs {mine / 2e-3:.2f}x slower."
    ), said
    panel.close()
