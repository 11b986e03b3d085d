"""The HTML report (``explorer report``) opened from disk in headless Chromium: every plotly
figure is drawn, the best schedule's TVMScript is on the page, the browser reports no error, and
nothing is fetched from the network (the file is self-contained). And the dashboards' "Save
report" button in a real JupyterLab: clicked, it writes the file the label names."""

from __future__ import annotations

import pytest
from browser_helpers import (
    assert_page_clean,
    full_shot,
    open_notebook,
    reveal,
    run_all_cells,
    shot,
    write_notebook,
)
from playwright.sync_api import expect

from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.testing.recordings import TINY, open_recording, recorded_trials, replay_measurer
from explorer.tuner import Tuner

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A report of two real searches (autotvm, with predictions, and random) answered by the
    shipped recording, written by the command as a user would."""
    from explorer.cli import main

    base = tmp_path_factory.mktemp("report-browser")
    recording = open_recording(base)
    target = recorded_trials(recording, TINY)[0].candidate.target
    db = base / "records.db"
    with get_store(db) as store:
        autotvm = make_strategy("autotvm", plan_size=8, parallel_size=16, n_iter=40, early_stop=10)
        for strategy in (autotvm, "random"):
            Tuner(measurer=replay_measurer(recording, TINY), store=store, batch_size=4).run(
                TINY, target, strategy, max_trials=24, seed=3
            )
    recording.close()
    out = base / "report.html"
    assert main(["report", "--db", str(db), "-o", str(out)]) == 0
    return out


FIGURES_JS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(gd => ({
    id: gd.id,
    traces: (gd.data || []).length,
    drawn: (gd._fullData || []).filter(t => t.visible !== false).length,
    svg: gd.querySelectorAll('.main-svg').length,
    marks: gd.querySelectorAll('.trace, .parcoords-lines, .bars .point').length,
    canvases: gd.querySelectorAll('canvas').length,
    title: (gd.querySelector('.gtitle') || {}).textContent || '',
    height: gd.getBoundingClientRect().height,
}))"""


def test_the_report_draws_every_plot_offline_without_errors(report, page):
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report.as_uri())
    expect(page.locator(".js-plotly-plot .main-svg").first).to_be_attached()
    page.wait_for_function(
        "() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".every(gd => gd._fullLayout && gd.querySelector('.main-svg'))"
    )
    figures = page.evaluate(FIGURES_JS)
    titles = [f["title"] for f in figures]
    # convergence, strategy comparison, predicted vs measured (autotvm's), knob effects
    assert len(figures) == 4, titles
    assert any(t.startswith("Best so far") for t in titles), titles
    assert any(t.startswith("Predicted vs measured") for t in titles), titles
    for f in figures:
        assert f["traces"] > 0 and f["drawn"] == f["traces"], f
        assert f["svg"] >= 1 and f["height"] > 200, f
        assert f["marks"] > 0 or f["canvases"] > 0, f  # SVG traces, or WebGL (Scattergl)

    script = page.locator("article.schedule pre.script").first
    expect(script).to_be_visible()
    expect(script).to_contain_text("T.prim_func")
    expect(page.locator("pre.run-settings").first).to_contain_text('"seed": 3')

    assert not page.log.page_errors, page.log.page_errors
    assert not page.log.console_errors, page.log.console_errors
    fetched = [u for u in requests if not u.startswith(("file:", "data:", "blob:"))]
    assert not fetched, fetched  # self-contained: nothing from the network
    shot(page, "report_top")
    shot(page, "report_convergence", page.locator(".js-plotly-plot").first)
    full_shot(page, "report_full")


# The dashboards of the shipped recording's TINY workload (a private copy of it), in a notebook.
DASHBOARD_CELLS = [
    """from explorer.session import ScheduleSession
from explorer.testing.recordings import TINY, open_recording, recorded_trials
from widgets import Dashboards
from widgets._context import Context""",
    # In the lab's own root (a pytest temporary folder): the kernel may be killed at the end,
    # so open_recording()'s own clean-up at exit would not run.
    """import tempfile
recording = open_recording(tempfile.mkdtemp(dir="."))
ctx = Context(store=recording)
ctx.set_session(ScheduleSession(TINY, recorded_trials(recording, TINY)[0].candidate.target))
dash = Dashboards(ctx)
dash""",
]


def test_save_report_in_jupyterlab_writes_the_file_the_label_names(jupyter_lab, page):
    name = write_notebook(jupyter_lab.root, "report_button.ipynb", DASHBOARD_CELLS)
    try:
        open_notebook(page, jupyter_lab.lab_url(name))
        run_all_cells(page)
        dashboards = page.locator(".se-dashboards").first
        expect(dashboards.locator(".se-convergence .main-svg").first).to_be_attached(
            timeout=60_000
        )
        field = dashboards.locator(".se-report-name input")
        reveal(page, field)
        field.fill("shared report.html")
        field.press("Enter")
        dashboards.locator(".se-save-report").click()
        written = jupyter_lab.root / "shared report.html"
        status = dashboards.locator(".se-report-status")
        expect(status).to_contain_text(f"Wrote {written} (", timeout=120_000)
        shot(page, "report_button_saved", dashboards.locator(".se-save-report").locator(".."))
        shot(page, "report_button_dashboards")
        assert_page_clean(page, page.log, "after Save report")
        assert "T.prim_func" in written.read_text()
    finally:
        jupyter_lab.shutdown_sessions(name)

    page.goto(written.as_uri())  # what was written opens, its plots drawn
    # the recording's run: best so far, strategies compared, knob effects (no predictions)
    plots = page.locator(".js-plotly-plot")
    expect(plots).to_have_count(3)
    for i in range(3):
        expect(plots.nth(i).locator(".main-svg").first).to_be_attached()


@pytest.fixture(scope="module")
def conv2d_report(tmp_path_factory):
    """A report of a convolution (a long workload key) measured once, for real."""
    from explorer.cli import main
    from explorer.measure import LocalMeasurer, MeasureConfig
    from explorer.session import ScheduleSession
    from explorer.storage import NewTrial
    from explorer.target import Target
    from explorer.workloads import get_workload

    base = tmp_path_factory.mktemp("report-conv2d")
    db = base / "records.db"
    conv = get_workload(
        "conv2d", N=1, CI=4, H=8, W=8, CO=4, KH=3, KW=3, stride=1, padding=1, dilation=1
    )
    target = Target.local_cpu()
    candidate = ScheduleSession(conv, target).candidate()
    with get_store(db) as store, LocalMeasurer(MeasureConfig(max_spread=float("inf"))) as m:
        (result,) = m.measure([candidate])
        run = store.create_run(conv, target, "manual")
        store.add_trials(run.id, [NewTrial(candidate, result)])
        store.finish_run(run.id)
    out = base / "report.html"
    assert main(["report", "--db", str(db), "-o", str(out)]) == 0
    return out


# The page's width against the window's, and whatever sticks out past the window's right edge
# (plotly's own hidden elements aside).
SIDEWAYS_JS = """() => {
  const page = document.documentElement;
  const out = [];
  if (page.scrollWidth > page.clientWidth)
    out.push(`the page is ${page.scrollWidth} px wide in a ${page.clientWidth} px window`);
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('.js-plotly-plot')) continue;
    const r = el.getBoundingClientRect();
    if (r.width && r.right > page.clientWidth + 1)
      out.push(`<${el.tagName.toLowerCase()}> ends at ${Math.round(r.right)} px: ` +
               (el.textContent || '').trim().slice(0, 60));
  }
  return out.slice(0, 10);
}"""


@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080)])
def test_the_report_fits_the_window_without_scrolling_sideways(conv2d_report, page, size):
    """Issue 21: at 1280 the report scrolled sideways (a convolution's key in its heading)."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(conv2d_report.as_uri())
    expect(page.locator(".js-plotly-plot .main-svg").first).to_be_attached()
    expect(page.locator("h2").first).to_contain_text("conv2d(CI=4,CO=4")
    assert page.evaluate(SIDEWAYS_JS) == []
    shot(page, f"report_conv2d_{size[0]}")
    assert not page.log.page_errors and not page.log.console_errors
