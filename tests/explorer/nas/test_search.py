"""The NAS search (issue 12): every distinct convolution of the original and the legal candidates
is tuned and stored once per shape, a second search reuses the tunings, the front is a Pareto
front, and bad settings fail before anything is measured or stored."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.errors import UnknownPluginError
from explorer.nas import Block, Layer, Network, find_tuning, nas_search, pareto_front
from explorer.storage import RunStatus, summarize_run

pytest.importorskip("jax")


def small_network() -> Network:
    """Two blocks on a 3x8x8 input: cheap to score and to tune, and every kind of block plan
    has channels to work on (8 and 16)."""
    stem = Layer.dense("stem", 3, 8, 8, 8)
    b1 = Block("b1", (Layer.dense("b1.conv1", 8, 8, 8, 8), Layer.dense("b1.conv2", 8, 8, 8, 8)))
    b2 = Block(
        "b2",
        (Layer.dense("b2.conv1", 8, 16, 8, 8, 3, 2), Layer.dense("b2.conv2", 16, 16, 4, 4)),
        Layer.dense("b2.shortcut", 8, 16, 8, 8, 1, 2),
    )
    return Network("small", 3, 8, 8, stem, (b1, b2))


KINDS = ("keep", "group", "bottleneck", "split_group")


@pytest.mark.timeout(600)
def test_a_search_tunes_and_stores_every_distinct_convolution_once(
    measurer, store, cpu_target
) -> None:
    net = small_network()
    seen = []
    result = nas_search(
        net,
        samples=4,
        budget=2,
        store=store,
        measurer=measurer,
        target=cpu_target,
        tau=0.5,
        seed=1,
        batch_size=16,
        kinds=KINDS,
        on_progress=seen.append,
    )
    assert not result.stopped and result.original.is_legal and result.original.name == "original"
    assert len(result.points) == 5 and len(result.sample.candidates) == 4
    wanted = dict.fromkeys(net.conv_counts())
    for point in result.points:
        if point.is_legal:
            wanted.update(dict.fromkeys(point.network.conv_counts()))
    # Each distinct shape tuned once, as its own finished run of 2 trials, in the store.
    assert [t.conv for t in result.tunings] == list(wanted)
    assert len({t.run_id for t in result.tunings}) == len(wanted)
    runs = {r.id: r for r in store.runs()}
    assert set(runs) == {t.run_id for t in result.tunings}
    for tuning in result.tunings:
        run = runs[tuning.run_id]
        assert run.workload == tuning.conv.workload() and run.strategy == "random"
        assert run.status is RunStatus.FINISHED and run.settings["max_trials"] == 2
        summary = summarize_run(run.id, store.trial_rows(run_id=run.id))
        assert summary.num_trials == 2 and summary.best_secs == tuning.best_secs
        assert tuning.best_secs is not None and not tuning.is_cached
    # Every shape's best was re-timed beside the others at the end (issue 21: latencies read
    # minutes apart on a busy machine are not comparable), and a network's latency is the sum
    # of those readings, times their counts.
    assert all(t.paired_secs is not None for t in result.tunings)
    best = {t.conv: t.latency_secs for t in result.tunings}
    for point in result.points:
        if not point.is_legal:
            assert point.latency_secs is None and not point.is_on_front
            continue
        expected = sum(n * best[c] for c, n in point.network.conv_counts().items())
        assert point.latency_secs == pytest.approx(expected)
    assert result.front and all(p.is_legal for p in result.front)
    fastest = result.fastest_legal
    assert fastest is not None and fastest.is_on_front
    assert result.speedup == pytest.approx(result.original.latency_secs / fastest.latency_secs)
    assert [p.done for p in seen] == list(range(len(wanted) + 1)) and seen[-1].conv is None

    # The same search again tunes nothing: every shape is found in the store, with its best
    # (re-timed together again: a network's latency is a reading of this moment).
    again = nas_search(
        net,
        samples=4,
        budget=2,
        store=store,
        measurer=measurer,
        target=cpu_target,
        tau=0.5,
        seed=1,
        batch_size=16,
        kinds=KINDS,
    )
    assert len(store.runs()) == len(runs)
    assert all(t.is_cached for t in again.tunings)
    assert [t.best_secs for t in again.tunings] == [t.best_secs for t in result.tunings]
    assert [p.latency_secs is None for p in again.points] == [
        p.latency_secs is None for p in result.points
    ]
    # Another budget is another tuning.
    assert find_tuning(store, net.stem.pieces[0].conv, cpu_target, "random", 3, 0) is None
    # Another sample of candidates (seed) tunes with the same tuning seed: nothing new to tune.
    other = nas_search(
        net,
        samples=0,
        budget=2,
        store=store,
        measurer=measurer,
        target=cpu_target,
        tau=0.5,
        seed=7,
        batch_size=16,
        kinds=KINDS,
    )
    assert all(t.is_cached for t in other.tunings) and len(store.runs()) == len(runs)


def test_stopping_keeps_what_was_tuned(measurer, store, cpu_target) -> None:
    progress = []  # the search stops once the first shape is tuned

    result = nas_search(
        small_network(),
        samples=1,
        budget=1,
        store=store,
        measurer=measurer,
        target=cpu_target,
        seed=0,
        batch_size=8,
        kinds=("keep", "group"),
        on_progress=progress.append,
        should_stop=lambda: bool(progress) and progress[-1].done >= 1,
    )
    assert result.stopped and len(result.tunings) == 1
    assert result.original.latency_secs is None and result.speedup is None
    assert [r.id for r in store.runs()] == [result.tunings[0].run_id]


def test_stop_while_scoring_ends_before_anything_is_tuned(measurer, store, cpu_target) -> None:
    result = nas_search(
        small_network(),
        samples=50,
        budget=1,
        store=store,
        measurer=measurer,
        target=cpu_target,
        batch_size=8,
        kinds=KINDS,
        should_stop=lambda: True,
    )
    assert result.stopped and result.sample.stopped and result.sample.candidates == ()
    assert result.tunings == () and store.runs() == []


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"budget": 0}, ValueError, "budget must be an integer >= 1"),
        ({"budget": 2.5}, ValueError, "budget must be an integer >= 1"),
        ({"samples": -1}, ValueError, "samples must be an integer from 0 to"),  # was "n"
        ({"samples": 10**9}, ValueError, "samples must be an integer from 0 to 100000"),
        ({"budget": 10**20}, ValueError, "budget must be at most 1000000 trials"),
        ({"tau": -1.0}, ValueError, "tau must be a finite number above 0"),
        ({"tau": 0}, ValueError, "at 0 every candidate is legal"),
        ({"strategy": "nope"}, UnknownPluginError, "nope"),
        ({"kinds": ("group", "warp")}, ValueError, "kinds must be taken from"),
        ({"kinds": ("keep",)}, ValueError, "kinds needs a transformation besides keep"),
        ({"seed": -1}, ValueError, "seed must be an integer >= 0"),
        ({"tune_seed": 1.5}, ValueError, "tune_seed must be an integer >= 0"),
    ],
)
def test_bad_settings_fail_before_anything_is_stored(
    measurer, store, cpu_target, kwargs, error, match
) -> None:
    settings = {"samples": 1, "budget": 1, "kinds": KINDS, **kwargs}
    with pytest.raises(error, match=match):
        nas_search(small_network(), store=store, measurer=measurer, target=cpu_target, **settings)
    assert store.runs() == []


point = st.tuples(st.floats(0.1, 10), st.floats(0.1, 2), st.integers(1, 100))


@given(st.lists(point, max_size=12))
def test_the_front_is_exactly_the_undominated_points(points) -> None:
    def dominates(a, b) -> bool:
        better_or_equal = a[0] <= b[0] and a[1] >= b[1] and a[2] <= b[2]
        return better_or_equal and a != b

    front = pareto_front(points)
    assert len(front) == len(points)
    for p, on in zip(points, front, strict=True):
        assert on == (not any(dominates(q, p) for q in points))
    if points:
        assert any(front)  # a finite set always has an undominated point
        fastest = min(
            range(len(points)), key=lambda i: (points[i][0], -points[i][1], points[i][2])
        )
        assert front[fastest]


def test_no_latency_is_never_on_the_front() -> None:
    assert pareto_front([(math.inf, 1.0, 10), (1.0, 1.0, 10)]) == [False, True]


@pytest.mark.timeout(600)
def test_a_shape_timed_only_noisily_keeps_its_latency(store, cpu_target) -> None:
    """Issue 21: on a busy machine `explorer nas` dropped legal candidates whose shapes had only
    noisy trials. A spread is information: every timing here is "noisy" (no spread is small
    enough), and the shape still has its latency, so its network is ranked."""
    from explorer.measure import LocalMeasurer, MeasureConfig

    config = MeasureConfig(repeat=3, min_repeat_secs=0.001, max_spread=0.0, timing_rounds=1)
    net = Network("one", 3, 8, 8, Layer.dense("stem", 3, 8, 8, 8), ())
    with LocalMeasurer(config) as measurer:
        result = nas_search(
            net,
            samples=0,
            budget=1,
            store=store,
            measurer=measurer,
            target=cpu_target,
            batch_size=8,
        )
    (tuning,) = result.tunings
    trials = store.trials(run_id=tuning.run_id)
    assert trials and all(t.result.is_ok for t in trials)  # each was NOISY, unranked, before
    assert tuning.best_secs is not None and result.original.latency_secs == tuning.best_secs
    assert result.fastest_legal is result.original and result.front == [result.original]
