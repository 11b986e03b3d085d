"""``Explorer``: the whole notebook UI in one object, ready to display.

It composes the panels around one shared ``Context``: the workload builder on top, then tabs for
hand-scheduling (editor and cost side by side), search, dashboards, the fleet (its polling runs
while its tab is shown), NAS (a layer it opens shows in the editor) and Model (an ONNX
network's tasks, its tune and its race against ONNX Runtime; a task it opens shows in the
editor). Each panel is also usable
alone (``ExpressionBuilder(ctx)`` ...); the ``Explorer`` only wires them to one context.

The panels of the other tabs are built when their tab is first opened, or their attribute
(``ex.search`` ...) first read: an explorer is about 400 widget models when all are built, and
a reloaded page fetches every live model from the kernel, in one reply, before its outputs
can draw (two explorers' worth took 2.2 s on a busy machine; a reply ending about 2 s after an
output started waiting lost that output: see widgets/labextension).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

import ipywidgets as w

from explorer.measure import Measurer
from explorer.session import ScheduleSession
from explorer.storage import RecordStore
from explorer.target import Target
from explorer.workloads import Workload, get_workload
from widgets._context import Context
from widgets._panel import close_widgets
from widgets._style import themed
from widgets.cost import CostPanel
from widgets.dashboards import Dashboards
from widgets.editor import ScheduleEditor
from widgets.expression import ExpressionBuilder
from widgets.fleet import FleetPanel
from widgets.model import ModelPanel
from widgets.nas import NasPanel
from widgets.search_panel import SearchPanel

DEFAULT_WORKLOAD = ("matmul", {"M": 128, "N": 128, "K": 128})
"""What ``Explorer()`` opens: small enough that a measurement takes well under a second."""
TITLES = ("Schedule", "Search", "Dashboards", "Fleet", "NAS", "Model")
SCHEDULE_TAB, SEARCH_TAB, DASHBOARDS_TAB, FLEET_TAB, NAS_TAB, MODEL_TAB = range(len(TITLES))


class _TabPanel(Protocol):
    @property
    def widget(self) -> w.Widget: ...


P = TypeVar("P", bound=_TabPanel)


class Explorer:
    """The schedule explorer: build a workload, schedule it by hand, measure, search, compare.

    Args:
        workload: what to open first: a ``Workload``, a family or preset name, or ``None`` for
            a 128x128x128 matmul.
        target: where schedules are built and measured (default: this machine's CPU).
        store: a ``RecordStore``, a database path, ``":memory:"``, or ``None`` for the default
            database (``$EXPLORER_DB`` or ``~/.explorer/records.db``).
        measurer: a measurer of yours for the editor and the searches; the explorer never
            closes it. Default: its own ``LocalMeasurer`` instances, closed by ``close()``.

    Example:
        >>> from widgets import Explorer
        >>> ex = Explorer(store=":memory:")  # doctest: +SKIP
        >>> ex  # a notebook cell ending here shows the UI  # doctest: +SKIP
    """

    def __init__(
        self,
        workload: Workload | str | None = None,
        *,
        target: Target | None = None,
        store: RecordStore | str | None = None,
        measurer: Measurer | None = None,
    ) -> None:
        self.ctx = Context(store=store, target=target, measurer=measurer)
        self.builder = ExpressionBuilder(self.ctx)
        self.editor = ScheduleEditor(self.ctx)
        self.cost = CostPanel(self.ctx)
        # The other tabs' panels, by tab, once built (``_panel``).
        self._panels: dict[int, _TabPanel] = {}

        # The editor gets the width: its loop table, TVMScript and help examples need ~800 px.
        # The cost panel sits beside it only when both fit (a wide screen), else it wraps below
        # (a laptop with JupyterLab's file browser open).
        schedule = w.HBox(
            [self.editor.widget, self.cost.widget],
            layout=w.Layout(width="100%", align_items="flex-start", flex_flow="row wrap"),
        )
        schedule.add_class("se-schedule")
        self.editor.widget.layout.flex = "3 1 800px"
        self.editor.widget.layout.min_width = "min(800px, 100%)"
        self.cost.widget.layout.flex = "1 1 320px"
        self.cost.widget.layout.min_width = "min(320px, 100%)"
        self.cost.widget.layout.padding = "0 0 0 12px"
        self.cost.widget.layout.border_left = "1px solid #ddd"
        # A slot per later tab, which gets its panel when the tab is first opened.
        self._slots = [schedule] + [
            w.Box(layout=w.Layout(width="100%", display="block")) for _ in TITLES[1:]
        ]
        self.tabs = w.Tab(children=self._slots, titles=TITLES)
        self.tabs.add_class("se-tabs")
        self.tabs.observe(lambda _: self._on_tab(), names="selected_index")
        self._root = w.VBox([self.builder.widget, self.tabs])
        self._root.add_class("se-explorer")
        themed(self._root)

        self.open(_resolve(workload))

    @property
    def widget(self) -> w.VBox:
        """The root widget (display it, or put it in your own layout)."""
        return self._root

    @property
    def session(self) -> ScheduleSession | None:
        """The current hand-scheduling session."""
        return self.ctx.session

    def open(self, workload: Workload) -> ScheduleSession:
        """Start scheduling ``workload`` from scratch (a fresh session becomes current)."""
        self.builder.show_workload(workload)
        session = ScheduleSession(workload, self.ctx.target)
        self.ctx.set_session(session)
        return session

    @property
    def search(self) -> SearchPanel:
        """The Search tab's panel (built on first use)."""
        return self._panel(SEARCH_TAB, lambda: SearchPanel(self.ctx))

    @property
    def dashboards(self) -> Dashboards:
        """The Dashboards tab's panel (built on first use)."""
        return self._panel(DASHBOARDS_TAB, self._make_dashboards)

    @property
    def fleet(self) -> FleetPanel:
        """The Fleet tab's panel (built on first use; it polls its tracker while shown)."""
        return self._panel(FLEET_TAB, lambda: FleetPanel(self.ctx, autostart=False))

    @property
    def nas(self) -> NasPanel:
        """The NAS tab's panel (built on first use)."""
        return self._panel(NAS_TAB, self._make_nas)

    @property
    def model(self) -> ModelPanel:
        """The Model tab's panel (built on first use)."""
        return self._panel(MODEL_TAB, self._make_model)

    def _panel(self, tab: int, build: Callable[[], P]) -> P:
        if tab not in self._panels:
            if self._root.comm is None:  # closed: a new panel would work on a closed context
                raise RuntimeError(f"this explorer is closed: its {TITLES[tab]} tab cannot open")
            panel = build()
            self._panels[tab] = panel
            self._slots[tab].children = (panel.widget,)
        return cast(P, self._panels[tab])  # each tab is only ever built by its own property

    def _make_dashboards(self) -> Dashboards:
        dashboards = Dashboards(self.ctx)
        # A point clicked in the dashboards opens in the editor: show it there.
        dashboards.on_open = lambda _record: setattr(self.tabs, "selected_index", SCHEDULE_TAB)
        return dashboards

    def _make_nas(self) -> NasPanel:
        nas = NasPanel(self.ctx)
        nas.on_open = lambda _session: setattr(self.tabs, "selected_index", SCHEDULE_TAB)
        return nas

    def _make_model(self) -> ModelPanel:
        model = ModelPanel(self.ctx)
        model.on_open = lambda _session: setattr(self.tabs, "selected_index", SCHEDULE_TAB)
        return model

    def _on_tab(self) -> None:
        shown = self.tabs.selected_index
        panels: dict[int, Callable[[], _TabPanel]] = {
            SEARCH_TAB: lambda: self.search,
            DASHBOARDS_TAB: lambda: self.dashboards,
            FLEET_TAB: lambda: self.fleet,
            NAS_TAB: lambda: self.nas,
            MODEL_TAB: lambda: self.model,
        }
        if shown in panels:
            panels[shown]()  # builds the tab's panel the first time it is shown
        # The fleet panel asks its tracker every few seconds: only while someone looks at it.
        if FLEET_TAB in self._panels:
            if shown == FLEET_TAB:
                self.fleet.start_polling()
            else:
                self.fleet.stop_polling()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self._root._repr_mimebundle_(**kwargs)

    def close(self) -> None:
        """Stop background work, release the measurer's workers and close the widgets (a
        fleet started from the Fleet tab keeps running: its Stop button or
        ``explorer fleet down`` stops it)."""
        built = [self._panels[tab] for tab in sorted(self._panels, reverse=True)]
        for panel in (*built, self.cost, self.editor, self.builder):
            close = getattr(panel, "close", None)
            if close is not None:
                close()
        self.ctx.close()
        close_widgets([self._root])


def _resolve(workload: Workload | str | None) -> Workload:
    if workload is None:
        name, params = DEFAULT_WORKLOAD
        return get_workload(name, **params)
    if isinstance(workload, str):
        return get_workload(workload)
    return workload
