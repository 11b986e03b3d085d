"""The explorer's few CSS rules, injected once per panel as a hidden ``<style>``.

ipywidgets gives every HTML widget the line height of a one-line input (28 px) so that a label
lines up with the field beside it; our HTML widgets hold paragraphs and tables, where that height
turns a two-line note into five. The rules are scoped to ``.se-ui`` (every panel's root), so
nothing outside the explorer changes. A ``<style>`` element applies while its widget is hidden,
and a repeated one (several panels in one notebook) is harmless.
"""

from __future__ import annotations

from typing import Any, TypeVar

import ipywidgets as w

W = TypeVar("W", bound=Any)

UI_CLASS = "se-ui"

CSS = f"""
.{UI_CLASS} .jupyter-widget-html > .jupyter-widget-html-content,
.{UI_CLASS} .widget-html > .widget-html-content {{
  line-height: 1.45;
  min-width: 0;  /* may shrink below its widest line: text wraps, a <pre> scrolls */
}}
.{UI_CLASS} .se-section {{
  margin-top: 10px;
}}
.{UI_CLASS} pre {{
  white-space: pre;
  overflow-wrap: normal;
  word-break: normal;
  overflow-x: auto;
  max-width: 100%;
}}
/* The generated code: a diff's lines coloured, the LLVM IR in a box of its own height. */
.{UI_CLASS} .se-diff-add {{
  background: rgba(46, 160, 67, 0.18);
}}
.{UI_CLASS} .se-diff-del {{
  background: rgba(248, 81, 73, 0.18);
}}
.{UI_CLASS} pre.se-llvm-ir {{
  max-height: 480px;
  overflow-y: auto;
}}
/* Tables of numbers (a race's rows, instruction mixes): columns apart, numbers on the right. */
.{UI_CLASS} table.se-race-rows, .{UI_CLASS} table.se-mix {{
  border-collapse: collapse;
}}
.{UI_CLASS} table.se-race-rows :is(th, td), .{UI_CLASS} table.se-mix :is(th, td) {{
  padding: 1px 10px;
  text-align: right;
}}
.{UI_CLASS} table.se-race-rows :is(th, td):first-child,
.{UI_CLASS} table.se-mix :is(th, td):first-child {{
  padding-left: 0;
  text-align: left;
}}
.{UI_CLASS} .se-buttons {{
  gap: 4px;
}}
.{UI_CLASS} .se-buttons > .jupyter-button {{
  flex: 0 0 auto;
  overflow: visible;
}}
/* A widget as wide as its box ("100%") keeps its margins inside it: without this, every box
   holding one scrolled sideways by those 4 px (a scrollbar under the editor, the history...). */
.{UI_CLASS} .widget-box > .jupyter-widgets {{
  max-width: calc(100% - 2 * var(--jp-widgets-margin));
}}
/* A Label holds a sentence (a status, a note): it wraps. ipywidgets gives it one line and cuts
   the rest with "..." ("Done: ... Nothing beat yo..."). */
.{UI_CLASS} div.widget-label {{
  white-space: normal;
  overflow-wrap: anywhere;
  line-height: 1.45;
  padding: 4px 0;
  min-height: var(--jp-widgets-inline-height);
  height: auto;
}}
"""


def style_widget() -> w.HTML:
    """A hidden HTML widget carrying ``CSS`` (put it anywhere inside a ``.se-ui`` root)."""
    widget = w.HTML(f"<style>{CSS}</style>", layout=w.Layout(display="none"))
    widget.add_class("se-style")
    return widget


def themed(root: w.Box) -> w.Box:
    """Mark ``root`` as an explorer panel and append the style to it; returns ``root``."""
    root.add_class(UI_CLASS)
    root.children = (*root.children, style_widget())
    return root


def tagged(widget: W, css_class: str) -> W:
    """``widget`` with ``css_class`` added (the classes the page's CSS and the tests find)."""
    widget.add_class(css_class)
    return widget
