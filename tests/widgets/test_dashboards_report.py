"""The dashboards' "Save report" button: the runs shown, written by ``explorer.report`` in the
background, and the label saying where. Headless; no widget is written off the UI thread
(``ui_thread_only`` in conftest)."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.measure import LocalMeasurer, MeasureResult
from explorer.session import ScheduleSession
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import NewTrial
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import get_workload
from widgets import Dashboards
from widgets._context import Context

MATMUL = get_workload("matmul", M=64, N=64, K=64)
OTHER = get_workload("matmul", M=32, N=32, K=64)
WAIT = 120.0


@pytest.fixture(scope="module")
def candidates():
    rng = np.random.default_rng(2)
    out = {}
    for wl in (MATMUL, OTHER):
        space = KnobSpace(DesignSpace.of(wl, Target.local_cpu()))
        made = [space.materialize(space.random_point(rng)) for _ in range(12)]
        out[wl] = [c for c in made if c is not None][:6]
    return out


@pytest.fixture
def dash():
    ctx = Context(store=":memory:", make_measurer=LocalMeasurer)  # never started here
    ctx.set_session(ScheduleSession(MATMUL, ctx.target))
    d = Dashboards(ctx, refresh_secs=0.1)
    yield d
    d.close()
    ctx.close()


def _add_run(ctx, cands, strategy, latencies_ms):
    run = ctx.store.create_run(cands[0].workload, cands[0].target, strategy, settings={"k": 7})
    trials = [
        NewTrial(c, MeasureResult(MeasureStatus.OK, (ms / 1e3,), flops=c.workload.flops()))
        for c, ms in zip(cands, latencies_ms, strict=False)
    ]
    ctx.store.add_trials(run.id, trials)
    ctx.store.finish_run(run.id)
    return run


def test_save_report_writes_the_runs_shown_and_says_where(dash, candidates, tmp_path):
    shown = _add_run(dash.ctx, candidates[MATMUL], "random", [3.0, 1.0, 2.0, 4.0])
    _add_run(dash.ctx, candidates[OTHER], "random", [1.0, 2.0])  # another workload: not shown
    dash.refresh()
    out = tmp_path / "shared.html"
    dash.report_name.value = str(out)
    dash.report_button.click()
    job = dash._report_jobs.current
    assert job is not None and job.wait(WAIT), "the report was not written in time"
    assert job.exception is None, job.exception
    assert dash.report_status.value.startswith(f"Wrote {out} (")
    assert dash.report_status.value.endswith("MB, 1 run)")
    assert not dash.report_button.disabled
    page = out.read_text()
    assert MATMUL.key() in page and OTHER.key() not in page
    assert f'<tr id="run-{shown.id}">' in page and "T.prim_func" in page
    assert 'class="plotly-graph-div"' in page


def test_save_report_says_what_is_missing(dash, candidates, tmp_path):
    assert dash.save_report(str(tmp_path / "r.html")) is None
    assert dash.report_status.value == "No runs to report yet."
    _add_run(dash.ctx, candidates[MATMUL], "random", [1.0])
    assert dash.save_report("  ") is None
    assert dash.report_status.value == "Give the report a file name."
    assert list(tmp_path.iterdir()) == []


def test_a_report_that_cannot_be_written_is_one_sentence(dash, candidates, tmp_path):
    _add_run(dash.ctx, candidates[MATMUL], "random", [1.0, 2.0])
    dest = tmp_path / "missing" / "r.html"
    job = dash.save_report(str(dest))
    assert job is not None and job.wait(WAIT)
    assert dash.report_status.value == f"Could not write {dest}: No such file or directory"
    assert not dash.report_button.disabled
