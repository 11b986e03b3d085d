"""Pickers read by the label the page showed (widgets/_pickers.py), as the page's messages arrive.

A page's choice reaches the kernel as ``Widget.set_state`` with the index the page chose and,
from the explorer's JupyterLab extension, the label it showed there. These tests send what a
page sends when it chose from options the kernel has replaced since (the browser test
test_lab_explorer's test_a_loop_picked_before_a_step_landed_is_the_loop_split drives a real one).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session import ScheduleSession
from widgets._context import Context
from widgets._pickers import Dropdown, Select
from widgets.editor import ScheduleEditor


class Sent:
    """The messages a widget sends to the page."""

    def __init__(self, widget: Any) -> None:
        self.states: list[dict[str, Any]] = []
        widget._send = lambda msg, buffers=None: self.states.append(msg.get("state", {}))

    def last(self, key: str) -> Any:
        return next(s[key] for s in reversed(self.states) if key in s)


def page_chose(widget: Any, index: int, label: str | None) -> None:
    state: dict[str, Any] = {"index": index}
    if label is not None:
        state["_chosen_label"] = label
    widget.set_state(state)


@pytest.mark.parametrize("kind", [Dropdown, Select])
def test_a_choice_from_the_page_s_old_options_takes_the_option_it_named(kind: type) -> None:
    picker = kind(options=["i", "j", "k"], value="i")
    sent = Sent(picker)
    picker.options = ["i_0", "i_1", "j", "k"]  # the page has not drawn these yet
    page_chose(picker, 1, "j")  # "j" was second on the page
    assert picker.value == "j" and picker.refused is None
    assert sent.last("index") == 2  # the page is told where "j" is now


def test_a_choice_the_options_lost_is_refused_and_the_page_told() -> None:
    picker = Dropdown(options=["i", "j", "k"], value="j")
    sent = Sent(picker)
    picker.options = ["i_0", "i_1", "j", "k"]
    picker.value = "i_0"
    page_chose(picker, 0, "i")  # "i" is gone: split by the step the page had not seen
    assert picker.value == "i_0" and picker.refused == "i"
    assert sent.last("index") == 0
    page_chose(picker, 2, "j")  # chosen again, from the new options
    assert picker.value == "j" and picker.refused is None


def test_without_a_label_the_index_is_taken_as_ipywidgets_does() -> None:
    picker = Dropdown(options=["i", "j", "k"], value="i")
    picker.options = ["i_0", "i_1", "j", "k"]
    page_chose(picker, 1, None)  # a page without the extension (a classic notebook)
    assert picker.value == "i_1" and picker.refused is None


@settings(max_examples=200, deadline=None)
@given(
    old=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True),
    new=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True),
    data=st.data(),
)
def test_the_value_is_the_label_the_page_chose_or_stays(
    old: list[str], new: list[str], data: st.DataObject
) -> None:
    """Whatever the page saw and the kernel holds: never an option the user did not choose."""
    picker = Dropdown(options=old, value=old[0])
    Sent(picker)
    picker.options = new
    before = picker.value
    index = data.draw(st.integers(0, len(old) - 1))
    page_chose(picker, index, old[index])
    if old[index] in new:
        assert picker.value == old[index] and picker.refused is None
    else:
        assert picker.value == before and picker.refused == old[index]


def test_apply_after_a_refused_loop_says_so_and_keeps_the_session(
    ctx: Context, session: ScheduleSession
) -> None:
    editor = ScheduleEditor(ctx)
    loop = editor.params["loop"]
    Sent(loop)
    editor.params["factors"].value = "None, 4"
    page_sees = list(loop._options_labels)  # i, j, k: the page draws nothing until it hears
    loop.value = "i"
    editor.apply_button.click()  # split i: the kernel's loops are i_0, i_1, j, k now
    steps = session.snapshot.step_id
    page_chose(loop, page_sees.index("j"), "j")  # picked from the page's old list: taken
    assert loop.value == "j" and loop.refused is None
    page_chose(loop, page_sees.index("i"), "i")  # the page still showed i: gone
    editor.apply_button.click()
    assert session.snapshot.step_id == steps  # nothing applied
    banner = editor.banner.value
    assert "Not applied" in banner and "loop you picked, i," in banner and "reads j" in banner
    editor.apply_button.click()  # the user saw the picker and applies to what it reads
    assert session.snapshot.step_id != steps
    assert "j_0" in session.loops()


def test_history_checkout_after_a_refused_pick_says_so(
    ctx: Context, session: ScheduleSession
) -> None:
    editor = ScheduleEditor(ctx)
    Sent(editor.history)
    session.apply("split", loop="i", factors=[None, 4])
    shown = list(editor.history._options_labels)
    session.apply("split", loop="j", factors=[None, 4])  # the current step's marker moved
    current = session.snapshot.step_id
    page_chose(editor.history, 1, shown[1])
    editor.checkout_button.click()
    assert session.snapshot.step_id == current
    assert "Not done" in editor.banner.value


def test_a_click_handled_on_a_subshell_s_thread_runs_on_the_ui_thread(
    ctx: Context,
    session: ScheduleSession,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ipykernel 7.4 handles a widget's message on a subshell's thread when JupyterLab sends
    widget messages to a subshell (its default, overridden by the explorer's settings file):
    the editor's step then ran beside the UI thread. The panel hands it over instead (the
    ``ui_thread_only`` fixture fails the test on a widget written from another thread)."""
    import threading

    from widgets import _ui

    monkeypatch.setattr(_ui, "_warned_off_thread", False)  # it warns once per process
    editor = ScheduleEditor(ctx)
    editor.params["loop"].value, editor.params["factors"].value = "i", "None, 4"
    subshell = threading.Thread(target=editor.apply_button.click, name="subshell-test")
    with caplog.at_level("WARNING", logger="widgets._ui"):
        subshell.start()
        subshell.join()
    assert session.loops() == ["i", "j", "k"]  # not applied on the subshell's thread
    assert _ui.drain() >= 1
    assert session.loops() == ["i_0", "i_1", "j", "k"]
    assert "Kernel Comms over subshells" in caplog.text


def test_apply_again_after_a_step_took_the_picked_loop_says_so(
    ctx: Context, session: ScheduleSession
) -> None:
    """A new user on a busy kernel: i_1 picked, Apply, factors changed, Apply again before the
    page showed the new loops. The first step split i_1; the picker fell back to the first loop,
    i_0, and the second step split i_0 without a word."""
    editor = ScheduleEditor(ctx)
    session.apply("split", loop="i", factors=[None, 4])
    editor.params["loop"].value, editor.params["factors"].value = "i_1", "None, 4"
    editor.apply_button.click()  # splits i_1
    assert editor.params["loop"].label == "(pick a loop)"
    steps = session.snapshot.step_id
    editor.params["factors"].value = "None, 2"
    editor.apply_button.click()  # the user still sees i_1
    assert session.snapshot.step_id == steps  # nothing applied to i_0
    assert "pick a loop" in editor.banner.value
    editor.params["loop"].value = "i_0"
    editor.apply_button.click()
    assert "i_0_0" in session.loops()


def test_a_picked_loop_a_step_kept_stays_picked(ctx: Context, session: ScheduleSession) -> None:
    editor = ScheduleEditor(ctx)
    editor.params["loop"].value, editor.params["factors"].value = "j", "None, 4"
    editor.apply_button.click()  # splits j
    editor.params["loop"].value = "k"
    editor.params["factors"].value = "None, 2"
    editor.primitive.value = "unroll"  # another form: its loop picker starts on a loop
    editor.primitive.value = "split"
    editor.params["loop"].value, editor.params["factors"].value = "k", "None, 2"
    editor.apply_button.click()
    assert "k_0" in session.loops() and editor.banner.layout.display == "none"
    editor.primitive.value = "parallel"
    editor.params["loop"].value = "i"
    session.apply("split", loop="j_1", factors=[None, 2])  # i is untouched: it stays picked
    assert editor.params["loop"].value == "i"
