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
    assert b"plotly" in a.widget.library.source[:2000].lower()  # bytes: a binary buffer
    # What anywidget imports for each figure (under its 2 s limit): the small view module,
    # never plotly.js (4.8 MB), which made plotly's FigureWidget miss it.
    assert len(PlotView._esm) < 20_000
    assert a.widget.layout.width == "100%"


def test_a_reloaded_page_gets_plotly_js_as_bytes_outside_the_json() -> None:
    """A reloaded page asks for every widget's state in one reply and gives up after 4 s; with
    plotly.js as JSON text (4.8 MB of the tour's 5.8 MB) the reply missed that on a busy
    machine and every widget showed "model not found". plotly.js now travels as a buffer."""
    from ipywidgets.widgets.widget import _remove_buffers

    library = widgets.make_convergence_figure(convergence_info(())).widget.library
    reply = {library.model_id: {"state": library.get_state()}}  # as ipywidgets sends it
    text, _paths, buffers = _remove_buffers(reply)
    assert len(json.dumps(text)) < 1_000
    assert [len(b) for b in buffers] == [len(library.source)] and len(library.source) > 4_000_000
