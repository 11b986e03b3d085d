"""Races on a recording (issue 25, section 2): every strategy searches the recorded schedules
only, every answer is the recording's own (never invented), and the summary counts trials to
90% of the recording's best from the runs themselves."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.analysis import REACH, race_info, trials_to_reach
from explorer.core import trace_key
from explorer.errors import ExplorerError, SearchError
from explorer.replay import REPLAYED_FROM, Recording, example_recording, race, recordings_in
from explorer.search import make_strategy
from explorer.space import KnobSpace
from explorer.storage import NewTrial, get_store, remeasurements
from explorer.testing import recordings
from explorer.text import share
from explorer.tuner import POOL, Tuner
from explorer.types import MeasureStatus
from explorer.workloads import get_workload


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    store = recordings.open_recording(tmp_path_factory.mktemp("recording"))
    yield store
    store.close()


@pytest.fixture(scope="module")
def tiny(recorded) -> Recording:
    return Recording(recorded, recordings.TINY, source="replay.db")


def test_a_recording_holds_the_recorded_schedules_and_says_how_much_of_the_space(recorded, tiny):
    trials = recordings.recorded_trials(recorded, recordings.TINY)
    assert tiny.num_schedules == len(trials) == KnobSpace.of(tiny.workload, tiny.target).size()
    assert tiny.coverage == 1.0
    assert tiny.best_secs == min(t.result.median_secs for t in trials if t.result.is_ok)
    small = Recording(recorded, recordings.SMALL)
    assert small.num_schedules == recordings.SMALL_POINTS
    assert small.coverage == pytest.approx(recordings.SMALL_POINTS / small.space_size)
    assert f"({share(small.coverage)} of its {small.space_size} knob-space points)" in (
        small.describe()
    )
    listed = {(r.workload, r.num_trials) for r in recordings_in(recorded)}
    assert (recordings.TINY, 36) in listed and (recordings.SMALL, 240) in listed


def test_a_race_only_proposes_recorded_schedules_and_answers_with_their_recorded_results(
    recorded, tiny
):
    store = get_store(":memory:")
    result = race(tiny, ["random", "autotvm", "droplet"], seeds=2, trials=12, store=store)
    assert [(r.strategy, r.seed) for r in result.runs] == [
        (s, seed) for seed in (0, 1) for s in ("random", "autotvm", "droplet")
    ]
    recorded_results = {
        trace_key(t.candidate.trace): t.result
        for t in recordings.recorded_trials(recorded, recordings.TINY)
    }
    for run in result.runs:
        info = store.get_run(run.run_id)
        assert info.environment[REPLAYED_FROM] == "replay.db"  # marked in the database
        assert info.settings[POOL] == tiny.num_schedules
        # the trials axis: neither re-measurements nor the unscheduled baseline
        again = remeasurements(store.trial_rows(run_id=run.run_id))
        trials = [t for t, a in zip(store.trials(run_id=run.run_id), again, strict=True) if not a]
        assert len(trials) == len(run.best_so_far) <= 12 and sum(again) == 1  # the baseline
        for t in trials:  # each answer is the recording's, for a recorded schedule
            assert t.result == tiny.lookup(t.candidate)
            assert t.result.status is not MeasureStatus.INVALID
        assert run.best_so_far == tuple(
            min((x for x in (t.result.median_secs for t in trials[: i + 1]) if x), default=None)
            for i in range(len(trials))
        )
    assert len(recorded_results) == tiny.num_schedules


def test_a_race_is_the_same_in_one_process_or_several_and_exhaustive_random_finds_the_best(
    tiny,
):
    """Runs are independent: two worker processes (each with its copy of the recording) give
    each run the very trials the race's own process gives it."""
    alone, side_by_side = get_store(":memory:"), get_store(":memory:")
    first = race(tiny, ["random", "evolutionary"], seeds=2, trials=36, store=alone, workers=1)
    again = race(
        tiny, ["random", "evolutionary"], seeds=2, trials=36, store=side_by_side, workers=2
    )
    assert [(r.strategy, r.seed, r.best_so_far) for r in first.runs] == [
        (r.strategy, r.seed, r.best_so_far) for r in again.runs
    ]
    for one, two in zip(first.runs, again.runs, strict=True):
        traces = [[t.candidate.trace for t in s.trials(run_id=r.run_id)] for s, r in
                  ((alone, one), (side_by_side, two))]  # fmt: skip
        assert traces[0] == traces[1]
    randoms = [r for r in first.runs if r.strategy == "random"]
    assert all(r.best_secs == tiny.best_secs for r in randoms)  # it saw all 36


def test_metaschedules_evolution_keeps_to_the_recorded_compute_locations():
    """MetaSchedule samples a softmax's compute locations at random and mutates them; the
    knob space (so the shipped recording) keeps each sketch's own. Raced as shipped, the
    evolutionary search found 1 recorded schedule in 80 proposals and stopped after 2 trials;
    started from a sample of the recording and kept to tile and unroll mutations, it spends
    its whole budget on recorded schedules."""
    shipped = example_recording()
    store = get_store(":memory:")
    result = race(shipped, ["evolutionary"], seeds=1, trials=24, store=store, workers=1)
    (run,) = result.runs
    assert run.stopped_because == "budget" and len(run.best_so_far) == 24
    trials = [t for t in store.trials(run_id=run.run_id) if t.result.run_secs]
    assert all(t.result == shipped.lookup(t.candidate) for t in trials)
    settings = store.get_run(run.run_id).settings
    assert (settings["init_measured_ratio"], settings["init_min_unmeasured"]) == (1.0, 0)


def test_droplet_descends_in_every_sketch_of_the_recording():
    """The shipped softmax recording is complete (900 points in 9 sketches). Droplet from
    sketch 0's origin alone stopped after 40 trials at its coordinate-wise optimum, 0.85 of
    the recording's best (which lies in sketch 4), on every seed; surveying the 9 origins and
    descending from the fastest first, each seed reaches 90% of the best within 32 trials."""
    shipped = example_recording()
    store = get_store(":memory:")
    result = race(shipped, ["droplet"], seeds=3, trials=32, store=store, workers=1)
    (row,) = race_info(result, store).rows
    assert row.reached == 3 and row.exhausted == 0, row
    knobs = KnobSpace.of(shipped.workload, shipped.target)
    points = [
        knobs.point_of_candidate(t.candidate) for t in store.trials(run_id=result.runs[0].run_id)
    ]
    assert {p.sketch for p in points if p is not None} == set(range(9))  # every origin measured


def test_a_sparse_recording_stops_strategies_that_find_no_recorded_neighbour(recorded):
    """240 schedules of a 592 704-point space: random picks among them; droplet walks from
    the sketches' origins, none of them recorded, and says so by stopping at once."""
    small = Recording(recorded, recordings.SMALL)
    store = get_store(":memory:")
    result = race(small, ["random", "droplet"], seeds=1, trials=16, store=store, workers=1)
    info = race_info(result, store)
    rows = {row.strategy: row for row in info.rows}
    assert rows["random"].median_trials == 16 and rows["random"].exhausted == 0
    assert rows["droplet"].exhausted == 1 and rows["droplet"].median_trials == 0
    assert rows["droplet"].median_best_ms is None


def test_the_summary_counts_trials_to_ninety_percent_from_the_runs(tiny):
    store = get_store(":memory:")
    result = race(tiny, ["random", "autotvm"], seeds=4, trials=10, store=store, workers=1)
    info = race_info(result, store)
    reach = tiny.best_secs / REACH
    assert info.reach_ms == pytest.approx(reach * 1e3)
    for row in info.rows:
        runs = [r for r in result.runs if r.strategy == row.strategy]
        needed = [trials_to_reach(r.best_so_far, reach) for r in runs]
        assert row.reached == sum(n is not None for n in needed)
        ordered = sorted(math.inf if n is None else n for n in needed)
        assert row.trials_to_reach == (ordered[1] + ordered[2]) / 2  # the median of four
        assert row.of_best == pytest.approx(tiny.best_secs / (row.median_best_ms / 1e3))
        secs = sorted(r.secs for r in runs)  # each run's own time, as its process saw it
        assert 0 < secs[0] < result.secs and row.median_run_secs == (secs[1] + secs[2]) / 2
    groups = {g.label for g in info.convergence.groups}
    assert {"random", "autotvm"} <= {label.split(" ")[0] for label in groups}


@given(st.lists(st.one_of(st.none(), st.floats(1e-6, 1.0)), max_size=30), st.floats(1e-6, 1.0))
def test_trials_to_reach_is_the_first_trial_at_or_under_the_line(values, line):
    found = trials_to_reach(values, line)
    hits = [i for i, v in enumerate(values, start=1) if v is not None and v <= line]
    assert found == (hits[0] if hits else None)


def test_bad_races_and_recordings_are_refused_in_one_sentence(recorded, tiny):
    with pytest.raises(ExplorerError, match="unknown strategy 'fastest'"):
        race(tiny, ["fastest"])
    with pytest.raises(ExplorerError, match="at least one strategy"):
        race(tiny, [])
    with pytest.raises(ExplorerError, match="seeds must be"):
        race(tiny, ["random"], seeds=0)
    with pytest.raises(ExplorerError, match="max_trials"):
        race(tiny, ["random"], trials=0)
    missing = get_workload("matmul", M=8, N=8, K=8)
    with pytest.raises(ExplorerError, match=r"holds no measurement of matmul\(K=8"):
        Recording(recorded, missing)
    # a database of hand-made schedules only: nothing a search proposes
    store = get_store(":memory:")
    run = store.create_run(recordings.TINY, tiny.target, "manual")
    trial = recordings.recorded_trials(recorded, recordings.TINY)[0]
    bare = type(trial.candidate)(trial.candidate.workload, trial.candidate.target, [[], []])
    store.add_trials(run.id, [NewTrial(bare, trial.result)])
    with pytest.raises(ExplorerError, match="hold no schedule a search proposes"):
        Recording(store, recordings.TINY)


def test_a_run_within_a_recording_cannot_be_resumed(tiny):
    store = get_store(":memory:")
    tuner = Tuner(measurer=tiny.measurer(), store=store, confirm_top=0)
    result = tuner.run(tiny.workload, tiny.target, "random", max_trials=4, space=tiny.space())
    with pytest.raises(SearchError, match="cannot be resumed"):
        tuner.resume(result.run.id)
    other = get_workload("matmul", M=8, N=8, K=8)
    with pytest.raises(SearchError, match="not of this workload"):
        tuner.run(other, tiny.target, make_strategy("random"), max_trials=4, space=tiny.space())


def explorer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args], capture_output=True, text=True, timeout=600
    )


def test_the_cli_lists_what_a_recording_can_replay_and_races_on_it(tmp_path: Path):
    db = tmp_path / "rec.db"
    recordings.open_recording(tmp_path).close()  # a private copy: replay.db
    (tmp_path / "replay.db").rename(db)
    listed = explorer("race", "--replay", str(db))
    assert listed.returncode == 0, listed.stderr
    assert "reduce_sum(D0=4,D1=8,D2=1,axis=1,dtype=float32,ndim=2) on " in listed.stdout
    assert "36 trials" in listed.stdout and "240 trials" in listed.stdout
    plot = tmp_path / "race.html"
    raced = explorer(
        "race", "--replay", str(db), "reduce_sum", "-p", "D0=4", "-p", "D1=8",
        "--strategy", "random", "--strategy", "droplet", "--seeds", "2", "--trials", "8",
        "--plot", str(plot),
    )  # fmt: skip
    assert raced.returncode == 0, raced.stderr
    out = raced.stdout
    assert "replaying 36 recorded schedules of reduce_sum" in out and "(100% of its 36" in out
    assert "raced 2 strategies x 2 seeds x 8 trials" in out
    assert "nothing was built or timed" in out
    lines = {
        line.split()[0]: line
        for line in out.splitlines()
        if line.startswith(("random", "droplet"))
    }
    assert set(lines) == {"random", "droplet"}
    assert "/2" in lines["random"]
    assert plot.stat().st_size > 100_000 and "Race on a recording (replayed)" in plot.read_text()


def test_the_cli_refuses_a_workload_the_recording_lacks_and_bad_counts(tmp_path: Path):
    recordings.open_recording(tmp_path).close()
    db = str(tmp_path / "replay.db")
    lacks = explorer("race", "--replay", db, "matmul", "-p", "M=8", "-p", "N=8", "-p", "K=8")
    assert lacks.returncode == 2
    assert lacks.stderr.strip().splitlines()[-1].startswith("error: the database holds no")
    many = explorer("race", "--replay", db, "reduce_sum", "--seeds", "1000")
    assert many.returncode == 2 and "--seeds 1000: at most 100" in many.stderr
    missing = explorer("race", "--replay", str(tmp_path / "none.db"))
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert not (tmp_path / "none.db").exists()  # nothing created
    # A strategy named twice was raced once, without a word (a new user's report).
    shape = ["reduce_sum", "-p", "D0=4", "-p", "D1=8"]
    named = ["--strategy", "random", "--strategy", "droplet", "--strategy", "random"]
    twice = explorer("race", "--replay", db, *shape, *named)
    assert twice.returncode == 2 and twice.stdout == "", twice.stdout
    said = "error: --strategy random is given twice: name each strategy once\n"
    assert twice.stderr == said
    helped = explorer("race", "--help")
    assert "--resume" not in helped.stdout
    assert "list what the recording can replay" in " ".join(helped.stdout.split())  # wrapped


def test_replayed_runs_are_marked_in_the_database_the_plots_and_the_runs_listing(
    tiny, tmp_path: Path
):
    from explorer.analysis import convergence_info

    db = tmp_path / "raced.db"
    store = get_store(db)
    race(tiny, ["random"], seeds=1, trials=6, store=store, workers=1)
    labels = [g.label for g in convergence_info(store).groups]
    assert labels == ["random (replayed)"]
    # a replayed run is never a recording itself: nothing here was measured
    assert recordings_in(store) == []
    with pytest.raises(ExplorerError, match="holds no measurement"):
        Recording(store, tiny.workload)
    store.close()
    listed = explorer("runs", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    assert "random (replayed)" in listed.stdout


def test_tune_replay_runs_one_strategy_on_the_recording_and_stores_nothing(tmp_path: Path):
    recordings.open_recording(tmp_path).close()
    db = str(tmp_path / "replay.db")
    tiny = ["reduce_sum", "-p", "D0=4", "-p", "D1=8"]
    done = explorer("tune", *tiny, "--replay", db, "--strategy", "random", "--trials", "36")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("replaying 36 recorded schedules of reduce_sum")
    assert lines[1] == "random (replayed): 36 trials (the trial budget was used)"
    assert re.fullmatch(r"best: trial \d+, \S+ \S+ as recorded, 1\.00 of the recording's best",
                        lines[2]), lines[2]  # fmt: skip
    with_db = explorer("tune", *tiny, "--replay", db, "--db", str(tmp_path / "x.db"))
    assert with_db.returncode == 2 and "--replay answers from the recording: it takes no --db" in (
        with_db.stderr
    )
    assert not (tmp_path / "x.db").exists()
