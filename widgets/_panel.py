"""What every panel shares: a status line, callbacks that never raise, display in a cell."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import ipywidgets as w

from widgets import _ui

if TYPE_CHECKING:
    from widgets._jobs import Job

log = logging.getLogger(__name__)


class Panel:
    """A panel's ``widget`` (what a cell shows) and ``status`` label, and ``_guard`` for its
    button and observer callbacks: what one raises is logged and shown, never raised into the
    kernel (ipywidgets would print it to the log and leave the panel silent)."""

    widget: w.Widget
    status: w.Label

    # Raised by a user's own mistake (an illegal schedule step ...): shown, not logged.
    expected_errors: ClassVar[tuple[type[Exception], ...]] = ()

    def _say(self, text: str) -> None:
        # A Label shows text as is: an error message can never inject markup.
        self.status.value = text

    def _show_error(self, exc: Exception) -> None:
        self._say(f"Error: {type(exc).__name__}: {exc}")

    def _guard(self, action: Callable[[], Any]) -> None:
        """Run a button or observer callback; show what it raised instead of raising.

        Called off the UI thread (a widget message a kernel handled on a subshell's thread),
        it runs there instead, after what runs there now (``_ui.on_ui_thread``)."""
        if not _ui.on_ui_thread(self._guard, action):
            return
        try:
            action()
        except self.expected_errors as exc:
            self._show_error(exc)
        except Exception as exc:
            log.exception("%s action failed", type(self).__name__)
            self._show_error(exc)

    def _stop_job(
        self, job: Job | None, stop_button: w.Button, *, idle: str, stopping: str
    ) -> None:
        """The Stop button of a panel that runs one long job at a time: ask ``job`` to stop
        at its next checkpoint (a batch, a shape, a chunk), and say ``stopping``; ``idle``
        when nothing runs."""
        if job is None or not job.is_active:
            self._say(idle)
            return
        job.cancel()
        stop_button.disabled = True
        self._say(stopping)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def close_widgets(widgets: Iterable[w.Widget]) -> None:
    """Close ``widgets`` and everything inside them: a form rebuilt for another primitive or
    operator otherwise leaves its old fields alive in the kernel and as models in the page,
    which a reload fetches all over again."""
    for widget in widgets:
        close_widgets(getattr(widget, "children", ()))
        # a widget's layout and style are models of their own, made with it (never shared
        # between the explorer's widgets)
        for part in (getattr(widget, "layout", None), getattr(widget, "style", None)):
            if isinstance(part, w.Widget):
                part.close()
        widget.close()
