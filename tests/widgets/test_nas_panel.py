"""The NAS panel, headless: a real search (JAX Fisher Potentials, the real LocalMeasurer, a
SQLite store) on a one-block network, its table and Pareto plot, a click opening a layer in
the editor, Stop, the next Run clearing the last one's results, and the settings it refuses
before anything runs."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence

import pytest
from plotly.callbacks import Points

from explorer.measure import Candidate, LocalMeasurer, Measurer, MeasureResult
from explorer.nas import KINDS as ALL_KINDS
from explorer.nas import Block, Layer, Network
from explorer.storage import RunStatus
from widgets import NasPanel, _ui
from widgets import nas as nas_module
from widgets._context import Context
from widgets._jobs import JobState
from widgets._whole import WholeText, parse_whole
from widgets.explorer import NAS_TAB, Explorer

pytest.importorskip("jax")

WAIT = 300.0  # seconds: JAX compiles the Fisher Potential on a shared 2-core machine
KINDS = ("keep", "group", "bottleneck", "split_group")


def tiny_network() -> Network:
    """A stem and one residual block on a 1x6x6 input: 2 distinct convolutions, scored and
    tuned in seconds."""
    stem = Layer.dense("stem", 1, 4, 6, 6)
    b1 = Block("b1", (Layer.dense("b1.conv1", 4, 4, 6, 6), Layer.dense("b1.conv2", 4, 4, 6, 6)))
    return Network("tiny", 1, 6, 6, stem, (b1,))


class Lent(Measurer):
    """Lends the real measurer to one search; counts ``close`` and can hold every batch."""

    def __init__(self, inner: Measurer, gate: threading.Event | None = None) -> None:
        self.inner, self.gate = inner, gate
        self.closed = 0
        self.batches = 0

    def measure(
        self,
        candidates: Sequence[Candidate],
        *,
        best_secs: float | None = None,
        reference: bool = False,
    ) -> list[MeasureResult]:
        self.batches += 1
        if self.gate is not None:
            assert self.gate.wait(WAIT), "the test never opened the gate"
        return self.inner.measure(candidates, best_secs=best_secs, reference=reference)

    def close(self) -> None:
        self.closed += 1


@pytest.fixture
def make_panel(
    tmp_path, local_measurer: LocalMeasurer
) -> Iterator[Callable[..., tuple[NasPanel, Context, list[Lent]]]]:
    made: list[Context] = []

    def make(gate: threading.Event | None = None) -> tuple[NasPanel, Context, list[Lent]]:
        lent: list[Lent] = []

        def make_measurer() -> Measurer:
            lent.append(Lent(local_measurer, gate))
            return lent[-1]

        ctx = Context(store=str(tmp_path / f"records{len(made)}.db"), make_measurer=make_measurer)
        made.append(ctx)
        panel = NasPanel(ctx, fisher_batch=8)
        panel.add_network("tiny", tiny_network())
        for kind, box in panel.kinds.items():
            box.value = kind in KINDS
        panel.tau.value, panel.samples.value, panel.budget.value = 0.7, "3", "1"
        panel.strategy.value, panel.seed.value = "random", "1"
        return panel, ctx, lent

    yield make
    for ctx in made:
        ctx.close()
        ctx.store.close()


def point_traces(panel: NasPanel) -> dict[str, object]:
    return {t.meta: t for t in panel.figure.data if str(t.meta).startswith("nas|")}


@pytest.mark.timeout(600)
def test_a_search_fills_the_table_and_plot_and_a_click_opens_a_layer(make_panel) -> None:
    panel, ctx, lent = make_panel()
    said: list[str] = []
    panel.status.observe(lambda c: said.append(c["new"]), names="value")
    panel.run_button.click()
    job = panel.job
    assert job is not None and panel.run_button.disabled and not panel.stop_button.disabled
    assert "Fisher Potential" in panel.status.value
    # A second Run while this one runs is refused, visibly, on the note line: the status
    # keeps saying what runs.
    assert panel.run() is None
    assert panel.note.value.startswith("Not started: NAS search is still running")
    assert panel.note.layout.display != "none"
    assert "Fisher Potential" in panel.status.value
    assert job.wait(WAIT) and job.state is JobState.FINISHED, job.exception
    assert panel.note.value == "" and panel.note.layout.display == "none"  # outdated now

    # Step 1. The result: every network, the legal ones timed from stored, finished runs.
    result, info = panel.result, panel.info
    assert result is not None and info is not None and not result.stopped
    assert [p.is_legal for p in info.points] == [True, True, False, True]  # FP 1, .81, .62, 1
    assert all(p.is_timed == p.is_legal for p in info.points)
    runs = ctx.store.runs()
    assert {r.id for r in runs} == {t.run_id for t in result.tunings} and len(runs) == 3
    assert all(r.status is RunStatus.FINISHED for r in runs)
    assert [m.closed for m in lent] == [1]  # the search's own measurer, closed at the end
    assert any(s.startswith("Shape 1/3: conv2d") for s in said)
    assert panel.status.value.startswith("Done: 3 candidates, 2 legal; 3 distinct convolutions")
    assert panel.progress.value == panel.progress.max == 3
    assert panel.progress.bar_style == "success" and not panel.run_button.disabled

    # Step 2. The table: one row per network, in order, with its numbers.
    rows = panel.table.value.split("<tr class='se-nas-row'")[1:]
    assert len(rows) == 4
    assert "original" in rows[0] and "group(4) (1 of 1 blocks)" in rows[1]
    assert "not tuned" in rows[2] and "color:#999" in rows[2]  # illegal: greyed
    assert f"{info.points[1].latency_ms:.4g} ms" in rows[1]
    # Numbers never wrap ("983.4 k" split over two lines at 1280 px): their cells say nowrap.
    cells = rows[1].split("<td ")[1:]
    assert ["white-space:nowrap" in c for c in cells] == [0, 0, 1, 0, 1, 1, 1, 0]

    # Step 3. The plot: each network once, illegal ones in the side pane, the front drawn.
    traces = point_traces(panel)
    shown = sorted(i for t in traces.values() for i in t.customdata)
    assert shown == [0, 1, 2, 3]
    assert list(traces["nas|illegal"].customdata) == [2]
    assert list(traces["nas|illegal"].x) == ["illegal"]
    assert panel.figure.layout.shapes[0].y0 == 0.7
    assert "NAS: tiny" == panel.figure.layout.title.text
    assert panel.figure.layout.xaxis.visible and panel.figure.layout.showlegend
    assert not panel.figure.layout.annotations  # the empty plot's hint is gone

    # Step 4. Clicking the grouped candidate opens its grouped layer's best tuned schedule.
    front = traces["nas|front"]
    k = list(front.customdata).index(1) if 1 in front.customdata else None
    trace = front if k is not None else traces["nas|legal"]
    k = list(trace.customdata).index(1)
    trace._dispatch_on_click(Points(point_inds=[k], trace_index=0), None)
    focus = info.points[1].focus
    assert focus.layer == "b1.conv1" and focus.steps == "group(4)"
    session = ctx.session
    assert session is not None and session.workload == focus.conv.workload()
    assert session.workload.param_dict["groups"] == 4
    notice = panel.notice.value
    assert notice.startswith("Opened candidate 1's layer b1.conv1 [group(4)]")
    assert "its slowest transformed layer" in notice
    # named in its run (issue 21): "trial 3 of run 2", or the run's unscheduled baseline
    assert re.search(r"best schedule \((trial \d+|the unscheduled baseline) of run \d+, ", notice)

    # Step 5. The illegal candidate (a bottleneck) was not tuned as a network, but its second
    # layer now reads 1 channel: the stem's shape, tuned. That layer opens, with its best,
    # and the hover and the notice say it was tuned in the stem's run, not for this network.
    illegal = traces["nas|illegal"]
    illegal._dispatch_on_click(Points(point_inds=[0], trace_index=0), None)
    focus = info.points[2].focus
    assert (focus.layer, focus.steps) == ("b1.conv2", "inputs 4->1")
    stem = result.tuning_of(tiny_network().stem.pieces[0].conv)
    assert stem is not None and focus.run_id == stem.run_id
    assert ctx.session is not session and ctx.session.workload == focus.conv.workload()
    hover = info.points[2].hover
    assert hover.count("illegal") == 1 and "slowest transformed layer with a tuned shape" in hover
    assert hover.endswith(
        f"not tuned for this network; the same shape was tuned in run {stem.run_id}"
    )
    notice = panel.notice.value
    assert notice.startswith("Opened candidate 2's layer b1.conv2 [inputs 4->1]")
    assert f"the best schedule of run {stem.run_id}, which tuned the same shape" in notice
    assert notice.endswith("this network itself was not tuned.")

    # Step 6. The next Run clears this search's table, plot and click notice at once: they
    # would pass for the new search's ("candidate 1" is another network there). Stopped at
    # once, it ends while scoring.
    second = panel.run()
    assert second is not None and panel.result is None and panel.info is None
    assert panel.table.value == "" and panel.notice.value == nas_module.NOTICE
    assert all(len(t.customdata) == 0 for t in point_traces(panel).values())
    layout = panel.figure.layout
    assert not layout.shapes and not layout.xaxis.visible and not layout.showlegend
    assert layout.title.text == "NAS: latency vs Fisher Potential"
    assert [a.text for a in layout.annotations] == [nas_module.RUNNING_PLOT]
    panel.stop()
    assert second.wait(WAIT) and second.state is JobState.CANCELLED, second.exception
    assert panel.status.value.startswith("Stopped:") and not panel.run_button.disabled


@pytest.mark.timeout(600)
def test_stop_ends_the_search_and_shows_the_untimed_networks(make_panel) -> None:
    gate = threading.Event()
    panel, ctx, lent = make_panel(gate)
    # Something else holds the search worker: the NAS waits its turn, and says so.
    hold = threading.Event()
    other = ctx.search_jobs.submit("random search", lambda job: hold.wait(WAIT))
    panel.run_button.click()
    assert panel.job is None and not lent
    assert panel.status.value == (
        "Not started: random search is still running; stop it (or wait) before starting another."
    )
    hold.set()
    assert other.wait(WAIT)

    job = panel.run()
    assert job is not None
    # Run comes back in the same update that writes the results, not before them.
    seen_on_enable: list[tuple[str, str]] = []
    send_state = panel.run_button.send_state

    def watch(key=None):
        if not panel.run_button.disabled:
            seen_on_enable.append((panel.status.value, panel.table.value))
        return send_state(key)

    panel.run_button.send_state = watch
    # Wait for the first shape's tuning to hold on the gate, then Stop.
    assert _ui.wait_for(_when(lambda: bool(lent) and lent[0].batches > 0), WAIT)
    panel.stop_button.click()
    assert job.is_cancelled() and panel.stop_button.disabled
    assert panel.status.value.startswith("Stopping")
    gate.set()
    assert job.wait(WAIT) and job.state is JobState.CANCELLED, job.exception
    info = panel.info
    assert info is not None and info.is_stopped and info.num_untimed >= 1
    # The summary counts the shapes tuned out of those wanted, and names the original apart
    # from the legal candidates it did not time.
    assert (info.num_shapes, info.num_shapes_wanted) == (0, 3)
    assert panel.status.value.startswith(
        "Stopped: 3 candidates, 2 legal; 0 of 3 distinct convolutions tuned before the stop "
        "(0 found in the store);"
    )
    assert panel.status.value.endswith(" Not timed: the original and 2 legal candidates.")
    assert seen_on_enable and all(
        status.startswith("Stopped:") and "se-nas-row" in table for status, table in seen_on_enable
    )
    assert panel.progress.bar_style == "warning"
    assert [m.closed for m in lent] == [1]
    untimed = point_traces(panel)["nas|untimed"]
    assert list(untimed.x) == ["not timed"] * info.num_untimed
    # The grouped candidate's layers were never tuned: its first one opens unscheduled.
    k = list(untimed.customdata).index(1)
    untimed._dispatch_on_click(Points(point_inds=[k], trace_index=0), None)
    focus = info.points[1].focus
    assert focus.run_id is None and focus.reason == "its first transformed layer"
    assert ctx.session is not None and ctx.session.workload == focus.conv.workload()
    assert not ctx.session.snapshot.path  # the unscheduled program
    assert panel.notice.value.endswith(
        "in the editor (Schedule tab): unscheduled (it was not tuned)."
    )


def _when(condition: Callable[[], bool]) -> threading.Event:
    """An event set by a watcher thread once ``condition()`` holds."""
    event = threading.Event()

    def watch() -> None:
        while not condition():
            if event.wait(0.05):
                return
        event.set()

    threading.Thread(target=watch, daemon=True).start()
    return event


@pytest.mark.parametrize(
    "setting, value, message",
    [
        ("tau", -1.0, "Not started: τ must be a finite number >= 0 (got -1.0)."),
        ("samples", "0", "Not started: Samples must be at least 1 candidate (got 0)."),
        ("budget", "0", "Not started: Trials/shape must be at least 1 (got 0)."),
        ("kinds", ("keep",), "Not started: tick at least one transformation (besides keep)"),
        ("width", "0", "Not started: Width must be at least 1 channel (got 0)."),
        # The seed is checked with the rest (it used to fail the job: "expected non-negative").
        ("seed", "-1", "Not started: Seed must be a whole number >= 0 (got -1)."),
        # A decimal is refused, never read as its digits (IntText made 2.5 into 25).
        ("samples", "2.5", "Not started: Samples must be a whole number (got 2.5)."),
        ("width", "4.5", "Not started: Width must be a whole number (got 4.5)."),
        ("budget", "1.5", "Not started: Trials/shape must be a whole number (got 1.5)."),
        ("budget", "2000000", "Not started: Trials/shape must be at most 1000000: a million "),
        ("seed", "one", "Not started: Seed must be a whole number (got one)."),
        ("packages", ("jax", "no_such_nas_module"), "Not started: the NAS search needs "),
    ],
)
def test_bad_settings_are_one_sentence_and_nothing_runs(
    make_panel, monkeypatch, setting, value, message
) -> None:
    panel, ctx, lent = make_panel()
    if setting == "kinds":
        for kind, box in panel.kinds.items():
            box.value = kind in value
    elif setting == "width":
        panel.network.value = "resnet18_cifar"
        assert not panel.width.disabled
        panel.width.value = value
    elif setting == "packages":
        monkeypatch.setattr(nas_module, "NAS_PACKAGES", value)
    else:
        getattr(panel, setting).value = value
    panel.run_button.click()
    assert panel.status.value.startswith(message), panel.status.value
    if setting == "packages":
        assert "no_such_nas_module" in panel.status.value
        assert "pip install 'schedule-explorer[nas]'" in panel.status.value
    assert panel.job is None and not lent and not ctx.store.runs()
    assert not ctx.search_jobs.busy and not panel.run_button.disabled


def test_whole_numbers_are_parsed_never_rounded() -> None:
    # IntText's front end drops a typed "." ("2.5" reached the kernel as 25): the boxes are
    # WholeText (a Text), and parse_whole reads them.
    ctx = Context(store=":memory:")
    try:
        panel = NasPanel(ctx)
        for box in (panel.width, panel.samples, panel.budget, panel.seed):
            assert isinstance(box, WholeText)
    finally:
        ctx.close()
    read = [parse_whole("Samples", t, 1, "at least 1") for t in ("6", " 7 ", "+3", "6.0", 8)]
    assert read == [6, 7, 3, 6, 8]
    assert parse_whole("Samples", "2.5", 1, "x") == "Samples must be a whole number (got 2.5)."
    assert parse_whole("Seed", "1e3", 0, "x") == "Seed must be a whole number (got 1e3)."
    assert parse_whole("Seed", " ", 0, "x") == "Seed must be a whole number (got an empty box)."
    assert parse_whole("Seed", True, 0, "x") == "Seed must be a whole number (got True)."
    assert parse_whole("Seed", "-1", 0, "a whole number >= 0") == (
        "Seed must be a whole number >= 0 (got -1)."
    )


def test_a_new_panel_ticks_every_kind_and_its_empty_plot_has_no_axes() -> None:
    ctx = Context(store=":memory:")
    try:
        panel = NasPanel(ctx)
        # As `explorer nas` samples by default: every kind.
        assert [k for k, box in panel.kinds.items() if box.value] == list(ALL_KINDS)
        # No axes from -1 to 4 around nothing: the hint alone.
        layout = panel.figure.layout
        assert not any(layout[a].visible for a in ("xaxis", "xaxis2", "yaxis", "yaxis2"))
        assert not layout.showlegend
        assert [a.text for a in layout.annotations] == [nas_module.EMPTY_PLOT]
        assert panel.note.value == "" and panel.note.layout.display == "none"
    finally:
        ctx.close()


def test_width_follows_the_network_and_clicks_before_a_search_say_so(make_panel) -> None:
    panel, _ctx, _lent = make_panel()
    panel.network.value = "resnet18_imagenet"
    assert panel.width.disabled and "fixed" in panel.width_note.value
    panel.network.value = "resnet34_cifar"
    assert not panel.width.disabled and panel.width_note.value == ""
    net = panel.selected_network()
    assert isinstance(net, Network) and net.name == "resnet34_cifar(width=8)"
    assert panel.open_point(0) is None and "run a search first" in panel.notice.value
    panel.stop_button.click()  # disabled in a browser; a call still must not raise
    assert panel.status.value == "No NAS search is running."


def test_the_explorer_has_a_nas_tab_after_the_others() -> None:
    ex = Explorer(store=":memory:")
    try:
        nas = ex.nas  # built on first use, into its tab
        assert ex.tabs.titles[NAS_TAB] == "NAS" and ex.tabs.children[NAS_TAB].children == (
            nas.widget,
        )
        assert ex.tabs.titles[:4] == ("Schedule", "Search", "Dashboards", "Fleet")
        ex.tabs.selected_index = NAS_TAB
        assert ex.nas.on_open is not None
        ex.nas.on_open(ex.session)
        assert ex.tabs.selected_index == 0
    finally:
        ex.close()
