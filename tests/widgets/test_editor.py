"""ScheduleEditor, headless: forms from ParamSpecs, Apply/Undo/Redo, branches, views, banner."""

from __future__ import annotations

import html
import re

import pytest
from test_explorer import live_models

from explorer.errors import PrimitiveError
from explorer.session import PRIMITIVES, ScheduleSession, parse_factors, parse_loops
from explorer.workloads import Workload, get_workload
from widgets._context import Context
from widgets.editor import ScheduleEditor, changed_lines

SPLIT_FACTORS = PRIMITIVES["split"].param("factors")
REORDER_LOOPS = PRIMITIVES["reorder"].param("loops")


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def changed_text(script_html: str) -> list[str]:
    """The lines marked ``se-changed`` in the script view."""
    marked = re.findall(r'<span class="se-changed"[^>]*>(.*?)</span>', script_html)
    return [html.unescape(m) for m in marked]


def apply(editor: ScheduleEditor, primitive: str, **values: object) -> None:
    editor.primitive.value = primitive
    for name, value in values.items():
        editor.params[name].value = value
    editor.apply_button.click()


def test_dom_classes(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    expected = {
        e.widget: "se-editor",
        e.loop_table: "se-loops",
        e.primitive: "se-primitive",
        e.apply_button: "se-apply",
        e.undo_button: "se-undo",
        e.redo_button: "se-redo",
        e.script: "se-script",
        e.trace: "se-trace",
        e.banner: "se-error",
    }
    for widget, css in expected.items():
        assert css in widget._dom_classes, css
    assert [b.description for b in (e.apply_button, e.undo_button, e.redo_button)] == [
        "Apply",
        "Undo",
        "Redo",
    ]
    assert e.banner.layout.display == "none"


def test_a_form_rebuilt_for_another_primitive_closes_the_old_one(
    ctx: Context, session: ScheduleSession
) -> None:
    """Each primitive's form replaced the last one's fields, loop buttons and boxes without
    closing them: a user picking primitives in turn grew the kernel's (and the page's) widget
    models by tens a pick, and a reloaded page fetches every live model."""
    e = ScheduleEditor(ctx)
    names = list(PRIMITIVES)
    for name in names:  # every form once, and back to the first
        e.primitive.value = name
    e.primitive.value = names[0]
    after_one_round = live_models()
    for _ in range(3):
        for name in [*names[1:], names[0]]:
            e.primitive.value = name
    assert len(live_models()) == len(after_one_round)
    assert list(e.params) == [p.name for p in PRIMITIVES[names[0]].params]
    assert all(field.comm is not None for field in e.params.values())  # the shown form lives


@pytest.mark.parametrize("name", list(PRIMITIVES))
def test_every_primitive_gets_a_form_from_its_params(
    ctx: Context, session: ScheduleSession, name: str
) -> None:
    e = ScheduleEditor(ctx)
    e.primitive.value = name
    prim = PRIMITIVES[name]
    assert list(e.params) == [p.name for p in prim.params]
    for spec in prim.params:
        field = e.params[spec.name]
        assert f"se-param-{spec.name}" in field._dom_classes
        if spec.kind in ("loop", "block"):
            names = session.loops() if spec.kind == "loop" else session.blocks()
            values = [v for _label, v in field.options if v is not None]
            assert values == names
            assert (None in [v for _l, v in field.options]) == (not spec.required)
        if spec.kind == "choice":
            assert [v for _l, v in field.options] == list(spec.choices)
    assert prim.doc.partition("\n")[0] in html.unescape(e.help.value)


def test_split_through_the_form(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    apply(e, "split", loop="i", factors="None, 16")
    assert e.banner.layout.display == "none"
    assert session.loops() == ["i_0", "i_1", "j", "k"]
    assert session.snapshot.step.args["factors"] == (None, 16)
    # The views follow: loop table, pickers, highlighted script, trace.
    table = text_of(e.loop_table.value)
    assert "i_0" in table and "i_1" in table and "16" in table
    # "i" is gone: no other loop is picked for the user (a quick second Apply split i_0)
    assert [v for _l, v in e.params["loop"].options] == ["", *session.loops()]
    assert e.params["loop"].label == "(pick a loop)"
    changed = changed_text(e.script.value)
    assert any("for i_0, i_1, j, k in T.grid(4, 16, 64, 64):" in line for line in changed)
    assert len(changed) == len(changed_lines(session.snapshot.diff)[0])
    assert "sch.split(" in e.trace.value and "factors=[None, 16]" in e.trace.value
    assert e.trace.value == session.snapshot.trace_python


@pytest.mark.parametrize("factors", ["-1, 16", "[None, 16]", "(?, 16)", "none 16"])
def test_factor_spellings(ctx: Context, session: ScheduleSession, factors: str) -> None:
    e = ScheduleEditor(ctx)
    apply(e, "split", loop="j", factors=factors)
    assert session.snapshot.step.args["factors"] == (None, 16)


def test_bad_factors_text_names_the_parameter_and_leaves_the_session(
    ctx: Context, session: ScheduleSession
) -> None:
    e = ScheduleEditor(ctx)
    before = session.snapshot
    apply(e, "split", loop="i", factors="abc, 16")
    assert e.banner.layout.display is None
    banner = text_of(e.banner.value)
    assert "factors" in banner and "'abc'" in banner and "split" in banner
    assert session.snapshot == before
    apply(e, "split", loop="i", factors="")
    assert "factors" in text_of(e.banner.value) and "required" in text_of(e.banner.value)


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("2.5", "must be a whole number"),  # IntText read it as 25
        ("", "must be a whole number"),
        ("-1", "must be at least 0"),  # BoundedIntText moved it to 0
    ],
)
def test_a_whole_number_field_refuses_what_is_not_one_and_leaves_the_session(
    ctx: Context, session: ScheduleSession, typed: str, words: str
) -> None:
    e = ScheduleEditor(ctx)
    before = session.snapshot
    apply(e, "cache_read", block="C", read_index=typed, storage_scope="global")
    assert e.params["read_index"].value == typed  # the box keeps what was typed
    banner = text_of(e.banner.value)
    assert "cache_read" in banner and "read_index" in banner and words in banner, banner
    assert session.snapshot == before
    apply(e, "cache_read", block="C", read_index=" 1 ", storage_scope="global")
    assert e.banner.layout.display == "none", text_of(e.banner.value)
    assert session.snapshot.step.args["read_index"] == 1


@pytest.mark.parametrize(
    ("primitive", "values", "words"),
    [
        ("vectorize", {"loop": "k"}, "reduction loop"),
        ("split", {"loop": "i", "factors": "3, 16"}, "must multiply to the loop extent 64"),
        ("fuse", {"loops": "i, k"}, None),
    ],
)
def test_illegal_step_shows_a_plain_banner_and_changes_nothing(
    ctx: Context, session: ScheduleSession, primitive: str, values: dict, words: str | None
) -> None:
    e = ScheduleEditor(ctx)
    before = session.snapshot
    script = e.script.value
    apply(e, primitive, **values)
    assert e.banner.layout.display is None
    banner = text_of(e.banner.value)
    assert banner.startswith(f"Cannot apply {primitive}:")
    if words:
        assert words in banner
    assert session.snapshot == before and e.script.value == script
    # The next successful step hides the banner again.
    apply(e, "parallel", loop="i")
    assert e.banner.layout.display == "none" and e.banner.value == ""


def test_tvm_detail_is_folded_away(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    apply(e, "vectorize", loop="k")
    assert "<details><summary>TVM's message</summary>" in e.banner.value


def test_undo_redo_buttons(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    assert e.undo_button.disabled and e.redo_button.disabled
    apply(e, "split", loop="i", factors="None, 16")
    apply(e, "parallel", loop="i_0")
    assert not e.undo_button.disabled and e.redo_button.disabled
    e.undo_button.click()
    assert session.snapshot.step.primitive == "split"
    assert not e.redo_button.disabled
    assert "parallel" not in text_of(e.loop_table.value)
    e.redo_button.click()
    assert session.snapshot.step.primitive == "parallel"
    assert "parallel" in text_of(e.loop_table.value)
    e.reset_button.click()
    assert session.snapshot.step_id == 0 and e.undo_button.disabled
    assert "unscheduled" in text_of(e.script.value)


def test_branch_history_and_checkout(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    apply(e, "split", loop="i", factors="None, 16")
    split_id = session.snapshot.step_id
    e.undo_button.click()
    apply(e, "split", loop="j", factors="None, 8")
    assert len(session.branches()) == 2
    assert "2 branches" in e.branches.value
    ids = [v for _label, v in e.history.options]
    assert ids == [0, split_id, session.snapshot.step_id]
    assert e.history.value == session.snapshot.step_id
    current = dict((v, label) for label, v in e.history.options)[session.snapshot.step_id]
    assert current.startswith("\u25b6") and "factors=[None, 8]" in current
    e.history.value = split_id
    e.checkout_button.click()
    assert session.snapshot.step_id == split_id
    assert session.loops() == ["i_0", "i_1", "j", "k"]
    assert e.history.value == split_id


def test_reorder_with_the_loop_list_and_its_picker(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    e.primitive.value = "reorder"
    adder = next(w for w in e.form.children[0].children if "se-param-loops-add" in w._dom_classes)
    add = {b.description: b for b in adder.children}
    assert list(add) == session.loops()
    add["k"].click()
    add["j"].click()
    assert e.params["loops"].value == "k, j"
    e.apply_button.click()
    assert e.banner.layout.display == "none"
    assert session.loops() == ["i", "k", "j"]
    # one button per loop, after every step (a list to pick from lost quick picks: ipywidgets
    # sends picks made while the kernel answers an earlier one as one)
    assert [b.description for b in adder.children] == ["i", "k", "j"]
    e.params["loops"].value = ""
    for name in ("j", "i", "k", "k"):
        {b.description: b for b in adder.children}[name].click()
    assert e.params["loops"].value == "j, i, k, k"


def test_optional_pickers_and_ints(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    e.primitive.value = "annotate"
    assert e.params["loop"].value is None and e.params["block"].value is None
    apply(e, "annotate", loop="i", key="pragma_auto_unroll_max_step", value=16)
    assert e.banner.layout.display == "none"
    assert "pragma_auto_unroll_max_step=16" in text_of(e.loop_table.value)
    apply(e, "annotate", loop=None, block=None)
    assert "exactly one of loop or block" in text_of(e.banner.value)
    apply(e, "cache_read", block="C", read_index=1, storage_scope="global")
    assert e.banner.layout.display == "none"
    assert "B_global" in session.blocks()


def test_follows_the_current_session(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    other = ScheduleSession(get_workload("softmax", M=8, N=16), ctx.target)
    ctx.set_session(other)
    assert e.session is other
    assert "softmax" in e.title.value
    session.apply("split", loop="i", factors=[None, 16])  # the old session: no longer shown
    assert "i_0" not in text_of(e.loop_table.value)
    assert [v for _l, v in e.params["loop"].options] == other.loops()


def test_without_a_session(ctx: Context) -> None:
    e = ScheduleEditor(ctx)
    assert e.apply_button.disabled
    e.apply()
    assert "Build a workload first" in e.banner.value


def test_rebind_on_a_bigger_workload(ctx: Context) -> None:
    # conv2d: several blocks (padding, conv), so block pickers have real choices.
    workload: Workload = get_workload("conv2d", N=1, CI=4, H=8, W=8, CO=4, KH=3, KW=3)
    ctx.set_session(ScheduleSession(workload, ctx.target))
    e = ScheduleEditor(ctx)
    e.primitive.value = "compute_inline"
    blocks = [v for _l, v in e.params["block"].options]
    assert blocks == ctx.session.blocks() and len(blocks) >= 2
    e.params["block"].value = blocks[0]
    e.apply_button.click()
    assert e.banner.layout.display == "none"
    assert blocks[0] not in ctx.session.blocks()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("None, 16", [None, 16]),
        ("-1, 16", [None, 16]),
        ("[4, 16]", [4, 16]),
        ("2 None 8", [2, None, 8]),
        ("'None', 4", [None, 4]),
    ],
)
def test_parse_factors(text: str, expected: list) -> None:
    assert parse_factors("split", SPLIT_FACTORS, text) == expected


@pytest.mark.parametrize("text", ["", "abc", "0, 16", "-2, 4", "1.5, 2", "16; x"])
def test_parse_factors_errors(text: str) -> None:
    with pytest.raises(PrimitiveError) as info:
        parse_factors("split", SPLIT_FACTORS, text)
    assert info.value.arg == "factors"


def test_parse_loops() -> None:
    assert parse_loops("reorder", REORDER_LOOPS, "k, 'j' i_0") == ["k", "j", "i_0"]
    with pytest.raises(PrimitiveError):
        parse_loops("reorder", REORDER_LOOPS, "  ")


def test_changed_lines() -> None:
    diff = "--- a\n+++ b\n@@ -1,3 +1,3 @@\n x\n-y\n+Y\n z\n@@ -10,2 +10,3 @@\n p\n+q\n+r\n"
    assert changed_lines(diff) == ({2, 11, 12}, 1)
    assert changed_lines("") == (set(), 0)


def test_after_undo_the_marks_show_what_undo_changed(
    ctx: Context, session: ScheduleSession
) -> None:
    """Issue 10: after Undo, the script view marked what the now-current step once changed."""
    e = ScheduleEditor(ctx)
    apply(e, "split", loop="i", factors="None, 16")
    apply(e, "parallel", loop="i_0")
    assert any("T.parallel" in line for line in changed_text(e.script.value))
    e.undo_button.click()  # parallel undone: the loop is serial again
    lines = changed_text(e.script.value)
    assert lines and not any("T.parallel" in line for line in lines)
    assert any("i_0" in line for line in lines)  # the loop whose kind Undo changed back
    assert "Moved to step 1 from step 2" in text_of(e.script.value)
    e.redo_button.click()  # a step applied after the one shown: its own change again
    assert any("T.parallel" in line for line in changed_text(e.script.value))
    assert "Step 2" in text_of(e.script.value)


def test_a_missing_argument_names_itself_plainly(ctx: Context, session: ScheduleSession) -> None:
    e = ScheduleEditor(ctx)
    e.primitive.value = "split"
    e.params["loop"].value = "i"
    e.params["factors"].value = ""
    e.apply_button.click()
    banner = text_of(e.banner.value)
    assert "split: factors is required" in banner and "None)" not in banner, banner


def test_every_rewrite_example_shows_before_then_after() -> None:
    """Issue 10: side by side, the help's examples showed only their "before" half."""
    from explorer.session import PRIMITIVES
    from widgets._editor_views import _before_after, primitive_help

    examples = {n: p.doc for n, p in PRIMITIVES.items() if "->" in p.doc}
    assert len(examples) >= 10
    for name, doc in examples.items():
        halves = _before_after(doc.split("Rewrite:", 1)[1].strip("\n"))
        assert halves is not None, name
        before, after, call = halves
        assert before and after and "->" not in before + after, name
        assert call.startswith(f"{name}("), (name, call)
        assert max(len(line) for line in (before + "\n" + after).splitlines()) <= 60, name
        shown = text_of(primitive_help(doc))
        assert shown.index("before:") < shown.index("after")
