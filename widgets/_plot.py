"""``LiveFigure``: a plotly figure that draws in the notebook and follows every change to it.

plotly's own ``FigureWidget`` (plotly 6+) did not draw reliably in JupyterLab. Its front end is
an anywidget whose module carries all of plotly.js (4.9 MB), imported anew for every figure, and
anywidget gives each model 2 s to load its module: a model that misses that (a busy machine, a
page reload restoring ten figures at once) never handles another message from the kernel. The
figure then stays as it was when created (empty axes), and ``FigureWidget`` sends its updates
only as one-off messages, so nothing repairs it.

A ``LiveFigure`` is a plain ``go.Figure`` (every plotly API works on it, and
``explorer.plots``' update functions too) whose whole state is kept in a synced widget trait:

* ``_FigureState`` (a plain ipywidgets model, handled at once, with no module to load) holds
  the figure as JSON, rewritten after every change of the figure;
* ``_PlotlyLibrary`` brings plotly.js to the page, once per kernel (and once more to a page
  reloaded), whatever the number of figures;
* ``PlotView`` (the anywidget shown in the page) has a small module that draws the state with
  plotly.js and draws it again whenever it changes. It needs no message of its own, so
  anywidget's 2 s limit cannot break it (anywidget then logs "Failed to initialize model",
  and the plot draws all the same).

A view created late (a reload, the figure shown twice) draws the figure as it is now. Clicks
on points come back as messages and reach the traces' ``on_click`` callbacks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, ParamSpec, TypeGuard

import anywidget
import ipywidgets as w
import plotly.graph_objects as go
import plotly.io as pio
import traitlets
from IPython.display import display
from plotly.callbacks import Points
from plotly.offline import get_plotlyjs, get_plotlyjs_version

_ESM = (Path(__file__).parent / "_plot.js").read_text(encoding="utf-8")


class _PlotlyLibrary(w.Widget):  # type: ignore[misc]  # ipywidgets is untyped: its base class is Any
    """plotly.js, sent to the page once per kernel for every figure to share.

    Its 4.8 MB go with the model's opening message only (as a binary buffer, never inside
    JSON); the kernel then forgets them. A reloaded page asks the kernel for every widget's
    state in one reply, before any widget output draws: with plotly.js in that reply (5.4 MB of
    the tour's 5.8 MB) it took 2.2 s. A page without the library (a reloaded one) asks for it
    with a message (``REQUEST``), answered with the source as a buffer.
    """

    source = traitlets.Bytes().tag(sync=True)
    version = traitlets.Unicode().tag(sync=True)

    REQUEST: ClassVar[dict[str, str]] = {"request": "plotly.js"}

    def __init__(self) -> None:
        self._source = get_plotlyjs().encode()
        super().__init__(source=self._source, version=get_plotlyjs_version())  # opens the model
        # Emptied in the kernel without telling the page (which keeps its copy): a property
        # lock on the new value is how ipywidgets sets a value the page already holds.
        with self._lock_property(source=b""):
            self.source = b""
        self.on_msg(self._on_page_message)

    def _on_page_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if content == self.REQUEST:
            self.send({"plotly.js": self.version}, buffers=[self._source])


class _FigureState(w.Widget):  # type: ignore[misc]  # ipywidgets is untyped: its base class is Any
    """One figure as plotly JSON (``{"data": [...], "layout": {...}}``)."""

    figure = traitlets.Unicode("{}").tag(sync=True)


class PlotView(anywidget.AnyWidget):
    """The figure's view in the page: draws ``state`` with ``library`` (``_plot.js``).

    Nothing of it changes after it is created (put it in a box to style or size it): its
    model in the page may have missed anywidget's 2 s and then handles no message."""

    _esm = _ESM
    state = traitlets.Instance(_FigureState).tag(sync=True, **w.widget_serialization)
    library = traitlets.Instance(_PlotlyLibrary).tag(sync=True, **w.widget_serialization)

    def close(self) -> None:
        """Close the view and the figure's state it draws (one view a figure); the library
        stays, shared by every figure of the kernel."""
        super().close()
        self.state.close()


_library: _PlotlyLibrary | None = None


def _shared_library() -> _PlotlyLibrary:
    global _library
    if _library is None or _library.comm is None:  # none yet, or closed (Widget.close_all)
        _library = _PlotlyLibrary()
    return _library


class LiveFigure(go.Figure):  # type: ignore[misc]  # plotly is untyped: its base class is Any
    """A ``go.Figure`` shown live: ``widget`` (or the figure itself, at the end of a cell)
    draws it in the notebook, and every change to the figure reaches every view of it.

    Change it from the UI thread (``widgets._ui``): each change writes a widget.

    Example:
        >>> fig = LiveFigure(go.Figure(go.Scatter(x=[1, 2], y=[3, 4])))
        >>> fig.data[0].y = [4, 3]  # the page redraws
        >>> fig.widget.layout.width
        '100%'
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._state = _FigureState(figure=self._as_json())
        self._state.on_msg(self._on_page_message)
        self._view = PlotView(
            state=self._state, library=_shared_library(), layout=w.Layout(width="100%")
        )

    @property
    def widget(self) -> PlotView:
        """The figure's view, to put in a box of widgets (shown at the width of its box)."""
        return self._view

    def close(self) -> None:
        """Close the figure's widgets (its views disappear from the page)."""
        self.widget.close()
        self._state.close()

    # -- kernel -> page: the whole figure after every change --------------------------------
    def _as_json(self) -> str:
        return str(pio.to_json(self, validate=False))

    def _changed(self, *_args: Any, **_kwargs: Any) -> None:
        state = getattr(self, "_state", None)  # None while plotly's constructor runs
        if state is not None:
            state.figure = self._as_json()

    # plotly calls these after each change (a batch_update: once, at its end); FigureWidget
    # sends them as edits, we send the resulting figure.
    _send_addTraces_msg = _changed
    _send_moveTraces_msg = _changed
    _send_deleteTraces_msg = _changed
    _send_restyle_msg = _changed
    _send_relayout_msg = _changed
    _send_update_msg = _changed
    _send_animate_msg = _changed

    # -- page -> kernel: clicks ---------------------------------------------------------------
    def _on_page_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict) or content.get("event") != "click":
            return
        points = content.get("points")
        picked: dict[int, list[int]] = {}
        for p in points if isinstance(points, list) else ():
            if not isinstance(p, dict):
                continue
            curve, point = p.get("curve"), p.get("point")
            if not (_is_index(curve) and _is_index(point)):
                continue
            # The page may still show the figure as it was before its last change: a click
            # on a trace that is gone, or another trace now, is dropped.
            if curve < len(self.data) and self.data[curve].meta == p.get("meta"):
                picked.setdefault(curve, []).append(point)
        for curve, inds in picked.items():
            trace = self.data[curve]
            xs = [_at(trace.x, i) for i in inds]
            ys = [_at(trace.y, i) for i in inds]
            trace._dispatch_on_click(Points(inds, xs, ys, trace.name, curve), None)

    # -- display ------------------------------------------------------------------------------
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(include=include, exclude=exclude, **kwargs)

    def _ipython_display_(self) -> None:
        # plotly's own _ipython_display_ (inherited) would show a static copy
        display(self.widget)  # type: ignore[no-untyped-call]  # IPython ships no types


def _is_index(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _at(values: Any, index: int) -> Any:
    return values[index] if values is not None and 0 <= index < len(values) else None


P = ParamSpec("P")


def live(make: Callable[P, go.Figure]) -> Callable[P, LiveFigure]:
    """``make`` (an ``explorer.plots`` factory), returning its figure as a ``LiveFigure``."""

    @functools.wraps(make)
    def make_live(*args: P.args, **kwargs: P.kwargs) -> LiveFigure:
        return LiveFigure(make(*args, **kwargs))

    make_live.__doc__ = f"{make.__doc__ or ''}\n\n    Returned as a ``LiveFigure``, drawn live."
    return make_live


__all__ = ["LiveFigure", "PlotView", "live"]
