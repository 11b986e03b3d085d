"""ExpressionBuilder, headless: pick a family or preset, fill the form or an expression, Build."""

from __future__ import annotations

import html
import re

import pytest
from test_explorer import live_models

from explorer.errors import WorkloadError
from explorer.session import ScheduleSession
from explorer.workloads import FAMILIES, get_workload
from widgets._context import Context
from widgets.expression import ExpressionBuilder, caret_html


def caret_column(error_html: str) -> int:
    """The column of the ``^`` drawn under the expression in the inline error."""
    pre = re.search(r"<pre[^>]*>(.*?)</pre>", error_html, re.S)
    assert pre, error_html
    text = html.unescape(re.sub(r"<[^>]+>", "", pre.group(1)))
    caret_line = next(line for line in text.splitlines() if line.strip() == "^")
    return caret_line.index("^")


def bad_char(error_html: str) -> str:
    m = re.search(r'class="se-expr-bad"[^>]*>(.*?)</span>', error_html)
    assert m, error_html
    return html.unescape(m.group(1))


def test_dom_classes_and_generated_form(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    assert "se-expr" in b.widget._dom_classes
    assert "se-expr-family" in b.family._dom_classes
    assert "se-expr-text" in b.text._dom_classes
    assert "se-expr-build" in b.build_button._dom_classes
    assert "se-expr-error" in b.error._dom_classes
    assert b.build_button.description == "Build"
    assert b.error.layout.display == "none"
    # The form is generated from the family's declared parameters.
    assert list(b.fields) == [p.name for p in FAMILIES["matmul"].params]
    assert b.fields["dtype"].options == tuple((d, d) for d in ("float32", "float64", "float16"))
    b.family.value = "conv2d"
    assert list(b.fields) == [p.name for p in FAMILIES["conv2d"].params]
    assert b.custom.layout.display == "none"


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("2.5", "must be an integer (got '2.5')"),  # never read as its digits (IntText: 25)
        ("-1", "must be at least 0 (got -1)"),  # never moved to the bound (BoundedIntText)
        ("", "must be an integer (got '')"),
    ],
)
def test_a_whole_number_field_refuses_what_is_not_one(ctx: Context, typed: str, said: str) -> None:
    b = ExpressionBuilder(ctx)
    b.family.value = "conv2d"
    b.fields["padding"].value = typed
    assert b.fields["padding"].value == typed  # the box keeps what was typed
    b.build_button.click()
    assert ctx.session is None
    assert "padding" in b.error.value and html.escape(said) in b.error.value


def test_every_family_and_preset_is_offered(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    values = [v for _label, v in b.family.options]
    # a model's task is opened from the Model tab: its program is its model's, not a form's
    assert set(FAMILIES) - {"task"} <= set(values) and "task" not in values
    assert "preset:resnet18_c2" in values


def test_a_form_rebuilt_for_another_operator_closes_the_old_one(ctx: Context) -> None:
    """Picking another operator replaced the form's fields without closing them (the widget
    models of every operator picked stayed alive in the kernel and the page)."""
    b = ExpressionBuilder(ctx)
    values = [v for _label, v in b.family.options]
    for value in values:
        b.family.value = value
    b.family.value = values[0]
    after_one_round = live_models()
    for _ in range(3):
        for value in [*values[1:], values[0]]:
            b.family.value = value
    assert len(live_models()) == len(after_one_round)
    assert all(field.comm is not None for field in b.fields.values())


def test_build_makes_the_session_current(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    seen: list[ScheduleSession] = []
    ctx.on("session", seen.append)
    for name, value in {"M": 32, "N": 48, "K": 16}.items():
        b.fields[name].value = value
    b.build_button.click()
    assert ctx.session is not None and seen == [ctx.session]
    assert ctx.session.workload == get_workload("matmul", M=32, N=48, K=16)
    assert ctx.session.target == ctx.target
    assert "matmul(K=16,M=32,N=48,dtype=float32)" in b.status.value
    assert b.error.layout.display == "none"


def test_preset_fills_the_form(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    b.family.value = "preset:resnet18_c2"
    assert b.family_name == "conv2d"
    assert (b.fields["CI"].value, b.fields["H"].value, b.fields["KH"].value) == ("64", "56", "3")
    assert b.workload() == get_workload("resnet18_c2")


def test_custom_expression_builds(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    b.family.value = "expr"
    assert b.custom.layout.display is None and b.form.layout.display == "none"
    b.text.value = "C[i, j] += A[i, k] * B[k, j]"
    b.shapes.value = "A: 4x3, B: 3x2"
    b.build_button.click()
    assert ctx.session is not None
    assert ctx.session.workload.family == "expr"
    assert ctx.session.workload.flops() == 48
    assert ctx.session.workload.output_spec() == ((4, 2), "float32")


@pytest.mark.parametrize(
    ("text", "shapes", "char"),
    [
        ("C[i, j] += A[i, k] * Q[k, j]", "A: 4x3, B: 3x2", "Q"),  # unknown tensor
        ("C[i, j] += A[i, k] * B[k, j", "A: 4x3, B: 3x2", " "),  # unclosed bracket at the end
        ("C[i, j] += A[i, k] $ B[k, j]", "A: 4x3, B: 3x2", "$"),  # unknown character
        ("C[i] = A[i] / 0", "A: 4", "/"),  # refused before TVM (was TVM's raw "Divide by zero")
        ("M[i] = max(A[i, k])", "A: 4x5", "m"),  # says reductions are written `M[i] max= ...`
    ],
)
def test_expression_error_has_a_caret_under_the_offending_char(
    ctx: Context, text: str, shapes: str, char: str
) -> None:
    b = ExpressionBuilder(ctx)
    b.family.value = "expr"
    b.text.value, b.shapes.value = text, shapes
    with pytest.raises(WorkloadError) as info:
        b.workload()
    position = info.value.position
    assert position is not None
    b.build_button.click()
    assert ctx.session is None  # nothing was built
    assert b.error.layout.display != "none"
    assert "Cannot build" in b.error.value
    assert caret_column(b.error.value) == position
    assert bad_char(b.error.value) == char
    # The message is the core's first line (its plain-text caret is replaced by ours).
    first_line = str(info.value).split("\n", 1)[0]
    assert html.escape(first_line) in b.error.value


def test_shapes_error_points_into_the_shapes_text(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    b.family.value = "expr"
    b.shapes.value = "A: 4x3, B: 3x2 ?"
    b.build_button.click()
    assert ctx.session is None
    assert "shapes" in b.error.value
    assert caret_column(b.error.value) == b.shapes.value.index("?")


def test_error_without_position_has_no_caret_and_clears_after_success(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    b.family.value = "conv2d"
    b.fields["H"].value, b.fields["KH"].value, b.fields["padding"].value = 3, 9, 0
    b.build_button.click()
    assert ctx.session is None
    assert b.error.layout.display != "none"
    assert "conv2d" in b.error.value and "<pre" not in b.error.value
    b.fields["KH"].value = 3
    b.build_button.click()
    assert ctx.session is not None
    assert b.error.layout.display == "none" and b.error.value == ""


def test_changing_family_clears_a_stale_error(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    b.family.value = "expr"
    b.text.value = "C[i] = "
    b.build_button.click()
    assert b.error.layout.display != "none"
    b.family.value = "matmul"
    assert b.error.layout.display == "none"


def test_a_session_opened_elsewhere_shows_its_workload(ctx: Context) -> None:
    b = ExpressionBuilder(ctx)
    other = get_workload("softmax", M=8, N=16)
    ctx.set_session(ScheduleSession(other, ctx.target))
    assert b.family_name == "softmax"
    assert (b.fields["M"].value, b.fields["N"].value) == ("8", "16")
    assert b.workload() == other
    custom = get_workload("expr", text="Y[i] max= X[i, j]", shapes={"X": (4, 5)})
    ctx.set_session(ScheduleSession(custom, ctx.target))
    assert b.family.value == "expr"
    assert b.workload() == custom


def test_caret_on_a_multiline_expression() -> None:
    text = "C[i, j] +=\n  A[i, k] * Q[k, j]"
    out = html.unescape(re.sub(r"<[^>]+>", "", caret_html(text, text.index("Q"))))
    lines = out.splitlines()
    assert lines[1] == "  A[i, k] * Q[k, j]"
    assert lines[2].index("^") == lines[1].index("Q")
