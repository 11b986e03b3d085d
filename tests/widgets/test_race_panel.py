"""The Search tab's race on a recording (issue 25, section 2): "Measure on: a recording" swaps
the search for a race of strategies over seeds, replayed from this explorer's database or a
database file, and shows a row per strategy and the best-so-far curves, marked replayed."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.replay import DEFAULT_STRATEGIES, MAX_SEEDS, Recording
from explorer.session import ScheduleSession
from explorer.testing import recordings
from explorer.text import format_secs
from explorer.workloads import get_workload
from widgets import SearchPanel, _ui
from widgets._context import Context
from widgets._jobs import JobState
from widgets.search_panel import RECORDING, THIS_MACHINE

WAIT = 300


@pytest.fixture
def recording_file(tmp_path: Path) -> Path:
    recordings.open_recording(tmp_path).close()
    return tmp_path / "replay.db"


def finished(job) -> None:
    assert job is not None and job.wait(WAIT), "the race did not end"
    assert job.state is JobState.FINISHED, job.exception
    _ui.drain()


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def shown(widget) -> bool:
    return widget.layout.display != "none"


def test_a_recording_swaps_the_search_for_a_race_of_strategies_over_seeds(recording_file: Path):
    ctx = Context(store=recording_file)  # this explorer's own database holds the recording
    try:
        ctx.set_session(ScheduleSession(recordings.TINY, ctx.target))
        panel = SearchPanel(ctx)
        assert not shown(panel.race.widget) and shown(panel.search_settings)
        panel.measure_on.value = RECORDING
        assert shown(panel.race.widget)
        assert not shown(panel.search_settings) and not shown(panel.search_controls)
        race = panel.race
        race.strategies.value = ("random", "autotvm", "droplet")
        race.seeds.value, race.trials.value = "3", "12"
        job = race.start()
        finished(job)
        assert race.status.value.startswith("Raced: 9 runs in ")
        assert "replayed (nothing was built or timed)" in race.status.value
        table = text_of(race.table.value)
        assert "Replayed from this explorer's database: 36 recorded schedules, 100% of" in table
        rows = re.findall(r"<tr><td>([a-z+]+)</td><td>([^<]*)</td>", race.table.value)
        assert [r[0] for r in rows] == ["random", "autotvm", "droplet"]
        best = Recording(ctx.store, recordings.TINY).best_secs
        assert race.info is not None
        for row in race.info.rows:  # each row's median best is a recorded latency
            assert row.median_best_ms is not None and row.median_best_ms >= best * 1e3 * 0.999
        took = re.findall(r"<td>([^<]*)</td></tr>", race.table.value)  # a run's own time
        assert took == [format_secs(r.median_run_secs) for r in race.info.rows]
        assert race.figure is not None
        title = race.figure.layout.title.text
        assert title.startswith("Race on a recording (replayed): reduce_sum(")
        medians = [t for t in race.figure.data if t.meta.startswith("median|")]
        assert len(medians) == 3
        panel.measure_on.value = THIS_MACHINE  # back to the search
        assert shown(panel.search_settings) and not shown(panel.race.widget)
        panel.close()
    finally:
        ctx.close()


def test_a_database_file_is_a_recording_too_and_bad_settings_are_one_sentence(
    make_ctx, recording_file: Path
):
    ctx: Context = make_ctx()  # an empty database: the recording is the file
    ctx.set_session(ScheduleSession(recordings.TINY, ctx.target))
    panel = SearchPanel(ctx)
    race = panel.race
    for seeds, trials, said in (
        ("0", "8", "Seeds"),
        ("2.5", "8", "Seeds"),
        ("1000", "8", "Seeds must be between 1 and 100 (got 1000)."),
        ("2", "-1", "Trials each"),
    ):
        race.seeds.value, race.trials.value = seeds, trials
        assert race.start() is None
        assert race.status.value.startswith(said), race.status.value
    race.seeds.value, race.trials.value = "2", "8"
    race.strategies.value = ()
    assert race.start() is None and race.status.value == "Pick at least one strategy to race."
    race.strategies.value = ("random",)
    race.source.value = str(recording_file.with_name("missing.db"))
    assert race.start() is None and race.status.value.startswith("There is no database file")
    # this explorer's database holds nothing of the workload: one sentence, no race
    race.source.value = ""
    job = race.start()
    assert job is not None and job.wait(WAIT)
    _ui.drain()
    assert race.status.value.startswith("No race: the database holds no measurement of reduce")
    race.source.value = str(recording_file)
    finished(race.start())
    assert race.status.value.startswith("Raced: 2 runs")
    assert f"Replayed from {recording_file}" in text_of(race.table.value)
    # a workload the recording lacks
    ctx.set_session(ScheduleSession(get_workload("matmul", M=8, N=8, K=8), ctx.target))
    job = race.start()
    assert job is not None and job.wait(WAIT)
    _ui.drain()
    assert "holds no measurement of matmul(K=8" in race.status.value
    panel.close()


_NOT_A_NUMBER = st.text(max_size=300).filter(lambda s: not any(c.isdigit() for c in s))
_SEEDS = st.one_of(
    st.integers(1, MAX_SEEDS).map(lambda n: (f" {n} ", True)),
    st.integers(-(10**20), 0).map(lambda n: (str(n), False)),
    st.integers(MAX_SEEDS + 1, 10**20).map(lambda n: (str(n), False)),
    st.floats(0.01, 99.99).filter(lambda x: not x.is_integer()).map(lambda x: (repr(x), False)),
    _NOT_A_NUMBER.map(lambda s: (s, False)),
)
_TRIALS = st.one_of(
    st.integers(1, 10**6).map(lambda n: (str(n), True)),
    st.integers(-(10**6), 0).map(lambda n: (str(n), False)),
    st.integers(10**6 + 1, 10**20).map(lambda n: (str(n), False)),  # days of measuring
    _NOT_A_NUMBER.map(lambda s: (s, False)),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seeds=_SEEDS,
    trials=_TRIALS,
    names=st.lists(st.sampled_from(DEFAULT_STRATEGIES), unique=True, max_size=3),
)
def test_any_settings_a_user_types_get_one_sentence_naming_the_first_wrong_field(
    race_panel, seeds, trials, names
):
    """Whatever the boxes hold, a refusal is one sentence on one line about the first field at
    fault (seeds, trials, strategies, then the database file, missing here), and no race runs."""
    race = race_panel.race
    race.seeds.value, race.trials.value = seeds[0], trials[0]
    race.strategies.value = tuple(names)
    race.source.value = "/nonexistent/recording.db"
    assert race.start() is None
    said = race.status.value
    expected = (
        "Seeds must be"
        if not seeds[1]
        else "Trials each must be"
        if not trials[1]
        else "Pick at least one strategy"
        if not names
        else "There is no database file /nonexistent/recording.db."
    )
    assert said.startswith(expected), (seeds, trials, names, said)
    assert "\n" not in said and said.endswith(".") and len(said) < 200, said
    assert not race_panel.ctx.search_jobs.busy and race.job is None


@pytest.fixture
def race_panel(make_ctx):
    ctx: Context = make_ctx()
    ctx.set_session(ScheduleSession(recordings.TINY, ctx.target))
    panel = SearchPanel(ctx)
    panel.measure_on.value = RECORDING
    yield panel
    panel.close()
