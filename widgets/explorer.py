"""``Explorer``: the whole notebook UI in one object, ready to display.

It composes the panels around one shared ``Context``: the workload builder on top, then tabs for
hand-scheduling (editor and cost side by side), search, dashboards, the fleet (its polling runs
while its tab is shown) and NAS (a layer it opens shows in the editor). Each panel is also usable
alone (``ExpressionBuilder(ctx)`` ...); the ``Explorer`` only wires them to one context.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from explorer.measure import Measurer
from explorer.session import ScheduleSession
from explorer.storage import RecordStore
from explorer.target import Target
from explorer.workloads import Workload, get_workload
from widgets._context import Context
from widgets._style import themed
from widgets.cost import CostPanel
from widgets.dashboards import Dashboards
from widgets.editor import ScheduleEditor
from widgets.expression import ExpressionBuilder
from widgets.fleet import FleetPanel
from widgets.nas import NasPanel
from widgets.search_panel import SearchPanel

DEFAULT_WORKLOAD = ("matmul", {"M": 128, "N": 128, "K": 128})
"""What ``Explorer()`` opens: small enough that a measurement takes well under a second."""
FLEET_TAB = 3
NAS_TAB = 4


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
        self.search = SearchPanel(self.ctx)
        self.dashboards = Dashboards(self.ctx)
        self.fleet = FleetPanel(self.ctx, autostart=False)
        self.nas = NasPanel(self.ctx)

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
        self.tabs = w.Tab(
            children=[
                schedule,
                self.search.widget,
                self.dashboards.widget,
                self.fleet.widget,
                self.nas.widget,
            ],
            titles=("Schedule", "Search", "Dashboards", "Fleet", "NAS"),
        )
        self.tabs.add_class("se-tabs")
        # The fleet panel asks its tracker every few seconds: only while someone looks at it.
        self.tabs.observe(lambda _: self._sync_fleet_polling(), names="selected_index")
        # A point clicked in the dashboards opens in the editor: show it there.
        self.dashboards.on_open = lambda _record: setattr(self.tabs, "selected_index", 0)
        self.nas.on_open = lambda _session: setattr(self.tabs, "selected_index", 0)
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

    def _sync_fleet_polling(self) -> None:
        if self.tabs.selected_index == FLEET_TAB:
            self.fleet.start_polling()
        else:
            self.fleet.stop_polling()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self._root._repr_mimebundle_(**kwargs)

    def close(self) -> None:
        """Stop background work, release the measurer's workers and close the widgets (a
        fleet started from the Fleet tab keeps running: its Stop button or
        ``explorer fleet down`` stops it)."""
        for panel in (
            self.nas,
            self.fleet,
            self.dashboards,
            self.search,
            self.cost,
            self.editor,
            self.builder,
        ):
            close = getattr(panel, "close", None)
            if close is not None:
                close()
        self.ctx.close()
        self._root.close()


def _resolve(workload: Workload | str | None) -> Workload:
    if workload is None:
        name, params = DEFAULT_WORKLOAD
        return get_workload(name, **params)
    if isinstance(workload, str):
        return get_workload(workload)
    return workload
