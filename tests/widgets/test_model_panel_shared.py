"""The Model panel under real conditions: a second notebook on the same database file, a
budget asked for twice, a race stopped, a click that reaches the kernel twice, and a race read
on a busy machine. Real imports, tunes and races of the tiny network (TVM, ONNX Runtime, the
LocalMeasurer, a SQLite file)."""

from __future__ import annotations

import time
from collections.abc import Callable

import onnx
import pytest

from explorer.core import ModelRace, RaceEntry
from explorer.model import NETWORKS
from widgets import _ui
from widgets._context import Context
from widgets._jobs import JobState
from widgets.model import POLL_SECS, RACE, ModelPanel

WAIT = 300.0


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny.onnx"
    onnx.save(NETWORKS["tiny"](), path)
    return path


def settle(panel: ModelPanel, state: JobState = JobState.FINISHED) -> None:
    job = panel.job
    assert job is not None and job.wait(WAIT), "the job did not end"
    assert job.state is state, job.exception


def eventually(condition: Callable[[], bool], secs: float) -> bool:
    """Run the UI's queued calls (the panel's polls among them) until ``condition`` holds."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        _ui.drain()
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.timeout(900)
def test_a_second_notebook_on_the_same_database_shows_in_the_first(
    local_measurer, tiny_onnx, tmp_path
) -> None:
    # A new user's second notebook imported and raced a model; the first notebook's Model
    # list and race table never showed them, even after a reload.
    db = str(tmp_path / "shared.db")
    first, second = (
        Context(store=db, measurer=local_measurer),
        Context(store=db, measurer=local_measurer),
    )
    try:
        mine, theirs = ModelPanel(first), ModelPanel(second)
        assert mine.models.options == ()
        theirs.path.value = str(tiny_onnx)
        theirs.import_file()
        settle(theirs)
        assert eventually(lambda: mine.models.options == (("tiny (5 tasks)", 1),), 4 * POLL_SECS)
        # nothing was shown, so the new model is, with its tasks
        assert mine.model is not None and mine.model.name == "tiny"
        assert len(mine.tasks_table.value.split("<tr>")[2:]) == 5
        mine._say("what the user did last")
        theirs.race()
        settle(theirs)
        assert eventually(lambda: "<b>Race 1</b>" in mine.race_table.value, 4 * POLL_SECS)
        assert [t.name for t in mine.race_figure.data][-2:] == [
            "ONNX Runtime (latest race)",
            "untuned (latest race)",
        ]
        # the first notebook's status line stays what its own user did last
        assert mine.status.value == "what the user did last"
    finally:
        for panel in (mine, theirs):
            panel.close()
        first.close()
        second.close()


@pytest.mark.timeout(900)
def test_budget_again_double_click_and_a_stopped_race(local_ctx, tiny_onnx) -> None:
    panel = ModelPanel(local_ctx)
    panel.path.value = str(tiny_onnx)
    panel.import_file()
    settle(panel)
    panel.trials.value, panel.strategy.value = "4", "random"
    assert panel.tune() is not None
    settle(panel)
    # the race that follows a tune stops when asked, at once, and stores nothing
    assert panel.job is not None and panel.job.name == RACE
    started = time.monotonic()
    panel.stop_button.click()
    assert panel.status.value == "Stopping the race (nothing of it is stored)..."
    settle(panel, JobState.ERROR)
    assert time.monotonic() - started < 30
    assert panel.status.value == "Race stopped before it ended; nothing of it was stored."
    assert local_ctx.store.model_races(panel.model.id) == []
    assert not panel.race_button.disabled and panel.stop_button.disabled

    # Trials is the tune's total: the same budget again would tune nothing, then race
    assert panel.tune() is None
    said = panel.status.value
    assert said.startswith(
        "Not started: tiny's tune with random (gradient) has spent 4 trials "
        "already and Trials is its total: set Trials above 4"
    ), said

    # a second click that reached the kernel before the buttons were disabled changes nothing
    panel.trials.value = "8"
    job = panel.tune()
    assert job is not None
    said = panel.status.value
    assert said == "Tuning tiny: 4 more trials (8 in all) with random (gradient)...", said
    assert panel.tune() is None and panel.race() is None
    assert panel.status.value == said and panel.job is job
    panel.stop()
    assert job.wait(WAIT) and job.state is JobState.CANCELLED


def test_a_race_read_on_a_busy_machine_says_so_wherever_its_verdict_shows(
    local_ctx, tiny_onnx
) -> None:
    panel = ModelPanel(local_ctx)
    panel.path.value = str(tiny_onnx)
    panel.import_file()
    settle(panel)
    model = panel.model
    # a race as the race stores it when other processes kept 1.4 cores busy meanwhile
    entries = (
        RaceEntry("tuned", (2.1e-4, 1.9e-4), 5e-7, None),
        RaceEntry("onnxruntime", (1.0e-4, 0.9e-4), None, None),
    )
    env = {"cpu_model": "this machine", "num_threads": 2, "others_cpus": 1.4}
    local_ctx.store.add_model_race(ModelRace(0, model.id, None, 0, entries, env, time.time()))
    panel.refresh_models(select=model.id)
    said = panel.status.value
    assert "latest race: tuned 190 µs, ONNX Runtime 90.0 µs (2.11x" in said, said
    assert said.endswith("race again when it is quieter."), said
    subtitle = panel.race_figure.layout.title.subtitle.text.replace("<br>", " ")
    assert "2.11x slower than ONNX Runtime" in subtitle
    assert "Other processes kept 1.4 of the cores busy" in subtitle
