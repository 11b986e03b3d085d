"""``ExpressionBuilder``: pick an operator family (or a preset, or write a custom expression),
fill in its shape, and build a ``ScheduleSession`` for it.

The shape form is generated from the family's declared ``ShapeParam``\\ s, so a new family in
``explorer.workloads`` shows up here with no UI code. Errors that point at a character of the
custom expression (``WorkloadError.position``) are drawn with a caret under that character.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping
from typing import Any

import ipywidgets as w

from explorer.errors import ExplorerError, WorkloadError
from explorer.session import ScheduleSession
from explorer.workloads import (
    FAMILIES,
    TASK,
    Workload,
    format_shapes,
    get_family,
    get_workload,
    parse_shapes,
    presets,
)
from widgets._context import Context
from widgets._panel import Panel, close_widgets
from widgets._style import themed
from widgets._whole import WholeText

log = logging.getLogger(__name__)

EXPR = "expr"
_PRESET = "preset:"  # dropdown values of presets, so a preset never shadows a family name


class ExpressionBuilder(Panel):
    """The workload picker: family or preset, generated shape form, custom expression, Build.

    Args:
        ctx: the shared explorer state; ``build()`` makes the new session current there.

    Attributes:
        widget: the container to display.
        family: the family/preset ``Dropdown``.
        fields: the shape form's widgets by parameter name (for the selected family).
        text, shapes, dtype: the custom expression's ``Textarea``, its shapes ``Text`` and dtype
            ``Dropdown`` (shown for the ``expr`` family only).
        build_button, error, status: the Build button, the inline error and the last outcome.

    Example:
        >>> ctx = Context(store=":memory:")
        >>> builder = ExpressionBuilder(ctx)
        >>> builder.family.value = "expr"
        >>> builder.text.value = "C[i, j] += A[i, k] * B[k, j]"
        >>> builder.shapes.value = "A: 4x3, B: 3x2"
        >>> builder.build_button.click()
        >>> ctx.session.workload.flops()
        48
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # Short labels (a select cuts long ones); the formula and shape are shown below it.
        options: list[tuple[str, str]] = []
        for fam in FAMILIES.values():
            if fam.name == TASK:  # a model's task opens from the Model tab, not from a form
                continue
            label = "custom expression (einsum-like)" if fam.name == EXPR else fam.name
            options.append((label, fam.name))
        for name, (fam_name, _params) in presets().items():
            options.append((f"preset {name} ({fam_name})", _PRESET + name))
        self.family = w.Dropdown(
            options=options,
            value="matmul",
            description="Operator",
            layout=w.Layout(width="24em", max_width="100%"),
        )
        self.family.add_class("se-expr-family")
        self.description = w.HTML(layout=w.Layout(margin="2px 0 4px 0"))
        self.fields: dict[str, w.ValueWidget] = {}
        self.form = w.VBox()
        self.form.add_class("se-expr-form")

        expr_params = {p.name: p for p in get_family(EXPR).params}
        self.text = w.Textarea(
            value=str(expr_params["text"].default),
            description="Expression",
            placeholder="C[i, j] += A[i, k] * B[k, j]",
            layout=w.Layout(width="100%", height="4em"),
        )
        self.text.add_class("se-expr-text")
        self.shapes = w.Text(
            value=format_shapes(expr_params["shapes"].default),
            description="Shapes",
            placeholder="A: 64x32, B: 32x16",
            layout=w.Layout(width="100%"),
        )
        self.shapes.add_class("se-expr-shapes")
        self.dtype = w.Dropdown(
            options=list(expr_params["dtype"].choices),
            value=expr_params["dtype"].default,
            description="dtype",
        )
        self.dtype.add_class("se-expr-dtype")
        self.custom = w.VBox([self.text, self.shapes, self.dtype])
        self.custom.add_class("se-expr-custom")

        self.build_button = w.Button(
            description="Build",
            button_style="primary",
            icon="hammer",
            layout=w.Layout(width="auto", flex="0 0 auto", margin="0 0 0 8px"),
        )
        self.build_button.add_class("se-expr-build")
        self.error = w.HTML(layout=w.Layout(display="none"))
        self.error.add_class("se-expr-error")
        self.status = w.HTML()
        self.status.add_class("se-expr-status")
        self.widget = w.VBox(
            [
                w.HBox([self.family, self.build_button], layout=w.Layout(flex_flow="row wrap")),
                self.description,
                self.form,
                self.custom,
                self.error,
                self.status,
            ]
        )
        self.widget.add_class("se-expr")
        themed(self.widget)

        self.family.observe(self._on_family, names="value")
        self.build_button.on_click(lambda _b: self.build())
        self._own_session: ScheduleSession | None = None  # ours, so our own event is no news
        self._unsubscribe = ctx.on("session", self._on_session)
        self._show_family(self.family.value)

    # -- public -------------------------------------------------------------------------------
    @property
    def family_name(self) -> str:
        """The operator family of the current selection (a preset's family for a preset)."""
        value = str(self.family.value)
        if value.startswith(_PRESET):
            return presets()[value[len(_PRESET) :]][0]
        return value

    def workload(self) -> Workload:
        """The workload the form describes.

        Raises:
            WorkloadError: a bad parameter or expression (with ``position`` when it points at a
                character of the expression or of the shapes text).
            UnknownPluginError: an unknown family (not reachable from the dropdown).
        """
        if self.family.value is None:  # a model's task is shown: nothing picked to build
            raise WorkloadError("pick an operator first (the schedule shown is a model's task)")
        family = self.family_name
        if family == EXPR:
            shapes = parse_shapes(self.shapes.value)
            return get_workload(EXPR, text=self.text.value, shapes=shapes, dtype=self.dtype.value)
        values = {name: field.value for name, field in self.fields.items()}
        return get_workload(family, **values)

    def build(self) -> ScheduleSession | None:
        """Build the workload and make a fresh session for it current; errors go inline."""
        try:
            workload = self.workload()
            session = ScheduleSession(workload, self.ctx.target)
        except (ExplorerError, KeyError) as exc:  # UnknownPluginError is a KeyError
            self.show_error(exc)
            return None
        except Exception as exc:  # a bug must show, not vanish in the kernel log
            log.exception("building a workload failed")
            self.show_error(exc)
            return None
        self.clear_error()
        self.status.value = (
            f"Built <code>{html.escape(workload.key())}</code>: "
            f"{workload.flops():,} floating-point operations."
        )
        self._own_session = session
        self.ctx.set_session(session)
        return session

    def show_workload(self, workload: Workload) -> None:
        """Fill the form with ``workload``'s family and parameters (e.g. of an opened record)."""
        params = workload.param_dict
        if workload.family == TASK:  # its program is its model's: nothing to edit in the form
            self.family.value = None  # no operator of the list is on screen (it said "matmul")
            self.form.layout.display = self.custom.layout.display = "none"
            self.description.value = (
                f"<i>task {html.escape(str(params['name']))} of an imported model: its shapes "
                "are the model's (Model tab)</i>"
            )
            return
        if workload.family == EXPR:
            self.family.value = EXPR
            self.text.value = str(params["text"])
            self.shapes.value = format_shapes(params["shapes"])
            self.dtype.value = params["dtype"]
            return
        if self.family_name != workload.family:
            self.family.value = workload.family
        for name, value in params.items():
            field = self.fields.get(name)
            if field is not None:
                field.value = value

    def show_error(self, exc: BaseException) -> None:
        """Show ``exc`` inline; a positioned ``WorkloadError`` gets a caret under its character."""
        self.error.value = render_error(exc)
        self.error.layout.display = None
        self.status.value = ""

    def clear_error(self) -> None:
        self.error.layout.display = "none"
        self.error.value = ""

    def close(self) -> None:
        self._unsubscribe()

    # -- internals ----------------------------------------------------------------------------
    def _on_family(self, change: Mapping[str, Any]) -> None:
        if change["new"] is None:  # a model's task (``show_workload``) hides the form itself
            return
        self._show_family(str(change["new"]))
        self.clear_error()

    def _on_session(self, session: ScheduleSession) -> None:
        # A session made elsewhere (a record opened from the dashboards) shows its workload here.
        if session is not self._own_session:
            self.show_workload(session.workload)
            self.status.value = f"Current: <code>{html.escape(session.workload.key())}</code>"

    def _show_family(self, value: str) -> None:
        fixed: Mapping[str, Any] = {}
        if value.startswith(_PRESET):
            family_name, fixed = presets()[value[len(_PRESET) :]]
        else:
            family_name = value
        family = get_family(family_name)
        shape = ", ".join(f"{k}={v}" for k, v in fixed.items())
        self.description.value = f"<i>{html.escape(family.description)}</i>" + (
            f" <span style='color:#666'>({html.escape(family_name)}: {html.escape(shape)})</span>"
            if shape
            else ""
        )
        self.family.tooltip = family.description
        is_expr = family_name == EXPR
        self.custom.layout.display = None if is_expr else "none"
        self.form.layout.display = "none" if is_expr else None
        old = self.form.children
        if is_expr:
            self.fields = {}
            self.form.children = ()
        else:
            self.fields = {p.name: _field(p, fixed.get(p.name, p.default)) for p in family.params}
            self.form.children = tuple(self.fields.values())
        close_widgets(old)


def _field(param: Any, value: Any) -> w.ValueWidget:
    """One form field for a ``ShapeParam``: its kind picks the widget, its range the bounds."""
    tip = param.help or param.name
    common: dict[str, Any] = {"description": param.name}
    if param.kind == "choice":
        field: w.ValueWidget = w.Dropdown(
            options=[(str(c), c) for c in param.choices], value=value, **common
        )
    elif param.kind == "int":  # its text goes to the core, which names the declared range
        field = WholeText(value=value, **common)
    elif param.kind == "float":
        field = w.FloatText(value=value, **common)
    else:  # "str" and anything a future family declares: free text, checked by the core
        field = w.Text(value=str(value), **common)
    field.tooltip = tip
    field.add_class(f"se-expr-param-{param.name}")
    return field


# -- errors -------------------------------------------------------------------------------------
def render_error(exc: BaseException) -> str:
    """HTML for an error; a positioned ``WorkloadError`` repeats its text with a caret."""
    message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    position = getattr(exc, "position", None)
    text = getattr(exc, "text", None)
    body = ""
    if position is not None and text is not None:
        # WorkloadError appends its own plain-text caret to the message: drop it, draw ours.
        message = message.split("\n", 1)[0]
        body = caret_html(text, position)
    return (
        '<div style="color:#a00;border-left:3px solid #c00;padding:2px 8px">'
        f"<b>Cannot build:</b> {html.escape(message)}{body}</div>"
    )


def caret_html(text: str, position: int) -> str:
    """``text`` in a ``<pre>`` with the character at ``position`` marked and a ``^`` under it."""
    position = max(0, min(position, len(text)))
    line_start = text.rfind("\n", 0, position) + 1
    line_end = text.find("\n", position)
    line_end = len(text) if line_end == -1 else line_end
    column = position - line_start
    line = text[line_start:line_end]
    bad = line[column : column + 1] or " "
    marked = (
        html.escape(line[:column])
        + f'<span class="se-expr-bad" style="background:#fcc">{html.escape(bad)}</span>'
        + html.escape(line[column + 1 :])
    )
    before = html.escape(text[:line_start])
    after = html.escape(text[line_end:])
    caret = " " * column + "^"
    return (
        '<pre class="se-expr-caret" style="margin:4px 0">'
        f'{before}{marked}\n<span style="color:#c00">{caret}</span>{after}</pre>'
    )
