"""Figure factories: structure only (trace count, lengths, axis titles, legend names)."""

from __future__ import annotations

import math
import re

import numpy as np
import plotly.graph_objects as go
import pytest

from explorer import _plots_knobs, plots
from explorer._figures import log_axis
from explorer.analysis import (
    TrialTable,
    convergence_info,
    knob_effects_info,
    predicted_vs_measured_info,
    strategy_comparison_info,
)
from explorer.measure import Candidate, MeasureResult
from explorer.plots import (
    make_convergence_figure,
    make_knob_effects_figure,
    make_predicted_vs_measured_figure,
    make_strategy_comparison_figure,
    update_convergence_figure,
    update_knob_effects_figure,
    update_predicted_vs_measured_figure,
    update_strategy_comparison_figure,
)
from explorer.search import STRATEGIES, capabilities
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import NewTrial, get_store
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

TRACES_PER_GROUP = 8  # (band low, band high, runs, median) x (vs trials, vs seconds)


@pytest.fixture(scope="module")
def space() -> KnobSpace:
    return KnobSpace(DesignSpace.of(get_workload("matmul", M=64, N=64, K=64), Target.local_cpu()))


@pytest.fixture(scope="module")
def candidates(space: KnobSpace) -> list[Candidate]:
    rng = np.random.default_rng(3)
    out = [space.materialize(space.random_point(rng)) for _ in range(40)]
    return [c for c in out if c is not None]


@pytest.fixture
def store():
    s = get_store(":memory:")
    yield s
    s.close()


def heading(fig) -> str:
    """A figure's title and its subtitle, as one line of text."""
    title = fig.layout.title
    return f"{title.text} {title.subtitle.text or ''}".replace("<br>", " ")


def fill(store, candidates, strategy: str, latencies_ms, *, predicted=True):
    c0 = candidates[0]
    run = store.create_run(c0.workload, c0.target, strategy)
    trials = []
    for i, ms in enumerate(latencies_ms):
        c = candidates[i % len(candidates)]
        if ms is None:
            res = MeasureResult(MeasureStatus.RUN_ERROR, error_msg="crashed")
        else:
            res = MeasureResult(MeasureStatus.OK, (ms / 1e3,), flops=c.workload.flops())
        pred = {"xgb-rank": -(ms or 0.0), "static": float(i % 5)} if predicted else {}
        trials.append(NewTrial(c, res, pred))
    records = store.add_trials(run.id, trials)
    store.finish_run(run.id)
    return records


@pytest.fixture
def filled(store, candidates):
    rng = np.random.default_rng(0)
    records = []
    for strategy in ("random", "random", "autotvm"):
        lat = list(rng.uniform(1.0, 5.0, 20))
        lat[3] = None
        records += fill(store, candidates, strategy, lat)
    return records


def test_convergence_figure(store, filled):
    info = convergence_info(store)
    fig = make_convergence_figure(info)
    assert type(fig) is go.Figure  # no widget: the report and scripts need plotly alone
    assert len(fig.data) == TRACES_PER_GROUP * 2
    assert fig.layout.xaxis.title.text == "trials"
    assert fig.layout.xaxis2.title.text == "wall-clock seconds"
    assert fig.layout.yaxis.title.text == "GFLOPS"
    medians = [t for t in fig.data if t.meta.startswith("median|") and t.showlegend]
    assert [t.name for t in medians] == ["random: median of 2 runs", "autotvm: median of 1 run"]
    runs = next(t for t in fig.data if t.meta == "runs|random|trials")
    group = info.groups[0]
    # Each run: its improvements, its end point, then a None separator.
    assert len(runs.x) == len(runs.y) == sum(len(r.seqs) + 2 for r in group.runs)
    run0 = group.runs[0]
    assert list(runs.x[: len(run0.trials)]) == list(run0.trials)
    assert list(runs.customdata[0]) == [run0.run_id, run0.seqs[0]]
    median = next(t for t in fig.data if t.meta == "median|random|trials")
    assert len(median.x) == len(median.y) <= len(group.by_trials.x)

    # Same groups: updated in place; fewer groups: traces replaced.
    before = fig.data[0]
    update_convergence_figure(fig, convergence_info(store, metric="latency_ms"))
    assert fig.data[0] is before
    assert fig.layout.yaxis.title.text == "latency (ms)" and fig.layout.yaxis.type == "log"
    update_convergence_figure(fig, convergence_info(store, strategies=["autotvm"]))
    assert len(fig.data) == TRACES_PER_GROUP


def test_convergence_figure_when_empty(store):
    fig = make_convergence_figure(convergence_info(store))
    assert len(fig.data) == 0
    assert any("No search runs" in a.text for a in fig.layout.annotations)


def test_predicted_vs_measured_figure(filled):
    info = predicted_vs_measured_info(filled)
    fig = make_predicted_vs_measured_figure(info)
    assert len(fig.data) == 2 and all(isinstance(t, go.Scattergl) for t in fig.data)
    for trace, model in zip(fig.data, info.models, strict=True):
        assert trace.name.startswith(model.model)
        assert f"Spearman {model.spearman:.2f}" in trace.name
        assert f"Kendall {model.kendall:.2f}" in trace.name
        assert "3 failed" in trace.name
        assert len(trace.x) == len(trace.y) == len(trace.customdata) == model.num_points
        assert list(trace.customdata) == list(model.trial_ids)
    assert fig.layout.xaxis.title.text.startswith("predicted rank")
    assert fig.layout.yaxis.title.text == "measured latency (ms)"
    title = heading(fig)
    assert "60 of 60 trials have predictions from static, xgb-rank; 3 failed" in title
    # Padded axes: no point on an edge; a few round log ticks, never every digit of a decade.
    lo, hi = fig.layout.xaxis.range
    assert lo < 0 and hi > 1
    lat = [v for m in info.models for v in m.latency_ms]
    ylo, yhi = fig.layout.yaxis.range
    assert 10**ylo < min(lat) and 10**yhi > max(lat)
    ticks = fig.layout.yaxis.tickvals
    assert 2 <= len(ticks) <= 7 and all(10**ylo <= t <= 10**yhi for t in ticks)
    assert list(fig.layout.yaxis.ticktext) == [f"{t:.4g}" for t in ticks]

    capped = predicted_vs_measured_info(TrialTable.from_records(filled), max_points=7)
    update_predicted_vs_measured_figure(fig, capped)
    assert [len(t.x) for t in fig.data] == [7, 7]
    assert "showing 14 points" in heading(fig)
    update_predicted_vs_measured_figure(fig, predicted_vs_measured_info([]))
    assert len(fig.data) == 0 and "No predictions yet" in fig.layout.annotations[-1].text


@pytest.mark.parametrize(
    "lo_ms, hi_ms", [(1.7, 1.7), (2.0, 2.4), (0.08, 0.5), (0.05, 0.7), (0.2, 20), (1e-3, 1e3)]
)
def test_log_ticks_are_few_and_spread(lo_ms, hi_ms):
    axis = log_axis("yaxis", [lo_ms, hi_ms])
    lo, hi = axis["yaxis.range"]
    assert lo < math.log10(lo_ms) and hi > math.log10(hi_ms)
    ticks = axis["yaxis.tickvals"]
    assert 3 <= len(ticks) <= 7, ticks
    logs = [math.log10(t) for t in ticks]
    assert all(lo <= v <= hi for v in logs) and logs == sorted(logs)
    # Never crowded: neighbours at least a 25th of the axis apart (~12 px on a 300 px axis).
    assert min(b - a for a, b in zip(logs, logs[1:], strict=False)) >= (hi - lo) / 25


def test_predicted_vs_measured_says_how_many_trials_have_predictions(store, candidates):
    # A search without a cost model (random) stores no predictions; one manual measurement did.
    records = fill(store, candidates, "random", [3.0, 2.0, 4.0, 2.5], predicted=False)
    records += fill(store, candidates[5:], "manual", [2.2])
    info = predicted_vs_measured_info(records)
    fig = make_predicted_vs_measured_figure(info)
    assert "1 of 5 trials have predictions from static, xgb-rank" in heading(fig)
    assert [len(t.x) for t in fig.data] == [1, 1]
    assert not [a for a in fig.layout.annotations if a.name == "empty"]
    lo, hi = fig.layout.xaxis.range
    assert lo < 0 < 1 < hi and list(fig.data[0].x) == [1.0]  # the single point is inside
    ylo, yhi = fig.layout.yaxis.range
    assert ylo < math.log10(2.2) < yhi

    none = make_predicted_vs_measured_figure(predicted_vs_measured_info(records[:4]))
    assert len(none.data) == 0
    assert "0 of 4 trials have predictions" in heading(none)
    (note,) = [a for a in none.layout.annotations if a.name == "empty"]
    assert note.text.startswith("No predictions yet") and "autotvm" in note.text


def test_knob_axes_label_a_few_spread_values():
    codes = [0, 1, 2, 3, 5, 8, 9, 30, 31, 39]
    labels = [f"{i}x{40 - i}" for i in range(40)]
    ticks = _plots_knobs._ticks(codes, labels)
    vals = ticks["tickvals"]
    assert len(vals) <= _plots_knobs.MAX_TICKS and vals[0] == 0
    assert min(b - a for a, b in zip(vals, vals[1:], strict=False)) >= 39 / (
        _plots_knobs.MAX_TICKS - 1
    )
    assert ticks["ticktext"] == [labels[v] for v in vals]
    assert set(vals) <= set(codes)  # only values that were tried are labelled
    assert _plots_knobs._ticks([0, 1, 2], ["a", "b", "c"])["tickvals"] == [0, 1, 2]


def test_strategy_comparison_figure(store, filled):
    info = strategy_comparison_info(store)
    fig = make_strategy_comparison_figure(info)
    assert [t.type for t in fig.data] == ["box", "box"]
    assert [t.name for t in fig.data] == ["random", "autotvm"]
    assert len(fig.data[0].y) == 2 and len(fig.data[1].y) == 1
    assert "first 20 trials" in heading(fig)
    assert fig.layout.yaxis.title.text == "GFLOPS"
    update_strategy_comparison_figure(fig, strategy_comparison_info(store, budget=3))
    assert "first 3 trials" in heading(fig)


def test_knob_effects_figure(filled, space):
    info = knob_effects_info(filled, space, max_lines=25)
    fig = make_knob_effects_figure(info)
    parcoords, bars = fig.data
    assert parcoords.type == "parcoords" and bars.type == "bar"
    dims = parcoords.dimensions
    assert len(dims) == min(len(info.knobs), _plots_knobs.MAX_PARCOORDS_KNOBS) + 1
    assert dims[-1].label == "latency (ms)"
    assert all(len(d.values) == 25 for d in dims)
    assert dims[0].label.startswith(info.knobs[0].label)
    assert list(bars.y) == [k.label for k in info.knobs]
    assert len(parcoords.line.color) == 25
    assert "57 successful trials" in heading(fig)
    assert "3 failed" in heading(fig)

    update_knob_effects_figure(fig, knob_effects_info(filled[:10], space))
    assert all(len(d.values) == 9 for d in fig.data[0].dimensions)


def test_on_point_click_registers_on_matching_traces(filled):
    fig = make_predicted_vs_measured_figure(predicted_vs_measured_info(filled))
    plots.on_point_click(fig, "pvm|", lambda *a: None)
    assert all(t._click_callbacks for t in fig.data)


def test_long_headings_wrap_into_the_margin_they_get() -> None:
    """Issue 10: titles overlapped their subtitles, the toolbar covered them, and long ones
    were cut off ("1 shorter runs left out, re-measuremen...")."""
    from explorer._figures import HEADER, WRAP, heading

    short = heading("Title", ["one line"])
    long = heading("Title", ["word " * 60, "more"], extra=24)
    lines = long["title.subtitle.text"].split("<br>")
    assert len(lines) >= 4 and all(len(line) <= WRAP for line in lines)
    assert " ".join(lines).split() == ("word " * 60 + "more").split()  # nothing lost
    assert long["margin.t"] - short["margin.t"] >= 17 * (len(lines) - 1) + 24
    assert HEADER["modebar"]["orientation"] == "v"  # off the heading
    assert HEADER["title"]["yref"] == "container" and HEADER["title"]["yanchor"] == "top"


def test_the_empty_predictions_note_follows_the_strategies_declarations():
    """Issue 21: the empty plot said droplet records predictions (it stores none): the note is
    read from each strategy's declared capabilities."""
    recorded, rest = plots.NO_PREDICTIONS.split(";")
    for name in STRATEGIES:
        half = recorded if capabilities(name).takes_cost_model else rest
        other = rest if half is recorded else recorded
        word = rf"(?<![\w+]){re.escape(name)}(?![\w+])"  # droplet is not evolutionary+droplet
        assert re.search(word, half) and not re.search(word, other), (name, plots.NO_PREDICTIONS)


def test_the_race_figure_leaves_room_around_its_points_and_labels_its_ticks_in_full():
    """The helper's screenshot: the log axis fitted to the lines exactly (half tick labels at
    its edges, the last race's point half hidden on the right) and labelled 0.5 and 0.2 as
    "5" and "2"."""
    from explorer._plots_model import make_model_race_figure
    from explorer.analysis import ModelRaceInfo, RacePoint

    points = (RacePoint(1, 24, 0.085, 0.0499, 1.75), RacePoint(2, 56, 0.087, 0.0499, 1.75))
    info = ModelRaceInfo(
        "tinynb",
        (("random/seed0/gradient", points), ("database", (RacePoint(3, 60, 0.06, 0.0499, 1.75),))),
    )
    fig = make_model_race_figure(info)
    lo, hi = fig.layout.yaxis.range  # multiples of ONNX Runtime: 1 (its line) to 35 (untuned)
    assert lo < math.log10(0.085 / 0.0499) < math.log10(1.75 / 0.0499) < hi and lo < 0
    assert list(fig.layout.yaxis.ticktext) == [f"{t:.4g}" for t in fig.layout.yaxis.tickvals]
    assert "20" in fig.layout.yaxis.ticktext and "2" in fig.layout.yaxis.ticktext
    x_lo, x_hi = fig.layout.xaxis.range
    assert x_lo < 0 and x_hi > 60


def test_a_race_on_a_slower_machine_draws_at_the_height_of_its_multiple_of_onnx_runtime():
    """A new user's five back-to-back races of one tiny tune read the tuned network at 56 and
    75-82 µs (ONNX Runtime 38 and 47-50): this VM's host runs 1.3-1.5x slower at times, and the
    plot of times said more trials made the network slower. It plots each race's multiple of
    ONNX Runtime's time in that race: two races of one build at two machine speeds coincide."""
    from explorer._plots_model import make_model_race_figure
    from explorer.analysis import ModelRaceInfo, RacePoint

    quick = RacePoint(1, 40, 0.056, 0.038, 0.9, tune_relax_ms=0.060)
    slow = RacePoint(2, 40, 0.056 * 1.45, 0.038 * 1.45, 0.9 * 1.45, tune_relax_ms=0.060 * 1.45)
    fig = make_model_race_figure(
        ModelRaceInfo("tiny", (("random/seed0/gradient", (quick, slow)),))
    )
    by_name = {trace.name: trace for trace in fig.data}
    tuned = by_name["tuned: random/seed0/gradient"]
    assert tuned.y == pytest.approx((0.056 / 0.038,) * 2)
    assert by_name["TVM's tune_relax, equal trials"].y == pytest.approx((0.060 / 0.038,) * 2)
    assert by_name["ONNX Runtime (1 in each race)"].y == (1.0, 1.0)
    assert by_name["untuned (latest race)"].y == pytest.approx((0.9 / 0.038,) * 2)
    assert "81.2 µs" in tuned.customdata[1][0]  # the race's own times, in the hover text
    assert "1.47x slower than ONNX" in fig.layout.title.subtitle.text
