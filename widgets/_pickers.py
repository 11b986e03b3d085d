"""Pickers whose choice is read by the label the page showed, not by its position.

ipywidgets sends a ``Dropdown``'s or ``Select``'s choice to the kernel as an index into the
options the page shows. When the kernel has just replaced those options (the editor's loop
names after a step) and the page has not drawn the new ones yet, a choice made from the old
list arrives as an index into the new one, and lands on another option: the editor then split
a loop the user had not picked. The explorer's JupyterLab extension (its plugin
``schedule-explorer:choice-labels``) sends the label the page showed beside the index, and
these pickers honour the label:

- the index names that label: taken as it is;
- another option has that label: that option is taken, and the page is told which it is;
- no option has it any more: the kernel's choice stays, the page is told it, and ``refused``
  keeps the label, so that an action that reads the picker (the editor's Apply) refuses once
  and says why instead of acting on a choice the user did not make.

Without the extension (a classic notebook, VS Code) the page sends no label and they behave
like ipywidgets' own.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w
from traitlets import Unicode, observe

_LABEL = "_chosen_label"  # the extension adds it to an index update of a model with this trait


class ChosenByLabel(w.widgets.widget_selection._Selection):  # type: ignore[misc]  # untyped
    """A single-choice selection that honours the label the page chose (module docstring).

    Attributes:
        refused: the label of the page's last choice when no option has it any more (the
            kernel's choice stayed); None once another choice is made.
    """

    _chosen_label = Unicode(None, allow_none=True).tag(sync=True, echo_update=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refused: str | None = None

    @observe("index")
    def _choice_made(self, _change: Any) -> None:
        # a new choice (the page's, the kernel's, a notebook's) replaces a refused one
        self.refused = None

    def set_state(self, sync_data: dict[str, Any]) -> None:
        label = sync_data.get(_LABEL)
        state = {k: v for k, v in sync_data.items() if k != _LABEL}
        if "index" not in state or label is None:
            super().set_state(state)
            return
        labels = list(self._options_labels)
        index = state["index"]
        if isinstance(index, int) and 0 <= index < len(labels) and labels[index] == label:
            self.refused = None
            super().set_state(state)
            return
        # Chosen from options the page showed before the kernel's latest ones.
        if label in labels:
            self.refused = None
            super().set_state({**state, "index": labels.index(label)})
        else:
            self.refused = label
            del state["index"]
            if state:
                super().set_state(state)
        self.send_state(["_options_labels", "index"])  # the page shows what the kernel holds


class Dropdown(ChosenByLabel, w.Dropdown):  # type: ignore[misc]  # ipywidgets is untyped
    """``ipywidgets.Dropdown`` read by the label the page showed."""


class Select(ChosenByLabel, w.Select):  # type: ignore[misc]  # ipywidgets is untyped
    """``ipywidgets.Select`` read by the label the page showed."""


def refused_choice(field: Any) -> str | None:
    """The label a picker could not honour (``ChosenByLabel.refused``), once: it is cleared."""
    label = getattr(field, "refused", None)
    if label is not None:
        field.refused = None
    return label


__all__ = ["ChosenByLabel", "Dropdown", "Select", "refused_choice"]
