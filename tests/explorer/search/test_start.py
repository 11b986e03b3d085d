"""'Start from what I have': a schedule made by hand starts droplet, evolutionary and autotvm
(Python and CLI), is measured as the run's reference, and the answer is never slower than it.

Real TVM, real timings of a 64^3 matmul, small budgets.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from explorer import _tvm
from explorer.errors import CapabilityError, SearchError
from explorer.measure import LocalMeasurer, MeasureConfig, trace_key
from explorer.search import STRATEGIES, capabilities, make_strategy
from explorer.search._start import is_start
from explorer.session import ScheduleSession
from explorer.space import DesignSpace, KnobSpace, Point, nearest_point
from explorer.storage import get_store, trace_hash
from explorer.storage._summary import confirmation_rows, paired_readings
from explorer.testing.sessions import hand_session
from explorer.tuner import Tuner, TuneResult
from explorer.workloads import get_workload

WORKLOAD = get_workload("matmul", M=64, N=64, K=64)
SMALL_SETTINGS = {
    "droplet": {},
    "evolutionary": {
        "population_size": 32,
        "init_min_unmeasured": 8,
        "num_warmup_samples": 4,
        "num_trials_per_iter": 8,
    },
    "autotvm": {"plan_size": 8, "n_iter": 50},
}


@pytest.fixture(scope="module")
def measurer():
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.002)) as m:
        yield m


@pytest.fixture
def session(cpu_target) -> ScheduleSession:
    return hand_session(WORKLOAD, cpu_target)


def confirmed_reading(store, run_id: int, trace) -> float:
    """A trace's reading in the run's confirmation (the side-by-side re-timing at the end,
    which decides the run's best): the median of its fastest round there."""
    rounds = paired_readings(confirmation_rows(store.trial_rows(run_id=run_id)))
    return min(r for r in rounds[trace_hash(trace)] if r is not None)


def searched(store, run_id: int) -> list:
    """The run's trials: its baseline (the unscheduled program) and re-timings are not trials."""
    return [t for t in store.trials(run_id=run_id) if not t.is_remeasure]


def check_started_from(result: TuneResult, store, session, cpu_target) -> None:
    trials = searched(store, result.run.id)
    reference, nearest = trials[0], trials[1]
    # 1. The user's schedule, exactly as made, is the run's first trial and its reference.
    assert is_start(reference.candidate)
    assert reference.candidate.trace == session.candidate().trace
    assert result.start is not None and result.start.id == reference.id
    assert reference.candidate.decisions["notes"], "what was approximated is stored with it"
    # 2. Then its nearest point of the knob space, where the search starts.
    knobs = KnobSpace(DesignSpace.of(WORKLOAD, cpu_target))
    point = nearest_point(knobs, session.candidate()).point
    assert knobs.point_of_candidate(nearest.candidate) == point
    # 3. Never slower than the start, re-timed side by side with it at the end.
    assert result.best is not None and result.start_secs is not None
    best = confirmed_reading(store, result.run.id, result.best.candidate.trace)
    start = confirmed_reading(store, result.run.id, reference.candidate.trace)
    assert best <= start
    assert result.best_secs == pytest.approx(best) and result.start_secs == pytest.approx(start)
    assert result.speedup_over_start >= 1.0
    assert result.best_is_start == (result.best.id == reference.id)


@pytest.mark.parametrize("name", ["droplet", "evolutionary", "autotvm"])
def test_a_hand_made_schedule_starts_the_search(name, measurer, session, cpu_target):
    store = get_store(":memory:")
    strategy = make_strategy(name, start=session.candidate(), **SMALL_SETTINGS[name])
    result = Tuner(measurer=measurer, store=store, batch_size=4, confirm_top=2).run(
        WORKLOAD, cpu_target, strategy, max_trials=8, seed=0
    )
    check_started_from(result, store, session, cpu_target)
    assert result.run.settings["start"]["trace_sha256"]
    if name == "evolutionary":
        # The nearest point went into MetaSchedule's database (the hand-made reference, which
        # it cannot mutate, did not), so the first round's initial population, which takes the
        # best measured traces first, was seeded with it.
        nearest = searched(store, result.run.id)[1].candidate
        in_db = {
            trace_key(_tvm.trace_to_json(r.trace))
            for r in strategy.database_.get_all_tuning_records()
        }
        assert trace_key(nearest.trace) in in_db
        assert trace_key(session.candidate().trace) not in in_db


def test_the_start_is_the_answer_when_nothing_beats_it(measurer, session, cpu_target):
    # Two trials: the reference and its nearest point. Whichever re-measures faster wins, and
    # the start is offered when it is the faster one. Both are re-timed (confirm_top=2): with
    # 1, the one the search read slower was not, and had no reading to compare (seen under load).
    store = get_store(":memory:")
    result = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=2).run(
        WORKLOAD, cpu_target, make_strategy("droplet", start=session.candidate()), max_trials=2
    )
    check_started_from(result, store, session, cpu_target)
    others = [t for t in searched(store, result.run.id) if not is_start(t.candidate)]
    other = confirmed_reading(store, result.run.id, others[0].candidate.trace)
    # (the unscheduled program competes too: this hand schedule of a small matmul is slower)
    fastest = min(other, result.baseline_secs or math.inf)
    assert result.best_is_start == (result.start_secs <= fastest)


def test_resume_finds_the_start_in_the_run(measurer, session, cpu_target):
    store = get_store(":memory:")
    stops = []
    first = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0).run(
        WORKLOAD,
        cpu_target,
        make_strategy("droplet", start=session.candidate()),
        max_trials=6,
        should_stop=lambda: stops.append(1) or len(stops) > 1,
    )
    # Resumed without start=: the run's reference trial is the start.
    resumed = Tuner(measurer=measurer, store=store, batch_size=2, confirm_top=0).run(
        WORKLOAD, cpu_target, "droplet", max_trials=6, resume_run_id=first.run.id
    )
    keys = [trace_key(t.candidate.trace) for t in searched(store, first.run.id)]
    assert len(keys) == len(set(keys)) == 6
    assert resumed.start is not None and resumed.start.id == first.start.id


def test_strategies_declare_whether_they_take_a_start(session):
    # That a declared strategy really starts there: the contract kit runs each one
    # (test_a_start_is_measured_first_and_the_answer_is_never_slower) and the tests above.
    for name in STRATEGIES:
        if capabilities(name).start:
            assert make_strategy(name, start=session.candidate()).start is not None
        else:
            with pytest.raises(CapabilityError, match=f"strategy '{name}' cannot start from"):
                make_strategy(name, start=session.candidate())
    assert {n for n in STRATEGIES if not capabilities(n).start} == {"random", "static"}


def test_value_search_walks_from_the_start(session, cpu_target):
    import numpy as np

    strategy = make_strategy("value", start=session.candidate(), min_samples=100)
    strategy.reset(DesignSpace.of(WORKLOAD, cpu_target), rng=np.random.default_rng(0))
    first = strategy.ask(4)
    assert is_start(first[0]) and len(first) == 2
    start = strategy.start_plan_.point
    walked = strategy.ask(4)  # no model yet: random walks from the start point
    points = [strategy.knob_space_.point_of_candidate(c) for c in walked]
    assert points and all(p.sketch == start.sketch for p in points)
    assert all(
        1 <= sum(a != b for a, b in zip(p.indices, start.indices, strict=True)) <= 3
        for p in points
    )


def test_a_start_for_another_workload_is_refused(cpu_target):
    other = ScheduleSession(get_workload("matmul", M=32, N=32, K=32), cpu_target)
    import numpy as np

    strategy = make_strategy("droplet", start=other.candidate())
    with pytest.raises(SearchError, match="was made for matmul"):
        strategy.reset(DesignSpace.of(WORKLOAD, cpu_target), rng=np.random.default_rng(0))
    with pytest.raises(SearchError, match="not a point"):
        make_strategy("autotvm", start=Point(0, (999,))).reset(
            DesignSpace.of(WORKLOAD, cpu_target), rng=np.random.default_rng(0)
        )


# -- the command line ----------------------------------------------------------------------------
SHAPE = ["matmul", "-p", "M=64", "-p", "N=64", "-p", "K=64"]


def explorer(*args: str, db: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "explorer", *args, "--db", str(db)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", ["droplet", "evolutionary", "autotvm"])
def test_cli_starts_from_a_saved_session(name, session, tmp_path):
    saved = tmp_path / "session.json"
    session.save(saved)
    db = tmp_path / "records.db"
    extra = {"droplet": [], "evolutionary": [], "autotvm": []}[name]
    out = explorer(
        "tune", *SHAPE, "--strategy", name, "--start", str(saved), "--trials", "4",
        "--batch", "2", "-q", *extra, db=db,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "C.i: your split 8 x 8 kept as tile [8, 1, 1, 8]" in out.stdout
    assert "your reorder is not a knob and was dropped" in out.stdout
    # named in its run: the first trial after the unscheduled baseline
    assert "faster than your start" in out.stdout or "your start (trial 1 of run" in out.stdout
    store = get_store(db)
    (run,) = store.runs()
    assert is_start(store.trials(run_id=run.id)[1].candidate)  # after the baseline


def test_cli_refuses_a_start_for_a_strategy_that_cannot_take_one(session, tmp_path):
    saved = tmp_path / "session.json"
    session.save(saved)
    db = tmp_path / "records.db"
    out = explorer("tune", *SHAPE, "--strategy", "random", "--start", str(saved), db=db)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: strategy 'random' cannot start")
    assert "droplet" in lines[0] and "Traceback" not in out.stderr
    assert not db.exists() or not get_store(db).runs()
