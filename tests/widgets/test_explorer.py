"""Explorer, headless: composition, display, and one pass through the whole loop."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import ipywidgets as w
import pytest

from explorer.measure import Measurer, MeasureResult
from explorer.storage import ENV_VAR, NewTrial
from explorer.types import MeasureStatus
from explorer.workloads import get_workload
from widgets import CostPanel, Explorer, ExpressionBuilder, ScheduleEditor
from widgets._jobs import JobState
from widgets._whole import WholeText

WAIT = 120.0

DURATION = r"\d+(?:\.\d+)? (?:s|ms|\u00b5s|ns)\b"  # as explorer.text.format_secs writes


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def descendants(widget: object) -> Iterator[object]:
    yield widget
    for child in getattr(widget, "children", ()):
        yield from descendants(child)


@pytest.fixture
def explorer(make_replay: Callable[..., Measurer]) -> Iterator[Explorer]:
    ex = Explorer(store=":memory:", measurer=make_replay())
    yield ex
    ex.close()


def test_composes_every_panel(explorer: Explorer) -> None:
    ex = explorer
    assert isinstance(ex.builder, ExpressionBuilder)
    assert isinstance(ex.editor, ScheduleEditor)
    assert isinstance(ex.cost, CostPanel)
    assert type(ex.search).__name__ == "SearchPanel"
    assert type(ex.dashboards).__name__ == "Dashboards"
    assert "se-explorer" in ex.widget._dom_classes
    shown = list(descendants(ex.widget))
    for panel in (ex.builder, ex.editor, ex.cost, ex.search, ex.dashboards):
        assert panel.widget in shown
    for panel in (ex.builder, ex.editor, ex.cost, ex.search, ex.dashboards):
        assert panel.ctx is ex.ctx


def live_models() -> set[str]:
    from ipywidgets.widgets.widget import _instances

    return set(_instances)


def test_the_other_tabs_are_built_when_first_opened(
    make_replay: Callable[..., Measurer],
) -> None:
    # A reloaded page fetches every live widget model before its outputs can draw, and gives
    # them 2 s: two explorers of ~400 models each took longer on a busy machine ("model not
    # found" for good). An explorer starts with its first tab only.
    before = live_models()
    ex = Explorer(store=":memory:", measurer=make_replay())
    try:
        first = live_models() - before
        shown = {x.model_id for x in descendants(ex.widget)}
        assert shown <= first and ex._panels == {}
        assert all(slot.children == () for slot in ex.tabs.children[1:])
        ex.tabs.selected_index = 2  # the dashboards: built now, into their tab
        assert ex.tabs.children[2].children == (ex.dashboards.widget,)
        assert ex.dashboards.ctx is ex.ctx and set(ex._panels) == {2}
        all_tabs = live_models() - before
        search = ex.search  # read from code: built too, into its own tab
        assert ex.tabs.children[1].children == (search.widget,)
        assert len(first) < len(all_tabs) < len(live_models() - before)
        assert ex.search is search  # once
    finally:
        ex.close()
    with pytest.raises(RuntimeError, match="this explorer is closed: its NAS tab cannot open"):
        ex.nas  # noqa: B018


def test_close_closes_every_widget_of_the_explorer(make_replay: Callable[..., Measurer]) -> None:
    # close() closed the outer box only: the ~570 models of an explorer whose tabs had all
    # been opened stayed alive in the kernel, and a reloaded page fetched them all again.
    before = live_models()
    ex = Explorer(store=":memory:", measurer=make_replay())
    for tab in range(len(ex.tabs.children)):
        ex.tabs.selected_index = tab
    made = live_models() - before
    ex.close()
    from ipywidgets.widgets.widget import _instances

    left = {type(_instances[m]).__name__ for m in live_models() - before}
    assert len(made) > 300 and left <= {"_PlotlyLibrary"}  # one for every figure of the kernel


def test_no_box_of_the_explorer_can_change_a_typed_number(explorer: Explorer) -> None:
    # IntText's front end read a typed "2.5" as 25 and BoundedIntText moved a number outside
    # its range to the bound, both without a word: every whole-number box is a WholeText, read
    # by the panel or the core, which refuse what is not a whole number in range.
    ex = explorer
    forms = []
    for family in [v for _label, v in ex.builder.family.options]:
        ex.builder.family.value = family
        forms += list(descendants(ex.builder.widget))
    for primitive in [v for _label, v in ex.editor.primitive.options]:
        ex.editor.primitive.value = primitive
        forms += list(descendants(ex.editor.widget))
    boxes = [b for b in [*descendants(ex.widget), *forms] if isinstance(b, w.IntText)]
    boxes += [b for b in [*descendants(ex.widget), *forms] if isinstance(b, w.BoundedIntText)]
    assert boxes == []
    whole = {type(b).__name__ for b in forms if isinstance(b, WholeText)}
    assert whole == {"WholeText"}  # the forms do have whole-number fields


def test_default_workload_is_a_small_matmul(explorer: Explorer) -> None:
    session = explorer.ctx.session
    assert session is not None and explorer.session is session
    assert session.workload == get_workload("matmul", M=128, N=128, K=128)
    assert explorer.builder.workload() == session.workload  # the form shows it
    assert explorer.editor.session is session and explorer.cost.session is session


def test_displays_in_a_notebook(explorer: Explorer) -> None:
    bundle = explorer._repr_mimebundle_()
    view = bundle["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == explorer.widget.model_id


def test_opens_a_workload_or_preset_by_name(make_replay: Callable[..., Measurer]) -> None:
    ex = Explorer("softmax_128x1024", store=":memory:", measurer=make_replay())
    try:
        assert ex.session is not None
        assert ex.session.workload == get_workload("softmax_128x1024")
        assert ex.builder.family_name == "softmax"
        workload = get_workload("matmul", M=32, N=32, K=32)
        ex.open(workload)
        assert ex.session.workload == workload and ex.editor.session is ex.session
    finally:
        ex.close()


def test_no_arguments_uses_the_default_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "records.db"
    monkeypatch.setenv(ENV_VAR, str(db))
    ex = Explorer()
    try:
        assert ex.session is not None and ex.session.workload.family == "matmul"
        assert db.exists()
        assert ex.ctx.target.kind == "llvm"
    finally:
        ex.close()  # the LocalMeasurer was never started: nothing to wait for


def test_build_edit_measure_end_to_end(explorer: Explorer) -> None:
    ex = explorer
    records: list = []
    ex.ctx.store.subscribe(records.extend)
    # Build a new workload in the builder: every panel follows.
    for name, value in {"M": 64, "N": 64, "K": 64}.items():
        ex.builder.fields[name].value = value
    ex.builder.build_button.click()
    session = ex.ctx.session
    assert session is not None and session.workload.key().startswith("matmul(K=64")
    assert ex.editor.session is session and ex.cost.session is session
    assert "K=64" in ex.editor.title.value
    # Edit in the editor: the cost panel predicts the new schedule.
    ex.editor.params["loop"].value = "i"
    ex.editor.params["factors"].value = "None, 16"
    ex.editor.apply_button.click()
    assert session.loops() == ["i_0", "i_1", "j", "k"]
    job = ex.cost.predict_job
    assert job is not None and job.wait(WAIT)
    static = ex.cost.predict(session.candidate())["static"].score
    assert ex.cost.last_predictions["static"].score == pytest.approx(static)
    # Measure: a manual record reaches the store and every listener.
    ex.cost.measure_button.click()
    job = ex.cost.measure_job
    assert job is not None and job.wait(WAIT) and job.state is JobState.FINISHED
    assert re.search(DURATION, text_of(ex.cost.latency.value))
    assert len(records) == 1 and records[0].candidate.workload == session.workload


def test_close_stops_background_work(make_replay: Callable[..., Measurer]) -> None:
    ex = Explorer(store=":memory:", measurer=make_replay())
    ex.cost.measure_button.click()
    job = ex.cost.measure_job
    assert job is not None and job.wait(WAIT)
    ex.close()
    with pytest.raises(RuntimeError):
        ex.ctx.measure_jobs.submit("after close", lambda _job: None)


def test_a_measurer_you_pass_in_stays_yours(make_replay: Callable[..., Measurer]) -> None:
    """Issue 10: the search panel closed the editor's measurer after a search, and the next
    Measure failed with "this LocalMeasurer is closed"."""
    mine = make_replay()
    closed: list[bool] = []
    mine.close = lambda: closed.append(True)  # type: ignore[method-assign]
    ex = Explorer(store=":memory:", measurer=mine)
    try:
        ex.search.strategy.value = "random"
        ex.search.trials.value = 4
        job = ex.search.start()
        assert job is not None and job.wait(WAIT) and job.state is JobState.FINISHED
        ex.cost.measure_button.click()  # the editor's Measure, after the search
        job = ex.cost.measure_job
        assert job is not None and job.wait(WAIT) and job.state is JobState.FINISHED
        assert re.search(DURATION, text_of(ex.cost.latency.value))
    finally:
        ex.close()
    assert closed == []  # never closed by the explorer, not even by close()


def test_a_point_clicked_in_the_dashboards_shows_the_editor(explorer: Explorer) -> None:
    ex = explorer
    ex.tabs.selected_index = 2  # the dashboards
    session = ex.ctx.session
    assert session is not None
    run = ex.ctx.store.create_run(session.workload, ex.ctx.target, "random")
    (record,) = ex.ctx.store.add_trials(
        run.id, [NewTrial(session.candidate(), MeasureResult(MeasureStatus.OK, (1e-3,), flops=1))]
    )
    ex.dashboards._open(lambda: record.id)
    assert ex.tabs.selected_index == 0 and ex.ctx.session is session  # its history kept
    assert f"Opened trial 1 of run {run.id}" in ex.dashboards.notice.value
