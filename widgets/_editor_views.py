"""The editor's read-only views as HTML: primitive help, the TVMScript with the last step's
changes marked, and the loop table. Pure functions of a ``Snapshot`` (testable without widgets).
"""

from __future__ import annotations

import html
import re
import textwrap

from explorer.session import Snapshot, script_diff

CHANGED_STYLE = "background:#fff2a8"


def primitive_help(doc: str) -> str:
    """A primitive's docstring as help: the summary, then the ``Rewrite:`` example, its before
    and after stacked (side by side they need ~520 px, more than the controls column has)."""
    summary, _, rest = doc.partition("\n")
    rewrite = ""
    if "Rewrite:" in rest:
        example = rest.split("Rewrite:", 1)[1].strip("\n")
        # Scrolls sideways: a wrapped line of code breaks mid-token and misleads.
        pre = '<pre style="font-size:85%;margin:2px 0 4px 0;white-space:pre;overflow-x:auto">'
        halves = _before_after(example)
        if halves is None:
            rewrite = f"{pre}{html.escape(example)}</pre>"
        else:
            before, after, call = halves
            rewrite = (
                f"<div style='font-size:85%'>before:</div>{pre}{html.escape(before)}</pre>"
                f"<div style='font-size:85%'>after <code>{html.escape(call)}</code>:</div>"
                f"{pre}{html.escape(after)}</pre>"
            )
    return f"<div style='font-size:90%'>{html.escape(summary)}</div>{rewrite}"


def _before_after(example: str) -> tuple[str, str, str] | None:
    """``(before, after, call)`` of a docstring's side-by-side example: the columns left and
    right of its ``->``, then its last line (the call); ``None`` when it has no arrow."""
    *lines, call = example.rstrip().splitlines() or [""]
    arrow = next((line.index("->") for line in lines if "->" in line), None)
    if arrow is None:
        return None
    left = textwrap.dedent("\n".join(line[:arrow].rstrip() for line in lines)).strip("\n")
    right = textwrap.dedent("\n".join(line[arrow + 2 :].rstrip() for line in lines))
    return left, right.strip("\n"), call.strip()


def changed_lines(diff: str) -> tuple[set[int], int]:
    """The 1-based line numbers added in the new text of a unified diff, and how many were
    removed."""
    added: set[int] = set()
    removed = 0
    line_no = 0
    in_hunk = False
    for line in diff.splitlines():
        if line.startswith("@@"):
            m = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
            line_no = int(m.group(1)) if m else line_no
            in_hunk = True
        elif not in_hunk:
            continue  # the ---/+++ file header
        elif line.startswith("+"):
            added.add(line_no)
            line_no += 1
        elif line.startswith("-"):
            removed += 1
        elif not line.startswith("\\"):
            line_no += 1
    return added, removed


def script_html(snapshot: Snapshot, before: Snapshot | None = None) -> str:
    """The TVMScript in a ``<pre>``, the lines that changed on screen marked ``se-changed``.

    ``before`` is what the view showed until now: after an undo, a reset or a checkout the
    marks show what that move changed, not what the step now current once did.
    """
    moved = (
        before is not None
        and before.workload == snapshot.workload
        and before.step_id != snapshot.step_id
        and snapshot.step.parent != before.step_id  # not a step applied (or redone) after it
    )
    diff = snapshot.diff
    if moved:
        assert before is not None
        diff = script_diff(before.script, snapshot.script, "shown", "now")
    added, removed = changed_lines(diff)
    out = []
    for number, line in enumerate(snapshot.script.splitlines(), start=1):
        text = html.escape(line)
        if number in added:
            out.append(f'<span class="se-changed" style="{CHANGED_STYLE}">{text}</span>')
        else:
            out.append(text)
    changed = (
        f'<span style="{CHANGED_STYLE}">{len(added)} line(s)</span>'
        f"{f' and removed {removed}' if removed else ''}"
    )
    if moved:
        assert before is not None
        where = "the unscheduled program" if snapshot.step_id == 0 else f"step {snapshot.step_id}"
        caption = f"Moved to {where} from step {before.step_id}: changed {changed}."
    elif snapshot.step_id == 0:
        caption = "The unscheduled program."
    elif snapshot.step.primitive == "load":
        caption = f"Loaded by step {snapshot.step_id}: {len(added)} line(s) differ."
    else:
        caption = (
            f"Step {snapshot.step_id}, <code>{html.escape(snapshot.step.label)}</code>, changed "
            f"{changed}."
        )
    body = "\n".join(out)
    return (
        f"<div style='font-size:90%'>{caption}</div>"
        '<pre style="font-size:85%;max-height:32em;overflow:auto;white-space:pre;'
        f'border:1px solid #ddd;padding:4px;margin:2px 0">{body}</pre>'
    )


def loop_table_html(snapshot: Snapshot) -> str:
    """Every block (a row of its own) with its loops, outer to inner: extent, kind,
    annotations."""
    touched = _touched_names(snapshot)
    pad = "padding:0 6px"
    head = "".join(
        f"<th style='text-align:left;{pad}'>{h}</th>"
        for h in ("loop", "extent", "kind", "annotations")
    )
    rows = []
    for block in snapshot.blocks:
        kinds = "reduction" if block.is_reduction else "spatial"
        # The block on a row of its own: as a first column it took a third of a narrow table.
        rows.append(
            f"<tr><td colspan='4' style='{pad};padding-top:2px'><b>{html.escape(block.name)}"
            f"</b> <small>[{html.escape(block.iter_kinds)}, {kinds}]</small></td></tr>"
        )
        if not block.loops:
            rows.append(f"<tr><td colspan='4' style='{pad}'><i>no loops</i></td></tr>")
        for lp in block.loops:
            notes = ", ".join(f"{k}={v}" for k, v in lp.annotations)
            kind = lp.thread or lp.kind
            mark = f' class="se-changed" style="{CHANGED_STYLE}"' if lp.name in touched else ""
            rows.append(
                f"<tr{mark}>"
                f"<td style='{pad}'>{'&nbsp;' * 2 * (lp.depth + 1)}{html.escape(lp.name)}</td>"
                f"<td style='{pad}'>{lp.extent if lp.extent is not None else '?'}</td>"
                f"<td style='{pad}'>{html.escape(kind)}</td>"
                f"<td style='{pad}'>{html.escape(notes)}</td></tr>"
            )
    # Cells never wrap (a fused name cut in two reads as two loops); the widget scrolls instead.
    return (
        '<table class="se-loops-table" style="border-collapse:collapse;font-size:90%;'
        f'white-space:nowrap"><tr>{head}</tr>{"".join(rows)}</table>'
    )


def _touched_names(snapshot: Snapshot) -> set[str]:
    """Loop names the last step produced or named (new loops of a split, a fused loop...)."""
    names: set[str] = set()
    for value in snapshot.step.args.values():
        items = value if isinstance(value, tuple) else (value,)
        names |= {v for v in items if isinstance(v, str)}
    if snapshot.step.primitive == "split":
        base = str(snapshot.step.args.get("loop", ""))
        var = base.rsplit(".", 1)[-1]
        names |= {
            lp.name for lp in snapshot.loops if re.fullmatch(rf"{re.escape(var)}_\d+", lp.var)
        }
    if snapshot.step.primitive == "fuse":
        names |= {lp.name for lp in snapshot.loops if lp.var.endswith("_fused")}
    return names
