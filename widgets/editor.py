"""``ScheduleEditor``: apply schedule primitives by hand, with undo, redo and a branch history.

Each primitive's form is generated from its declared ``ParamSpec``\\ s (``explorer.session``):
loops and blocks are picked from the current snapshot, factors and loop lists are typed as text
and parsed here (never ``eval``-ed). An illegal step shows a plain-language banner; the session
itself is untouched (``ScheduleSession.apply`` guarantees it).
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as w

from explorer.errors import PrimitiveError
from explorer.session import (
    PRIMITIVES,
    REQUIRED,
    ParamSpec,
    ScheduleSession,
    Snapshot,
    parse_arguments,
)
from widgets._context import Context
from widgets._editor_views import changed_lines, loop_table_html, primitive_help, script_html
from widgets._panel import Panel, close_widgets
from widgets._pickers import Dropdown, Select, refused_choice
from widgets._style import themed
from widgets._whole import WholeText

log = logging.getLogger(__name__)

_NONE_LABEL = "(none)"
_PICK = ""  # "(pick a loop)": the value of a picker whose choice a step took away
PICKED = ("loop", "block")  # the parameters picked from the snapshot's names
_FILL = {"width": "100%", "min_width": "0"}  # a field as wide as its column, never wider


class ScheduleEditor(Panel):
    """Loop nest, primitive forms, Apply/Undo/Redo, history, TVMScript and trace of a session.

    Args:
        ctx: the shared explorer state; the editor follows ``ctx.session`` (event ``"session"``).

    Attributes:
        widget: the container to display.
        primitive: the primitive ``Dropdown``; ``params`` holds its form's widgets by name.
        apply_button, undo_button, redo_button, reset_button, checkout_button: the actions.
        history: a ``Select`` over every step of every branch (value: the step id).
        loop_table, script: ``HTML`` views of the loop nest and of the TVMScript.
        trace: the trace as runnable Python (a ``Textarea`` to copy from).
        banner: the error banner (hidden while there is no error).

    Example:
        >>> from explorer.workloads import get_workload
        >>> ctx = Context(store=":memory:")
        >>> ctx.set_session(ScheduleSession(get_workload("matmul", M=64, N=64, K=64)))
        >>> editor = ScheduleEditor(ctx)
        >>> editor.params["loop"].value, editor.params["factors"].value = "i", "None, 16"
        >>> editor.apply_button.click()
        >>> ctx.session.loops()
        ['i_0', 'i_1', 'j', 'k']
    """

    expected_errors = (PrimitiveError,)  # an illegal step: the user's, shown in the banner

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.session: ScheduleSession | None = None
        self._unsubscribe_session: Callable[[], None] | None = None
        self._shown: Snapshot | None = None  # what the script view shows (its marks: the change)
        self._make_widgets()
        self.widget = self._layout()
        self.primitive.observe(lambda _c: self._guard(self._build_form), names="value")
        self.apply_button.on_click(lambda _b: self._guard(self.apply))
        self.undo_button.on_click(lambda _b: self._guard(self.undo))
        self.redo_button.on_click(lambda _b: self._guard(self.redo))
        self.reset_button.on_click(lambda _b: self._guard(self.reset))
        self.checkout_button.on_click(lambda _b: self._guard(self.checkout))
        self._unsubscribe_ctx = ctx.on("session", self.set_session)
        self._build_form()
        if ctx.session is not None:
            self.set_session(ctx.session)
        else:
            self._render(None)

    def _make_widgets(self) -> None:
        self.title = w.HTML(layout=w.Layout(margin="0 0 6px 0"))
        self.title.add_class("se-editor-title")
        # The table scrolls sideways inside its column (fused loop names get long).
        self.loop_table = w.HTML(layout=w.Layout(overflow="auto hidden", **_FILL))
        self.loop_table.add_class("se-loops")
        self.primitive = w.Dropdown(
            options=[(p.signature(), p.name) for p in PRIMITIVES.values()],
            value="split",
            description="Primitive",
            layout=w.Layout(**_FILL),
        )
        self.primitive.add_class("se-primitive")
        self.help = w.HTML(layout=w.Layout(**_FILL))
        self.help.add_class("se-primitive-help")
        self.params: dict[str, w.ValueWidget] = {}
        # "loops" params: (their text field, a button per loop that appends its name)
        self._loop_adders: dict[str, tuple[w.Text, w.HBox]] = {}
        self.form = w.VBox(layout=w.Layout(**_FILL))
        self.form.add_class("se-params")

        self.apply_button = _button("Apply", "se-apply", "primary", "check")
        self.undo_button = _button("Undo", "se-undo", "", "undo")
        self.redo_button = _button("Redo", "se-redo", "", "redo")
        self.reset_button = _button("Reset", "se-reset", "", "fast-backward")
        self.banner = w.HTML(layout=w.Layout(display="none", **_FILL))
        self.banner.add_class("se-error")

        self.history = Select(options=[], rows=8, layout=w.Layout(**_FILL))
        self.history.add_class("se-history")
        self.checkout_button = _button("Go to step", "se-checkout", "", "code-branch")
        self.branches = w.HTML(layout=w.Layout(flex="1 1 8em", min_width="0"))

        self.script = w.HTML(layout=w.Layout(**_FILL))
        self.script.add_class("se-script")
        self.trace = w.Textarea(layout=w.Layout(width="100%", height="14em"))
        self.trace.add_class("se-trace")

    def _layout(self) -> w.VBox:
        # Two columns: the controls (~380 px suffice) and the views, which get the rest; they
        # stack when the views would get less than 600 px (a TVMScript line is ~800 px wide).
        # Each field fills its column, so nothing overflows into the other.
        controls = w.VBox(
            [
                self.primitive,
                self.help,
                self.form,
                _buttons(self.apply_button, self.undo_button, self.redo_button, self.reset_button),
                self.banner,
                _section("<b>History</b> (every step of every branch)"),
                self.history,
                _buttons(self.checkout_button, self.branches),
            ],
            layout=w.Layout(flex="1 1 360px", min_width="min(340px, 100%)", margin="0 12px 0 0"),
        )
        views = w.VBox(
            [self.loop_table, _section("<b>TVMScript</b>"), self.script],
            layout=w.Layout(flex="2 1 600px", min_width="min(600px, 100%)"),
        )
        box = w.VBox(
            [
                self.title,
                w.HBox([controls, views], layout=w.Layout(flex_flow="row wrap", width="100%")),
                _section("<b>Trace (Python)</b>"),
                self.trace,
            ]
        )
        box.add_class("se-editor")
        themed(box)
        return box

    # -- session ------------------------------------------------------------------------------
    def set_session(self, session: ScheduleSession) -> None:
        """Follow ``session`` from now on (the editor's views show its snapshots)."""
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
        self.session = session
        self._unsubscribe_session = session.on_change(self._on_change)
        self._render(session.snapshot)

    def _on_change(self, snapshot: Snapshot) -> None:
        # Runs inside session.apply/undo/...: an exception here would reach their caller.
        self._guard(lambda: self._render(snapshot))

    # -- actions ------------------------------------------------------------------------------
    def apply(self) -> Snapshot | None:
        """Apply the selected primitive with the form's arguments; refusals go to the banner."""
        session = self._require_session()
        if session is None:
            return None
        name = str(self.primitive.value)
        if self._refused_pick():
            return None
        try:
            args = self.arguments()
            snapshot = session.apply(name, **args)
        except PrimitiveError as exc:
            self.show_error(exc)
            return None
        self.clear_error()
        return snapshot

    def undo(self) -> None:
        if (session := self._require_session()) is not None:
            session.undo()

    def redo(self) -> None:
        if (session := self._require_session()) is not None:
            session.redo()

    def reset(self) -> None:
        if (session := self._require_session()) is not None:
            session.reset()

    def checkout(self, step_id: int | None = None) -> None:
        """Make step ``step_id`` (default: the one selected in ``history``) current."""
        session = self._require_session()
        if session is None:
            return
        if step_id is None and (label := refused_choice(self.history)) is not None:
            self.show_message(
                f"Not done: the step you selected ({label.strip()}) is not in the history as "
                "it is now (it changed while you chose); select a step again."
            )
            return
        target = self.history.value if step_id is None else step_id
        if target is None:
            self.show_message("Select a step in the history first.")
            return
        session.checkout(int(target))

    def arguments(self) -> dict[str, Any]:
        """The form's values as ``apply`` keyword arguments (``explorer.session.parse_arguments``).

        Raises:
            PrimitiveError: a text field does not parse; names the parameter.
        """
        picks = {p.name for p in PRIMITIVES[str(self.primitive.value)].params if p.kind in PICKED}
        # "(pick a loop)": none picked, which a required loop refuses ("pick a loop")
        values = {
            name: None if name in picks and field.value == _PICK else field.value
            for name, field in self.params.items()
        }
        return parse_arguments(str(self.primitive.value), values)

    # -- banner -------------------------------------------------------------------------------
    def show_error(self, exc: BaseException) -> None:
        """Explain why a step was refused, in plain words (TVM's own text folded away)."""
        if isinstance(exc, PrimitiveError):
            head = f"Cannot apply {html.escape(exc.primitive)}"
            text = html.escape(str(exc))
            detail = exc.detail
        else:
            head, text, detail = "Something went wrong", html.escape(f"{exc}"), None
        extra = ""
        if detail:
            extra = (
                "<details><summary>TVM's message</summary>"
                f'<pre style="white-space:pre-wrap">{html.escape(detail)}</pre></details>'
            )
        self._set_banner(f"<b>{head}:</b> {text}{extra}")

    def show_message(self, text: str) -> None:
        self._set_banner(html.escape(text))

    def clear_error(self) -> None:
        self.banner.layout.display = "none"
        self.banner.value = ""

    def _set_banner(self, inner: str) -> None:
        self.banner.value = (
            '<div style="color:#800;background:#fee;border:1px solid #e99;padding:4px 8px">'
            f"{inner}</div>"
        )
        self.banner.layout.display = None

    def close(self) -> None:
        self._unsubscribe_ctx()
        if self._unsubscribe_session is not None:
            self._unsubscribe_session()
            self._unsubscribe_session = None

    # -- internals ----------------------------------------------------------------------------
    def _show_error(self, exc: Exception) -> None:
        self.show_error(exc)  # in the banner

    def _require_session(self) -> ScheduleSession | None:
        if self.session is None:
            self.show_message("Build a workload first (the Operator picker above).")
        return self.session

    def _refused_pick(self) -> bool:
        """Say so, and refuse the step, when a picker could not honour the page's last choice.

        The page chose from the names it showed before the last step changed them, and that
        name is gone (``widgets._pickers``): the picker shows another, which the user did not
        pick. Refused once; Apply again takes the picker as it now reads.
        """
        for name, field in self.params.items():
            if (label := refused_choice(field)) is not None:
                then = "pick one" if field.value == _PICK else "pick again, or Apply to use it"
                self.show_message(
                    f"Not applied: the {name} you picked, {label}, is not in this schedule any "
                    f"more (a step changed the names since you picked it); the picker reads "
                    f"{field.label} now: {then}."
                )
                return True
        return False

    def _build_form(self) -> None:
        prim = PRIMITIVES[str(self.primitive.value)]
        self.help.value = primitive_help(prim.doc)
        self.params = {}
        self._loop_adders = {}
        rows: list[w.Widget] = []
        # One label width per form, wide enough for its longest name: labels are never
        # clipped and the fields line up (with the Primitive picker's too).
        label_width = (
            f"{max([len(self.primitive.description), *(len(p.name) for p in prim.params)]) + 1}ch"
        )
        self.primitive.style.description_width = label_width
        for spec in prim.params:
            field = _param_widget(spec)
            field.add_class(f"se-param-{spec.name}")
            if spec.kind != "bool":
                field.style.description_width = label_width
            self.params[spec.name] = field
            if spec.kind != "bool":
                field.layout.close()  # the one the field was made with: never shown
                field.layout = w.Layout(**_FILL)
            if spec.kind == "loops":
                # Under the text field, aligned with it: beside it, both were squeezed. A
                # button per loop, not a list to pick from: ipywidgets sends a list's picks
                # made while the kernel answers an earlier one as one (the last), and a new
                # user's five quick picks became two.
                adder = w.HBox(
                    layout=w.Layout(
                        flex_flow="row wrap", margin=f"2px 0 2px calc({label_width} + 6px)"
                    )
                )
                adder.add_class(f"se-param-{spec.name}-add")
                self._loop_adders[spec.name] = (field, adder)
                rows.append(w.VBox([field, adder], layout=w.Layout(**_FILL)))
            else:
                rows.append(field)
        old, self.form.children = self.form.children, tuple(rows)
        close_widgets(old)
        self._fill_pickers(self.session.snapshot if self.session is not None else None)

    def _add_buttons(
        self, field: w.Text, names: list[str], labels: Mapping[str, str]
    ) -> list[w.Button]:
        """One button per loop name: a click appends it to ``field``'s list."""

        def button(name: str) -> w.Button:
            b = w.Button(
                description=name, icon="plus", tooltip=f"add {labels.get(name, name)}",
                layout=w.Layout(width="auto"),
            )  # fmt: skip
            b.add_class("se-add-loop")
            b.on_click(lambda _b: self._guard(lambda: _append(field, name)))
            return b

        return [button(name) for name in names]

    def _fill_pickers(self, snapshot: Snapshot | None, *, step: bool = False) -> None:
        """Refresh loop/block choices; a still-valid selection is kept (names are stable).

        ``step``: the names changed by a step of the same schedule (or an undo, a redo). A
        choice it took away (the loop just split) is not replaced by another name, which the
        user did not pick (an Apply clicked again before the page showed the new names split
        the first loop): the picker reads "(pick a loop)" until the user picks one.
        """
        loops = snapshot.loop_names if snapshot is not None else []
        blocks = snapshot.block_names if snapshot is not None else []
        prim = PRIMITIVES[str(self.primitive.value)]
        for spec in prim.params:
            if spec.kind not in PICKED:
                continue
            names = loops if spec.kind == "loop" else blocks
            options: list[tuple[str, Any]] = [(n, n) for n in names]
            if not spec.required or not names:
                options.insert(0, (_NONE_LABEL, None))
            field = self.params[spec.name]
            keep = field.value if field.value in names else options[0][1]
            if step and field.value not in (None, _PICK) and keep != field.value:
                options.insert(0, (f"(pick a {spec.kind})", _PICK))
                keep = _PICK
            _set_choices(field, options, keep)
        labels = {lp.name: lp.label for lp in snapshot.loops} if snapshot is not None else {}
        for field, adder in self._loop_adders.values():
            if [b.description for b in adder.children] != loops:
                old, adder.children = (
                    adder.children,
                    tuple(self._add_buttons(field, loops, labels)),
                )
                close_widgets(old)

    def _render(self, snapshot: Snapshot | None) -> None:
        previous = self._shown
        self.clear_error()
        if snapshot is None:
            self._shown = None
            self.title.value = "<i>No workload yet: build one above.</i>"
            self.loop_table.value = ""
            self.script.value = ""
            self.trace.value = ""
            _set_choices(self.history, [], None)
            for b in (self.apply_button, self.undo_button, self.redo_button, self.reset_button):
                b.disabled = True
            self._fill_pickers(None)
            return
        assert self.session is not None
        self.title.value = (
            f"<b>Scheduling</b> <code>{html.escape(snapshot.workload.key())}</code> "
            f"on {html.escape(str(snapshot.target))}, step {snapshot.step_id}"
        )
        self.loop_table.value = loop_table_html(snapshot)
        self.script.value = script_html(snapshot, self._shown)
        self._shown = snapshot
        self.trace.value = snapshot.trace_python
        self.apply_button.disabled = False
        self.reset_button.disabled = not snapshot.can_undo
        self.undo_button.disabled = not snapshot.can_undo
        self.redo_button.disabled = not snapshot.can_redo
        self._render_history(self.session, snapshot)
        step = previous is not None and previous.workload.key() == snapshot.workload.key()
        self._fill_pickers(snapshot, step=step)

    def _render_history(self, session: ScheduleSession, snapshot: Snapshot) -> None:
        on_path = {s.id for s in snapshot.path} | {0}
        rows: list[tuple[str, int]] = [(_history_label(0, "(unscheduled)", 0, snapshot), 0)]
        seen = {0}
        branches = session.branches()
        for branch in branches:
            for depth, step in enumerate(branch.steps, start=1):
                if step.id in seen:
                    continue
                seen.add(step.id)
                rows.append((_history_label(step.id, step.label, depth, snapshot), step.id))
        _set_choices(self.history, rows, snapshot.step_id)
        count = len(branches)
        self.branches.value = (
            f"{count} branch{'es' if count != 1 else ''}; "
            f"{len(on_path) - 1} step(s) on the current one"
        )


def _set_choices(field: Any, options: list[tuple[str, Any]], value: Any) -> None:
    # Not under hold_trait_notifications: a selection widget validates the new value against
    # its options list, which is only recomputed by a (held) observer.
    if tuple(field.options) != tuple(options):
        field.options = options
    if field.value != value:
        field.value = value


def _append(field: w.Text, name: str) -> None:
    current = [n for n in re.split(r"[,\s]+", field.value.strip()) if n]
    field.value = ", ".join([*current, name])


def _button(description: str, css: str, style: str, icon: str) -> w.Button:
    # As wide as its text: the default fixed width cut "Apply" to "A..." in a narrow column.
    button = w.Button(
        description=description, button_style=style, icon=icon, layout=w.Layout(width="auto")
    )
    button.add_class(css)
    return button


def _buttons(*children: w.Widget) -> w.HBox:
    """A row of buttons that wraps instead of squeezing them."""
    row = w.HBox(list(children), layout=w.Layout(flex_flow="row wrap", align_items="center"))
    row.add_class("se-buttons")
    return row


def _section(markup: str) -> w.HTML:
    """A heading between sections, with space above it."""
    heading = w.HTML(markup)
    heading.add_class("se-section")
    return heading


def _history_label(step_id: int, label: str, depth: int, snapshot: Snapshot) -> str:
    # Browsers collapse plain spaces in <option>s: indent with no-break spaces.
    marker = "\u25b6" if step_id == snapshot.step_id else "\u00a0\u00a0"
    indent = "\u00a0" * (3 * depth + 1)
    return f"{marker}{indent}#{step_id} {label}"


def _param_widget(spec: ParamSpec) -> w.ValueWidget:
    """The form field for one declared parameter (loop/block pickers are filled later)."""
    tip = spec.help or spec.kind
    default = None if spec.default is REQUIRED else spec.default
    common: dict[str, Any] = {"description": spec.name, "tooltip": tip}
    if spec.kind in ("loop", "block"):
        return Dropdown(options=[(_NONE_LABEL, None)], value=None, **common)
    if spec.kind == "factors":
        return w.Text(
            value="", placeholder="e.g. None, 16  (one None or -1 is inferred)", **common
        )
    if spec.kind == "loops":
        return w.Text(value="", placeholder="loop names, outer first: i_0, j", **common)
    if spec.kind == "int":  # the session refuses a number out of range, naming the range
        start = default if default is not None else (spec.min if spec.min is not None else 0)
        return WholeText(value=start, **common)
    if spec.kind == "choice":
        value = default if default is not None else spec.choices[0]
        return w.Dropdown(options=[(str(c), c) for c in spec.choices], value=value, **common)
    if spec.kind == "bool":
        return w.Checkbox(value=bool(default), indent=False, **common)
    return w.Text(value="" if default is None else str(default), **common)


__all__ = [
    "ScheduleEditor",
    "changed_lines",
    "loop_table_html",
    "primitive_help",
    "script_html",
]
