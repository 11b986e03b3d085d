"""``nas_front_info`` on a ``NasResult`` built by hand (no JAX, no TVM): display units, the
front fastest first, the plan summaries, the layer a click opens, and the Pareto figure's
structure."""

from __future__ import annotations

from dataclasses import replace

import pytest

from explorer.analysis import (
    NasFrontInfo,
    format_count,
    format_ms,
    layer_focus,
    nas_front_info,
    plan_summary,
)
from explorer.nas import (
    Block,
    Bottleneck,
    ConvTuning,
    FisherPotential,
    Group,
    Layer,
    NasCandidate,
    NasPoint,
    NasResult,
    NasSample,
    Network,
    SplitGroup,
    pareto_front,
)


def small_network() -> Network:
    stem = Layer.dense("stem", 3, 8, 8, 8)
    b1 = Block("b1", (Layer.dense("b1.conv1", 8, 8, 8, 8), Layer.dense("b1.conv2", 8, 8, 8, 8)))
    b2 = Block(
        "b2",
        (Layer.dense("b2.conv1", 8, 16, 8, 8, 3, 2), Layer.dense("b2.conv2", 16, 16, 4, 4)),
        Layer.dense("b2.shortcut", 8, 16, 8, 8, 1, 2),
    )
    return Network("small", 3, 8, 8, stem, (b1, b2))


def fp(total: float) -> FisherPotential:
    return FisherPotential(total, (total,), 2.3, 16, 0)


KEEP = ((), ())  # a block kept as it is (what the sampler draws for "keep")


def candidate(net: Network, plans, ratio: float, legal: bool) -> NasCandidate:
    transformed = net.transform(plans)
    assert isinstance(transformed, Network)
    return NasCandidate(tuple(plans), transformed, fp(ratio), ratio, legal, 0.1)


def tune_all(networks, secs_of, cached=()) -> dict:
    """Every distinct convolution of ``networks`` with ``secs_of(conv)`` as its tuned latency
    (``None``: no success); run ids counted from 1."""
    convs = dict.fromkeys(c for n in networks for c in n.conv_counts())
    return {c: ConvTuning(c, i, secs_of(c), c in cached) for i, c in enumerate(convs, start=1)}


def latency(net: Network, tunings) -> float | None:
    total = 0.0
    for conv, n in net.conv_counts().items():
        t = tunings.get(conv)
        if t is None or t.best_secs is None:
            return None
        total += n * t.best_secs
    return total


def build_result(*, stopped: bool = False) -> tuple[NasResult, dict]:
    net = small_network()
    grouped = candidate(net, [((Group(4),), (Group(4),)), KEEP], 1.2, True)
    split = candidate(net, [KEEP, ((SplitGroup((2, 4)),), (SplitGroup((2, 4)),))], 1.05, True)
    narrow = candidate(
        net, [((Bottleneck(2), Group(2)), (Group(2),)), ((Group(8),), (Group(8),))], 0.4, False
    )
    kept = candidate(net, [KEEP, KEEP], 1.0, True)
    # Latency proportional to MACs (1 ns per MAC), so fewer MACs is faster.
    tunings = tune_all(
        [net, grouped.network, split.network, kept.network],
        lambda c: c.macs * 1e-9,
        cached={net.stem.pieces[0].conv},
    )
    if stopped:  # the split candidate's shapes were never tuned
        tunings = {
            c: t
            for c, t in tunings.items()
            if c in net.conv_counts() or c in grouped.network.conv_counts()
        }
    sample = NasSample(net, fp(1.0), 0.9, (grouped, split, narrow, kept), ())
    points = [NasPoint("original", net, 1.0, True, latency(net, tunings))]
    for i, c in enumerate(sample.candidates, start=1):
        secs = latency(c.network, tunings) if c.is_legal else None
        points.append(NasPoint(f"candidate {i}", c.network, c.fisher_ratio, c.is_legal, secs, c))
    # The front as nas_search marks it, from the legal timed points.
    ranked = [p for p in points if p.is_legal and p.latency_secs is not None]
    keep = pareto_front([(p.latency_secs, p.fisher_ratio, p.params) for p in ranked])
    front = {p.name for p, k in zip(ranked, keep, strict=True) if k}
    points = [
        NasPoint(
            p.name,
            p.network,
            p.fisher_ratio,
            p.is_legal,
            p.latency_secs,
            p.candidate,
            p.name in front,
        )
        for p in points
    ]
    result = NasResult(
        sample, tuple(tunings.values()), tuple(points), "random", 2, 1.5, 3.0, stopped
    )
    return result, tunings


def test_points_are_in_display_units_with_legality_and_the_front() -> None:
    result, tunings = build_result()
    info = nas_front_info(result)
    assert isinstance(info, NasFrontInfo)
    assert info.network == "small" and info.tau == 0.9 and info.strategy == "random"
    assert info.budget == 2 and info.num_candidates == 4 and info.num_illegal == 1
    assert info.num_untimed == 0 and not info.is_stopped
    assert info.num_shapes == info.num_shapes_wanted == len(tunings) and info.num_cached == 1
    assert [p.name for p in info.points] == [p.name for p in result.points]
    for p, q in zip(info.points, result.points, strict=True):
        assert p.macs == q.macs and p.params == q.params and p.is_legal == q.is_legal
        assert p.fisher_ratio == q.fisher_ratio and p.is_on_front == q.is_on_front
        if q.latency_secs is None:
            assert p.latency_ms is None and not p.is_timed
        else:
            assert p.latency_ms == pytest.approx(q.latency_secs * 1e3)
    illegal = info.points[3]
    assert not illegal.is_legal and illegal.latency_ms is None and not illegal.is_on_front
    assert info.points[0].is_original and not info.points[1].is_original
    # The front is listed fastest first, and the fastest legal network is on it.
    lat = [info.points[i].latency_ms for i in info.front]
    assert lat == sorted(lat) and len(info.front) == sum(p.is_on_front for p in info.points)
    assert info.fastest == 1 and info.front[0] == 1  # the grouped candidate: fewest MACs
    # The staircase: the front's networks none beats on latency and FP alone, fastest first
    # (the others are on the front by their parameters only).
    line = [info.points[i] for i in info.front_line]
    assert set(info.front_line) <= set(info.front) and line[0].index == 1
    assert [p.latency_ms for p in line] == sorted(p.latency_ms for p in line)
    for i in set(info.front) - set(info.front_line):
        p = info.points[i]
        assert any(q.latency_ms <= p.latency_ms and q.fisher_ratio >= p.fisher_ratio for q in line)
    assert info.speedup == pytest.approx(result.speedup)
    # Hover text: name, latency, verdict, counts, the changes and what a click opens.
    hover = info.points[1].hover
    assert "<b>candidate 1</b> (on the Pareto front)" in hover and "legal" in hover
    assert "group(4)" in hover and "click: b1.conv" in hover
    # The illegal network was never tuned: said once, and "illegal" once.
    assert "<br>not tuned, FP x0.400 (illegal)<br>" in illegal.hover
    assert illegal.hover.count("illegal") == 1
    assert illegal.hover.endswith(
        "click: b1.conv1 (bottleneck(2) &gt; group(2)), its first transformed layer"
        "<br>not tuned for this network: a click opens it unscheduled"
    )


def test_plan_summaries_count_changed_blocks() -> None:
    result, _ = build_result()
    summaries = [plan_summary(p) for p in result.points]
    assert summaries[0] == "original"
    assert summaries[1] == "group(4) (1 of 2 blocks)"
    assert summaries[2] == "split_group(2,4) (1 of 2 blocks)"
    assert summaries[3] == "bottleneck(2) + group(2), group(8) (2 of 2 blocks)"
    assert summaries[4] == "unchanged (every block kept)"
    assert nas_front_info(result).points[3].changes == summaries[3]


def test_a_click_opens_the_slowest_transformed_layer_or_the_first_when_untuned() -> None:
    result, tunings = build_result()
    grouped, split, narrow, kept = result.points[1:]
    # The grouped candidate: both b1 convolutions are grouped and equally slow: the first.
    focus = layer_focus(grouped, tunings)
    assert focus.layer == "b1.conv1" and focus.steps == "group(4)"
    assert focus.reason == "its slowest transformed layer"
    assert focus.conv.groups == 4 and focus.run_id == tunings[focus.conv].run_id
    assert focus.latency_ms == pytest.approx(tunings[focus.conv].best_secs * 1e3)
    # The split layers have two pieces of different groups: the slower (denser) piece opens.
    focus = layer_focus(split, tunings)
    assert focus.layer.startswith("b2.conv") and focus.conv.groups == 2
    layer = next(la for la in split.network.layers() if la.name == focus.layer)
    assert focus.latency_ms == pytest.approx(
        sum(n * tunings[c].best_secs for c, n in layer.conv_counts().items()) * 1e3
    )
    # Illegal: never tuned, so its first transformed layer, unscheduled.
    focus = layer_focus(narrow, tunings)
    assert focus.layer == "b1.conv1" and focus.steps == "bottleneck(2) > group(2)"
    assert focus.reason == "its first transformed layer"
    assert focus.run_id is None and focus.latency_ms is None
    # Nothing transformed: the slowest layer of all.
    focus = layer_focus(result.points[0], tunings)
    assert focus.reason == "its slowest layer" and focus.steps == "dense"
    slowest = max(
        result.points[0].network.layers(),
        key=lambda la: sum(n * tunings[c].best_secs for c, n in la.conv_counts().items()),
    )
    assert focus.layer == slowest.name == "b1.conv1"  # b1.conv2 and b2.conv2 tie with it
    assert layer_focus(kept, tunings).layer == slowest.name


def test_a_stopped_search_leaves_legal_networks_untimed() -> None:
    result, tunings = build_result(stopped=True)
    info = nas_front_info(result)
    assert info.is_stopped and info.num_untimed == 1
    # What the search meant to tune: the original's and the legal candidates' convolutions.
    assert info.num_shapes == len(tunings) < info.num_shapes_wanted == len(build_result()[1])
    split = info.points[2]
    assert split.is_legal and not split.is_timed and not split.is_on_front
    assert split.focus.reason == "its first transformed layer"
    assert "<br>not timed, FP x1.050 (legal)<br>" in split.hover
    assert split.hover.endswith("not tuned for this network: a click opens it unscheduled")


def test_an_untimed_network_says_its_layer_was_tuned_for_another() -> None:
    # An illegal candidate grouping b1 as the grouped one does: its b1 shapes are tuned (for
    # that candidate), its own network never was. The hover says so, and names the run.
    result, tunings = build_result()
    net = result.points[0].network
    odd = candidate(net, [((Group(4),), (Group(4),)), ((Group(8),), (Group(8),))], 0.5, False)
    point = NasPoint("candidate 5", odd.network, 0.5, False, None, odd)
    info = nas_front_info(replace(result, points=(*result.points, point)))
    p = info.points[5]
    assert (p.focus.layer, p.focus.steps) == ("b1.conv1", "group(4)")
    assert p.focus.reason == "its slowest transformed layer with a tuned shape"
    run = tunings[p.focus.conv].run_id
    assert p.focus.run_id == run and p.focus.latency_ms is not None
    assert p.hover.count("illegal") == 1 and "<br>not tuned, FP x0.500 (illegal)<br>" in p.hover
    assert p.hover.endswith(
        "click: b1.conv1 (group(4)), its slowest transformed layer with a tuned shape"
        f"<br>not tuned for this network; the same shape was tuned in run {run}"
    )
    # A timed network's hover says nothing of the kind.
    assert info.points[1].hover.endswith("its slowest transformed layer")
    assert all(info.points[i].is_timed for i in info.front)


def test_counts_and_times_format_for_the_table() -> None:
    assert format_count(35_046_656) == "35.0 M" and format_count(7_200) == "7.2 k"
    assert format_count(512) == "512" and format_count(2_500_000_000) == "2.5 G"
    assert format_ms(None) == "not timed" and format_ms(1.23456) == "1.235 ms"


def test_the_pareto_figure_places_every_network_once() -> None:
    pytest.importorskip("plotly")
    from explorer._plots_nas import SIDE, make_nas_pareto_figure, update_nas_pareto_figure

    result, _ = build_result(stopped=True)
    info = nas_front_info(result)
    fig = make_nas_pareto_figure(info)
    by_meta = {t.meta: t for t in fig.data}
    assert list(by_meta) == [
        "nas-front-line",
        "nas|legal",
        "nas|front",
        "nas|original",
        "nas|illegal",
        "nas|untimed",
    ]
    shown = [i for m, t in by_meta.items() if m.startswith("nas|") for i in t.customdata]
    assert sorted(shown) == list(range(len(info.points)))  # each network exactly once
    assert list(by_meta["nas|illegal"].x) == [SIDE[0]] and by_meta["nas|illegal"].xaxis == "x2"
    assert list(by_meta["nas|untimed"].x) == [SIDE[1]]
    line = by_meta["nas-front-line"]
    assert list(line.x) == [info.points[i].latency_ms for i in info.front_line]
    assert line.line.shape == "hv" and line.hoverinfo == "skip"
    (tau,) = fig.layout.shapes
    assert tau.y0 == tau.y1 == 0.9 and tau.xref == "paper"
    assert fig.layout.title.text == "NAS: small"
    assert "1 illegal" in fig.layout.title.subtitle.text
    assert "stopped early" in fig.layout.title.subtitle.text
    # Empty, then filled in place: the same traces (click handlers stay attached).
    empty = make_nas_pareto_figure(None)
    assert [a.text for a in empty.layout.annotations] == [
        "Run a NAS search to see its candidates here"
    ]
    before = [id(t) for t in empty.data]
    update_nas_pareto_figure(empty, info)
    assert [id(t) for t in empty.data] == before and not empty.layout.annotations
    assert len(empty.data[4].x) == 1
    # And emptied again: no tau line is left from the search before.
    assert len(empty.layout.shapes) == 1
    update_nas_pareto_figure(empty, None)
    assert empty.layout.shapes == ()


def test_the_latency_axis_holds_a_single_point_and_no_negative_latency() -> None:
    """Issue 21: with one timed network the x-axis ran from -0.5 ms (plotly's range around a
    lone point)."""
    pytest.importorskip("plotly")
    from explorer._plots_nas import make_nas_pareto_figure

    result, _ = build_result()
    info = nas_front_info(result)
    original = info.points[0]
    assert original.is_timed
    one = replace(info, points=(original,), front=(0,), front_line=(0,), fastest=0)
    lo, hi = make_nas_pareto_figure(one).layout.xaxis.range
    assert 0 <= lo < original.latency_ms < hi
    lo, hi = make_nas_pareto_figure(info).layout.xaxis.range
    timed = [p.latency_ms for p in info.points if p.is_timed and p.is_legal]
    assert 0 <= lo < min(timed) <= max(timed) < hi
