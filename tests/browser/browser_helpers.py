"""Playwright helpers: drive JupyterLab 4 like a user and check that nothing broke on the page."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
# Screenshots; artifacts/ is already git-ignored.
ARTIFACTS = Path(os.environ.get("BROWSER_ARTIFACTS") or REPO / "artifacts" / "browser")


@dataclass
class PageLog:
    """What the browser reported while a test ran."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)


# A laptop-sized window by default; BROWSER_VIEWPORT=1920x1080 to look at a bigger screen.
_W, _H = (int(v) for v in os.environ.get("BROWSER_VIEWPORT", "1400x1000").lower().split("x"))
VIEWPORT = {"width": _W, "height": _H}


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


def new_page(browser: Any) -> tuple[Any, Any, PageLog]:
    """A fresh context + page whose console and page errors are recorded in a ``PageLog``."""
    ctx = browser.new_context(viewport=VIEWPORT)
    ctx.set_default_timeout(30_000)
    page = ctx.new_page()
    plog = PageLog()

    def on_console(msg: Any) -> None:
        if msg.type == "error":
            loc = msg.location or {}
            where = f" ({loc.get('url', '')}:{loc.get('lineNumber', '')})" if loc else ""
            plog.console_errors.append(f"{msg.text}{where}")

    page.on("console", on_console)
    page.on("pageerror", lambda e: plog.page_errors.append(str(e)))
    return ctx, page, plog


def save_failure_screenshot(page: Any, request: Any) -> None:
    """Full-page ``FAILED_<test>.png`` when the test behind ``request`` failed."""
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:  # keep evidence of every failure
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        try:
            page.screenshot(
                path=str(ARTIFACTS / f"FAILED_{safe_name(request.node.name)}.png"), full_page=True
            )
        except Exception as exc:  # noqa: BLE001 - a screenshot must never mask the test's own failure
            print(f"failure screenshot not saved: {exc}")


KERNEL_IDLE_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && k.connectionStatus === 'connected';
}"""

# A silent, empty execution, answered once the kernel handled every message sent before it
# (it handles its shell messages, widget updates included, in order) and once the updates
# those caused reached the page (its reply waits for the "idle" that follows them).
_KERNEL_PING_JS = """async (ms) => {
  const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const ping = k.requestExecute({code: '', silent: true, store_history: false}).done;
  const late = new Promise((_, no) => setTimeout(() => no(new Error('no reply')), ms));
  await Promise.race([ping, late]);
  return true;
}"""


def kernel_settled(page: Page, timeout: float = 30_000) -> None:
    """Wait until the kernel handled every widget message the page sent so far, and the page
    has what they changed. Twice: ipywidgets holds a model's next update back until the
    kernel answered its previous one, so an update may leave only after the first answer."""
    for _ in range(2):
        page.evaluate(_KERNEL_PING_JS, timeout)


ALL_CODE_CELLS_EXECUTED_JS = """() => {
  const sel = '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputArea-prompt';
  const ps = [...document.querySelectorAll(sel)];
  return ps.length > 0 && ps.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""

_ANY_TRACEBACK_JS = """() => [...document.querySelectorAll(
  '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
  .some(e => e.textContent.includes('Traceback'))"""

# Browser console errors that say nothing about the explorer, as (regex, why it is harmless).
# Anything else logged at level "error" fails the test. None are known: JupyterLab 4.6.6 with
# ipywidgets 8.1.9, anywidget 0.11.0 and plotly 7.1.0 logged no console error in any run here.
# (At level "warning", which is not checked: "Disabling terminals plugin because they are not
# available on the server", from --ServerApp.terminals_enabled=False, and SwiftShader's "GL
# Driver Message ... GPU stall due to ReadPixels" for plotly's WebGL traces.)
BENIGN_CONSOLE_ERRORS: list[tuple[str, str]] = []

# Uncaught exceptions that say nothing about the explorer, as (regex, why it is harmless).
BENIGN_PAGE_ERRORS: list[tuple[str, str]] = [
    (
        r"^\[anywidget\] Failed to initialize model\.$",
        "anywidget gives each widget model 2 s to load its module, then rejects a promise "
        "nobody awaits. The explorer's only anywidget is the plots' view (widgets._plot."
        "PlotView), which needs no message after it is created, so its plot draws all the "
        "same (test_lab_plots_draw counts the drawn traces). Seen on a page slowed down 4x on "
        "a loaded machine, where JupyterLab itself holds the page for seconds.",
    ),
]

# --------------------------------------------------------------------------- notebook driving


def write_notebook(root: Path, name: str, cells: list[str]) -> str:
    """Write a notebook of code cells into the server's root dir; returns its path there."""
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": f"cell-{i}",
                "metadata": {},
                "outputs": [],
                "source": src,
            }
            for i, src in enumerate(cells)
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (root / name).write_text(json.dumps(nb, indent=1))
    return name


@contextmanager
def explorer_page(
    jupyter_lab: Any, browser: Any, request: Any, name: str, cells: list[str]
) -> Iterator[Any]:
    """A page with notebook ``name`` of ``cells`` run in JupyterLab, once an Explorer shows;
    a screenshot if the test failed, then the page and the notebook's kernel are closed."""
    ctx, page, plog = new_page(browser)
    page.log = plog
    notebook = write_notebook(jupyter_lab.root, name, cells)
    try:
        open_notebook(page, jupyter_lab.lab_url(notebook))
        run_all_cells(page)
        page.locator(".se-explorer").first.wait_for(state="visible", timeout=60_000)
        yield page
    finally:
        save_failure_screenshot(page, request)
        ctx.close()
        jupyter_lab.shutdown_sessions(notebook)


def open_notebook(page: Page, url: str, timeout: float = 90_000) -> None:
    """Open a notebook and wait until its kernel is started, connected and idle."""
    page.goto(url)
    page.locator(".jp-NotebookPanel").first.wait_for(timeout=timeout)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=timeout)


def run_all_cells(page: Page, timeout: float = 300_000) -> float:
    """Run ▸ Run All Cells like a user; wait for every prompt to show [n] and the kernel idle.

    Returns the seconds it took.
    """
    t0 = time.monotonic()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
    # Done, or a cell raised (Run All then skips the remaining cells: fail now, not at timeout).
    page.wait_for_function(
        f"() => ({ALL_CODE_CELLS_EXECUTED_JS})() || ({_ANY_TRACEBACK_JS})()",
        timeout=timeout,
        polling=250,
    )
    tracebacks = error_outputs(page)
    assert not tracebacks, "a cell raised during Run All:\n" + "\n\n".join(tracebacks)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=timeout, polling=250)
    return time.monotonic() - t0


# --------------------------------------------------------------------------- what broke


def error_outputs(page: Page) -> list[str]:
    """Tracebacks in cell outputs (JupyterLab 4 renders ``error`` outputs as the stderr mime)."""
    sel = (
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"], '
        '.jp-RenderedText[data-mime-type="application/vnd.jupyter.stderr"]'
    )
    texts = page.locator(sel).filter(has_text="Traceback").all_inner_texts()
    return list(dict.fromkeys(t.strip() for t in texts))


def stderr_outputs(page: Page) -> list[str]:
    """Every stderr stream in the cell outputs (warnings, logged messages, tracebacks)."""
    sel = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
    return [t.strip() for t in page.locator(sel).all_inner_texts()]


def widget_errors(page: Page) -> list[str]:
    """ipywidgets front-end failures: a missing labextension, a JS exception in a widget view."""
    errs = page.locator(
        ".jupyter-widgets-error-widget, .jupyter-widgets .widget-error"
    ).all_inner_texts()
    errs += page.get_by_text("Click to show javascript error").all_inner_texts()
    errs += page.locator(
        ".jp-OutputArea-output", has_text="Error displaying widget"
    ).all_inner_texts()
    return list(dict.fromkeys(e.strip() or "<empty widget error box>" for e in errs))


def log_console_count(page: Page) -> str:
    """The status-bar Log Console badge ('' = nothing logged).

    Exceptions raised in widget callbacks triggered from the browser land ONLY there: not in cell
    outputs, not as page errors.
    """
    item = page.locator(".jp-LogConsoleStatusItem")
    return item.first.inner_text().strip() if item.count() else ""


def log_console_text(page: Page) -> str:
    """Open the Log Console panel and return what it shows (for failure messages)."""
    try:
        page.evaluate("window.jupyterapp.commands.execute('logconsole:open')")
        panel = page.locator(".jp-LogConsolePanel").first
        panel.wait_for(timeout=5_000)
        time.sleep(0.5)
        return panel.inner_text()
    except Exception as exc:  # noqa: BLE001 - diagnostics only
        return f"<log console not readable: {exc}>"


def unexpected_console_errors(plog: PageLog) -> list[str]:
    return _unexpected(plog.console_errors, BENIGN_CONSOLE_ERRORS)


def unexpected_page_errors(plog: PageLog) -> list[str]:
    return _unexpected(plog.page_errors, BENIGN_PAGE_ERRORS)


def _unexpected(errors: list[str], benign: list[tuple[str, str]]) -> list[str]:
    return [e for e in errors if not any(re.search(pat, e) for pat, _reason in benign)]


def page_problems(page: Page, plog: PageLog) -> list[str]:
    """Everything that says the page is broken, as readable lines (empty: all good)."""
    problems = [f"traceback in a cell output:\n{t}" for t in error_outputs(page)]
    problems += [f"widget error box: {e}" for e in widget_errors(page)]
    problems += [f"page error (uncaught JS exception): {e}" for e in unexpected_page_errors(plog)]
    problems += [f"browser console error: {e}" for e in unexpected_console_errors(plog)]
    badge = log_console_count(page)
    if badge:
        problems.append(
            f"JupyterLab log console has {badge} message(s) (a widget callback raised?):\n"
            f"{log_console_text(page)}"
        )
    return problems


def assert_page_clean(page: Page, plog: PageLog, when: str = "") -> None:
    ignored = [e for e in plog.console_errors if e not in unexpected_console_errors(plog)]
    ignored += [e for e in plog.page_errors if e not in unexpected_page_errors(plog)]
    if ignored:
        print(f"{when}: ignored benign errors: {ignored}")
    problems = page_problems(page, plog)
    assert not problems, f"{when}: " + "\n\n".join(problems)


# --------------------------------------------------------------------------- widgets


def widget(page: Page, cls: str) -> Locator:
    """The (first) element carrying a contract class, e.g. ``widget(page, "se-apply")``."""
    return page.locator(f".{cls}").first


_MARK_HIDDEN_TABS_JS = """(el) => {
  // Tag the Tab titles / Accordion headers hiding el, outermost first; returns how many.
  document.querySelectorAll('[data-se-reveal]').forEach(e => e.removeAttribute('data-se-reveal'));
  const toClick = [];
  for (let node = el; node && node.parentElement; node = node.parentElement) {
    const parent = node.parentElement;
    if (parent.classList.contains('widget-tab-contents')) {
      const i = [...parent.children].indexOf(node);
      const tabs = parent.parentElement.querySelectorAll(':scope > .lm-TabBar .lm-TabBar-tab');
      if (tabs[i] && !tabs[i].classList.contains('lm-mod-current')) toClick.push(tabs[i]);
    }
    if (node.classList.contains('jupyter-widget-Collapse-contents')
        && node.classList.contains('lm-mod-hidden')) {
      const header = parent.querySelector(':scope > .jupyter-widget-Collapse-header');
      if (header) toClick.push(header);
    }
  }
  toClick.reverse().forEach((e, i) => e.setAttribute('data-se-reveal', String(i)));
  return toClick.length;
}"""


# Each tab's panel, by the tab's title (widgets.explorer.TITLES).
_TAB_PANELS = {
    "Schedule": ".se-editor",
    "Search": ".se-search",
    "Dashboards": ".se-dashboards",
    "Fleet": ".se-fleet",
    "NAS": ".se-nas",
    "Model": ".se-model",
}


def show_tab(page: Page, tab: str) -> None:
    """Click the first explorer's tab titled ``tab``, like a user, and wait for its panel to
    show: the Explorer builds a tab's panel when it is first shown, so what is in it exists in
    the page from then on."""
    page.locator(".se-tabs .lm-TabBar-tab").filter(has_text=tab).first.click()
    panel = next((css for title, css in _TAB_PANELS.items() if tab.startswith(title)), None)
    if panel is not None:
        page.locator(f".se-explorer {panel}").first.wait_for(state="visible", timeout=60_000)
    settle(page, 0)


_CLICK_SEEN_JS = """e => {
  window.__seClickSeen = false;
  e.addEventListener('click', () => { window.__seClickSeen = true; }, {capture: true, once: true});
}"""


def click_delivered(loc: Locator, tries: int = 3, wait_ms: float = 10_000) -> None:
    """Click ``loc`` like a user, and again if the browser never gave it a click event.

    On a loaded machine the page can move between the pointer's press and its release (an
    output arrives, a panel grows): the release lands on another element and no click happens
    at all, for a user as for Playwright, and a user clicks again (seen once in a clean-clone
    CI: the Measure button never heard of the click, the kernel sat idle, the panel still said
    "press Measure"). A click the element received and the explorer ignored is not retried:
    the caller's wait for its effect fails."""
    for attempt in range(1, tries + 1):
        loc.evaluate(_CLICK_SEEN_JS)
        loc.click()
        try:
            loc.page.wait_for_function("() => window.__seClickSeen", timeout=wait_ms)
            return
        except PlaywrightTimeoutError:
            print(f"click {attempt} of {tries} on {loc} never reached it")
    raise AssertionError(f"{tries} clicks on {loc} never reached it")


def reveal(page: Page, loc: Locator) -> None:
    """Select the Tab(s) / open the Accordion section(s) that hide ``loc``, like a user would."""
    loc.wait_for(state="attached")
    n = int(loc.evaluate(_MARK_HIDDEN_TABS_JS))
    for i in range(n):
        page.locator(f'[data-se-reveal="{i}"]').click()
    if n:
        loc.wait_for(state="visible")
    loc.scroll_into_view_if_needed()


def text_input(page: Page, cls: str) -> Locator:
    """The <input>/<textarea> of a Text/IntText widget (or the element itself if it is one)."""
    outer = page.locator(f".{cls}").first
    outer.wait_for(state="attached")  # a tab's panel is built when the tab first opens
    inner = outer.locator("input, textarea").first
    return inner if inner.count() else outer


def select_of(page: Page, cls: str) -> Locator:
    """The <select> of a Dropdown widget (or the element itself if it is one)."""
    outer = page.locator(f".{cls}").first
    outer.wait_for(state="attached")  # a tab's panel is built when the tab first opens
    inner = outer.locator("select").first
    return inner if inner.count() else outer


def options_of(select: Locator) -> list[str]:
    return [
        o.strip()
        for o in select.evaluate("s => [...s.options].map(o => o.textContent || o.value)")
    ]


def pick_label(options: list[str], name: str) -> str | None:
    """The option shown for ``name``: exactly it, or starting with it as a word ("split(loop,
    factors)", "matmul: C = A @ B", "random (uniform)"); ipywidgets shows a label's spaces as
    no-break spaces, read here as spaces."""
    if name in options:
        return name
    plain = name.replace("\xa0", " ")
    for o in options:
        if re.match(rf"{re.escape(plain)}(?![\w.])", o.replace("\xa0", " ")):
            return o
    return None


def choose(page: Page, cls: str, name: str, timeout: float = 30_000) -> str:
    """Pick ``name`` in the Dropdown ``.cls`` (waits for the option to be offered)."""
    sel = select_of(page, cls)
    reveal(page, sel)
    deadline = time.monotonic() + timeout / 1000
    while True:
        options = options_of(sel)
        label = pick_label(options, name)
        if label is not None:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f".{cls}: no option {name!r} among {options}")
        page.wait_for_timeout(200)
    sel.select_option(label=label)
    return label


def set_text(page: Page, cls: str, value: str) -> None:
    """Type into a Text/IntText widget and commit it (Enter, then blur) like a user would."""
    box = text_input(page, cls)
    box.scroll_into_view_if_needed()
    box.fill(value)
    box.press("Enter")
    box.evaluate("e => e.blur()")


def visible_text(loc: Locator) -> str:
    return " ".join(loc.inner_text().split())


# --------------------------------------------------------------------------- plotly


def plot_points(page: Page, container_cls: str) -> int:
    """Number of data points plotly.js holds in the figure inside ``.container_cls``."""
    return int(
        page.evaluate(
            """(cls) => {
              const gd = document.querySelector('.' + cls + ' .js-plotly-plot');
              if (!gd || !gd.data) return -1;
              let n = 0;
              for (const t of gd.data) {
                const xs = t.x || t.y || [];
                n += (xs.length !== undefined ? xs.length : 0);
              }
              return n;
            }""",
            container_cls,
        )
    )


def wait_plot_points(
    page: Page,
    container_cls: str,
    done: Callable[[int], bool],
    timeout_ms: float,
    explain: Callable[[], str],
) -> int:
    """``plot_points`` once ``done`` says it is enough; ``explain`` (the kernel's state, say)
    is in the error when it is not within ``timeout_ms``."""
    deadline = time.monotonic() + timeout_ms / 1000
    n = plot_points(page, container_cls)
    while not done(n):
        if time.monotonic() > deadline:
            raise AssertionError(
                f".{container_cls}: still {n} point(s) after {timeout_ms:.0f} ms; {explain()}"
            )
        page.wait_for_timeout(500)
        n = plot_points(page, container_cls)
    return n


def plot_svg_points(page: Page, container_cls: str) -> int:
    """Number of markers (or line vertices) drawn in the SVG scatter layer of that figure."""
    return int(
        page.evaluate(
            """(cls) => {
              const gd = document.querySelector('.' + cls + ' .js-plotly-plot');
              if (!gd) return -1;
              const pts = gd.querySelectorAll('.scatterlayer .point').length;
              if (pts) return pts;
              let n = 0;
              for (const p of gd.querySelectorAll('.scatterlayer .js-line')) {
                const d = p.getAttribute('d') || '';
                n += (d.match(/[ML]/g) || []).length;
              }
              return n;
            }""",
            container_cls,
        )
    )


# --------------------------------------------------------------------------- screenshots


def settle(page: Page, ms: int = 300) -> None:
    """Let the page paint after a scroll (JupyterLab skips rendering off-screen cells)."""
    page.evaluate(
        "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r())))"
    )
    page.wait_for_timeout(ms)


def shot(page: Page, name: str, locator: Locator | None = None) -> Path:
    """Save a screenshot under the artifacts dir: the viewport, or just ``locator``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{safe_name(name)}.png"
    if locator is not None:
        locator.scroll_into_view_if_needed()
        settle(page)
        locator.screenshot(path=str(path))
    else:
        settle(page)
        page.screenshot(path=str(path))
    return path


def full_shot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{safe_name(name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# --------------------------------------------------------------------------- drawn plots

# What plotly.js drew in each figure under an element, by trace type (issue 21: plots showed
# empty axes while the kernel held their traces). SVG traces are counted by their drawn trace
# groups; scattergl draws into WebGL, so its drawn traces are those of the subplot's regl scene
# (what plotly.js renders from). Never the figure's data: a plot can hold traces and draw
# nothing.
DRAWN_TRACES_JS = """(root) => {
  const out = [];
  for (const gd of root.querySelectorAll('.js-plotly-plot')) {
    const n = {};
    const add = (type, k) => { if (k) n[type] = (n[type] || 0) + k; };
    add('scatter', gd.querySelectorAll('.scatterlayer .trace').length);
    add('box', gd.querySelectorAll('.boxlayer .trace').length);
    add('bar', gd.querySelectorAll('.barlayer .trace').length);
    add('heatmap', gd.querySelectorAll('.heatmaplayer .hm').length);
    add('parcoords', gd.querySelectorAll('g.parcoords').length);
    for (const sp of Object.values((gd._fullLayout && gd._fullLayout._plots) || {}))
      if (sp._scene && sp._scene.count) add('scattergl', sp._scene.count);
    out.push(n);
  }
  return out;
}"""

# The kernel's side: the traces plotly.js would draw (by type) of a figure, for kernel_eval.
KERNEL_TRACES = """
def _se_traces(fig):
    counts = {}
    for t in fig.data:
        if t.visible is False:
            continue
        # plotly.js draws no group for a scatter or box whose arrays are empty
        if t.type in ("scatter", "scattergl", "box") and not len(t.y if t.y is not None else ()):
            continue
        counts[t.type] = counts.get(t.type, 0) + 1
    return counts
"""


def drawn_traces(where: Locator) -> list[dict[str, int]]:
    """For each figure inside the elements of ``where``, in page order: drawn traces by type."""
    out: list[dict[str, int]] = []
    for root in where.all():
        out += root.evaluate(DRAWN_TRACES_JS, timeout=10_000)
    return out


def kernel_eval(page: Page, code: str) -> str:
    """Run ``code`` in the current notebook's kernel (not in a cell); returns what it printed."""
    return str(
        page.evaluate(
            """async (code) => {
              const w = window.jupyterapp.shell.currentWidget;
              const kernel = w.sessionContext.session.kernel;
              const future = kernel.requestExecute({code, store_history: false});
              let out = '';
              future.onIOPub = (msg) => {
                const c = msg.content;
                if (msg.header.msg_type === 'stream') out += c.text;
                if (msg.header.msg_type === 'error') out += `${c.ename}: ${c.evalue}\\n`;
              };
              await future.done;
              return out;
            }""",
            code,
        )
    )


def kernel_json(page: Page, expression: str) -> Any:
    """The value of a Python ``expression`` in the notebook's kernel, through JSON."""
    out = kernel_eval(page, f"import json as _se_json\nprint(_se_json.dumps({expression}))")
    try:
        return json.loads(out)
    except ValueError:
        raise AssertionError(f"the kernel answered {out!r} for {expression}") from None


def wait_drawn(
    page: Page, want: dict[str, tuple[Locator, list[dict[str, int]]]], when: str, timeout: float
) -> None:
    """Wait until each figure draws the traces the kernel holds; fail naming those that do not.

    ``want``: a label -> (the figures' containers, each figure's traces by type)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    deadline = time.monotonic() + timeout
    while True:
        try:
            have = {label: drawn_traces(where) for label, (where, _) in want.items()}
        except PlaywrightTimeoutError:  # the page is too busy to answer: not drawn yet
            have = {label: [] for label in want}
        bad = [
            f"{label}: drawn {have[label]}, in the kernel {kernel}"
            for label, (_, kernel) in want.items()
            if have[label] != kernel
        ]
        if not bad:
            return
        if time.monotonic() > deadline:
            full_shot(page, f"FAILED_drawn_{when}")
            raise AssertionError(
                "\n".join([f"{when}, plots not drawn as the kernel holds them:"] + bad)
            )
        page.wait_for_timeout(500)


CPU_SLOWDOWN = 4
"""How many times slower than the machine a "busy laptop" page runs (Chromium's CPU throttling):
a laptop on battery, a browser beside a build. Plots must draw all the same."""


def busy_laptop(page: Page) -> None:
    """Slow the page's CPU down ``CPU_SLOWDOWN`` times (for this page, until it closes)."""
    page.context.new_cdp_session(page).send(
        "Emulation.setCPUThrottlingRate", {"rate": CPU_SLOWDOWN}
    )


def save_and_reload(page: Page, timeout: float = 90_000) -> None:
    """Save the notebook (its outputs name the widgets), then reload the browser page as a user
    would: the widgets come back from the kernel. Waits for the kernel to be connected."""
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=timeout
    )
    page.reload()
    page.locator(".jp-NotebookPanel").first.wait_for(timeout=timeout)
    page.wait_for_function(KERNEL_IDLE_JS, timeout=timeout)
