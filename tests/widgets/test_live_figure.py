"""``LiveFigure``, headless: its synced state is the whole figure after every kind of change,
clicks from the page reach the traces' callbacks (and a click on a figure the page has not
redrawn yet is dropped), and what anywidget loads for each figure stays small. Drawing in a
real page (also after a reload) is tests/browser/test_lab_plots_draw.py's."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import widgets
from explorer.analysis import convergence_info
from widgets._plot import LiveFigure, PlotView, _shared_library

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def state(fig: LiveFigure) -> dict[str, Any]:
    """The figure as the page receives it."""
    return dict(json.loads(fig._state.figure))


def same(fig: LiveFigure) -> bool:
    return state(fig) == json.loads(fig.to_json())


@pytest.fixture
def fig() -> LiveFigure:
    base = go.Figure(
        [
            go.Scatter(x=[1, 2, 3], y=[3, 1, 2], meta="a", customdata=[10, 11, 12]),
            go.Scatter(x=[1], y=[5], meta="b"),
        ]
    )
    return LiveFigure(base)


def test_every_kind_of_change_reaches_the_page_state(fig: LiveFigure) -> None:
    assert same(fig) and len(state(fig)["data"]) == 2
    fig.data[0].y = [9, 9, 9]  # a property
    assert state(fig)["data"][0]["y"] == [9, 9, 9]
    fig.layout.title.text = "now"  # the layout
    assert state(fig)["layout"]["title"]["text"] == "now"
    with fig.batch_update():  # several at once
        fig.data[1].x = [2]
        fig.update_layout(height=321)
    assert state(fig)["layout"]["height"] == 321 and same(fig)
    fig.data = fig.data[1:]  # traces removed, added
    fig.add_trace(go.Box(y=[1.0, 2.0], meta="c"))
    assert [t["meta"] for t in state(fig)["data"]] == ["b", "c"]
    assert same(fig)


def test_a_click_in_the_page_reaches_the_trace_callbacks(fig: LiveFigure) -> None:
    got: list[tuple[str, list[int], list[Any]]] = []
    for trace in fig.data:
        trace.on_click(lambda t, p, _state: got.append((t.meta, p.point_inds, p.xs)))
    click = {"event": "click", "points": [{"curve": 0, "point": 2, "meta": "a"}]}
    fig._on_page_message(None, click, [])
    assert got == [("a", [2], [3])]


def test_a_click_on_what_the_page_showed_before_a_change_is_dropped(fig: LiveFigure) -> None:
    got: list[Any] = []
    for trace in fig.data:
        trace.on_click(lambda t, points, _state: got.append(t.meta))
    fig.data = fig.data[1:]  # the page still shows "a" as trace 0 when the user clicks it
    fig._on_page_message(None, {"event": "click", "points": [{"curve": 0, "point": 0}]}, [])
    fig._on_page_message(
        None, {"event": "click", "points": [{"curve": 0, "point": 0, "meta": "a"}]}, []
    )
    fig._on_page_message(
        None, {"event": "click", "points": [{"curve": 5, "point": 0, "meta": "b"}]}, []
    )
    assert got == []


@settings(max_examples=200, deadline=None)
@given(content=JSON)
def test_any_message_from_the_page_is_handled_without_raising(content: Any) -> None:
    fig = LiveFigure(go.Figure(go.Scatter(x=[1], y=[1], meta="a")))
    fig.data[0].on_click(lambda *_args: None)
    fig._on_page_message(None, content, [])
    fig._on_page_message(None, {"event": "click", "points": content}, [])
    fig._on_page_message(None, {"event": "click", "points": [content]}, [])


def test_the_figure_displays_as_its_view_and_plotly_js_is_sent_once() -> None:
    a = widgets.make_convergence_figure(convergence_info(()))
    b = LiveFigure(go.Figure())
    assert isinstance(a, LiveFigure) and same(a)
    data, _metadata = a._repr_mimebundle_()
    view = data["application/vnd.jupyter.widget-view+json"]
    assert view["model_id"] == a.widget.model_id
    assert a.widget.library is b.widget.library is _shared_library()
    # What anywidget imports for each figure (under its 2 s limit): the small view module,
    # never plotly.js (4.8 MB), which made plotly's FigureWidget miss it.
    assert len(PlotView._esm) < 20_000
    assert a.widget.layout.width == "100%"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any, list[Any]]]:
    """Every message the kernel's widgets send from now on: (kind, data, buffers). The comm
    package's ``create_comm`` is meant to be replaced so (a kernel replaces it likewise)."""
    import comm

    messages: list[tuple[str, Any, list[Any]]] = []

    class Recording(comm.DummyComm):  # type: ignore[misc]  # comm's base class is untyped here
        def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None,
                        buffers: Any = None, **keys: Any) -> None:  # fmt: skip
            messages.append((msg_type, data, list(buffers or [])))

    monkeypatch.setattr(comm, "create_comm", Recording)
    return messages


def test_plotly_js_goes_with_the_opening_only_and_a_reloaded_page_asks_for_it(sent) -> None:
    """A reloaded page asks for every widget's state in one reply, and an output whose widget
    is not back within 2 s says "model not found" for good: with plotly.js in that reply (5.4
    MB of the tour's 5.8 MB, seen arriving 2.2 s after the request) the tour's outputs did."""
    from ipywidgets.widgets.widget import _remove_buffers

    from widgets import _plot

    previous = _plot._library
    _plot._library = None  # a fresh one, opened through the recording comm
    try:
        library = _shared_library()
        (opening,) = sent  # the model's opening, and no update after it
        kind, data, buffers = opening
        assert kind == "comm_open" and [len(b) for b in buffers] == [len(library._source)]
        assert len(library._source) > 4_000_000 and b"plotly" in library._source[:2000].lower()
        # What a reload gets from the kernel: the library without its source.
        restored, _paths, restored_buffers = _remove_buffers(
            {library.model_id: {"state": library.get_state()}}
        )
        assert len(json.dumps(restored)) < 1_000 and sum(map(len, restored_buffers)) == 0
        # The reloaded page asks; the answer carries the source as a buffer, outside JSON.
        library._handle_msg(
            {
                "content": {"data": {"method": "custom", "content": {"request": "plotly.js"}}},
                "buffers": [],
            }
        )
        library._handle_msg(  # anything else is not answered
            {
                "content": {"data": {"method": "custom", "content": {"request": "other"}}},
                "buffers": [],
            }
        )
        kind, data, buffers = sent[-1]
        assert len(sent) == 2 and kind == "comm_msg"
        assert data == {"method": "custom", "content": {"plotly.js": library.version}}
        assert [bytes(b) for b in buffers] == [library._source]
    finally:
        _plot._library = previous
