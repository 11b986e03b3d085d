"""The Model panel, headless: a real import of the tiny ONNX network (TVM's frontend, the real
LocalMeasurer, an in-memory store), a tune and the race that follows it (ONNX Runtime), the
tables and plots they fill, a task opened in the editor, and what it refuses. Then under real
conditions: a second notebook on the same database file, a budget asked for twice, a race
stopped, a click that reaches the kernel twice, and a race read on a busy machine."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable

import onnx
import pytest

from explorer.core import ModelRace, RaceEntry
from explorer.model import NETWORKS
from widgets import _ui
from widgets._context import Context
from widgets._jobs import JobState
from widgets.explorer import MODEL_TAB, SCHEDULE_TAB, Explorer
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


def imported_panel(ctx: Context, onnx_path) -> ModelPanel:
    """A Model panel with the tiny network imported."""
    panel = ModelPanel(ctx)
    panel.path.value = str(onnx_path)
    panel.import_file()
    settle(panel)
    return panel


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
def test_import_tune_race_and_open_a_task(local_ctx, tiny_onnx, tmp_path) -> None:
    panel = ModelPanel(local_ctx)
    assert panel.models.options == () and "Import a model" in str(panel.tasks_figure.layout.title)
    panel.path.value = str(tiny_onnx)
    panel.import_button.click()
    # an import stores its model whole or not at all: Stop has nothing to stop there
    assert panel.import_button.disabled and panel.stop_button.disabled
    settle(panel)
    assert panel.status.value.startswith("Imported tiny: 6 tasks, untuned ")
    assert panel.models.options == (("tiny (6 tasks)", 1),) and panel.model is not None
    rows = panel.tasks_table.value.split("<tr>")[2:]
    assert len(rows) == 6 and "fused_conv2d1_add_add1_relu" in rows[0]  # the costliest first
    assert panel.task.value == "fused_conv2d1_add_add1_relu"
    assert len(panel.tasks_figure.data) == 6  # one segment per task

    panel.trials.value, panel.strategy.value, panel.scheduler.value = "10", "random", "round-robin"
    panel.tune_button.click()
    tune_job = panel.job
    settle(panel)
    assert tune_job is not None and panel.progress.value == 10
    assert panel.progress.bar_style == "success"
    # the race starts once the tune's job has ended
    assert panel.job is not tune_job and panel.job.name == "Model race"
    settle(panel)
    assert panel.status.value.startswith("Race 1: tuned "), panel.status.value
    race = panel.ctx.store.model_races(panel.model.id)[-1]
    assert race.tune == "random/seed0/round-robin" and race.trials == 10
    assert "<b>Race 1</b> (10 trials spent" in panel.race_table.value
    assert all(name in panel.race_table.value for name in ("untuned", "tuned", "onnxruntime"))
    names = [t.name for t in panel.race_figure.data]
    assert names == [
        "tuned: random/seed0/round-robin",
        "ONNX Runtime (1 in each race)",
        "untuned (latest race)",
    ]
    # each race drawn as multiples of its own ONNX Runtime time
    tuned, ort = (race.entry(n).fastest_secs for n in ("tuned", "onnxruntime"))
    assert list(panel.race_figure.data[0].y) == pytest.approx([tuned / ort])
    assert list(panel.race_figure.data[1].y) == [1.0, 1.0]
    assert "tuned" in panel.tasks_table.value or "best" in panel.tasks_table.value

    # The same file again: found in the store, and said so.
    panel.import_button.click()
    settle(panel)
    assert panel.status.value.startswith("tiny is already stored (the same file): 6 tasks")
    assert len(panel.ctx.store.models()) == 1

    # A budget past the core's limit is refused (it is a slip of the keyboard), not started.
    panel.trials.value = "1000000000"
    assert panel.tune() is None
    assert panel.status.value.startswith("Not started: Trials must be at most 1000000: ")
    # A stopped tune stops: no race starts by itself.
    races = len(panel.ctx.store.model_races(panel.model.id))
    panel.trials.value = "100000"
    stopped = panel.tune()
    assert stopped is not None
    panel.stop_button.click()
    assert stopped.wait(WAIT) and stopped.state is JobState.CANCELLED, stopped.exception
    assert panel.job is stopped and not panel.tune_button.disabled
    said = panel.status.value
    assert said.startswith("Tune random/seed0/round-robin stopped"), said
    assert len(panel.ctx.store.model_races(panel.model.id)) == races

    # A second model (the same network under another name). While its import runs the Model
    # list stays on the model the job is about; picking a model then says what it is, and
    # its plots keep no zoom or axes of the other's (a new user saw the last model's race
    # status and race axes under a model never raced).
    tiny_id = panel.model.id
    other = tmp_path / "tiny2.onnx"
    shutil.copy(tiny_onnx, other)
    panel.path.value = str(other)
    panel.import_file()
    assert panel.models.disabled
    settle(panel)
    assert not panel.models.disabled and panel.model.name == "tiny2"
    # the Trials bar is a tune's: a new user saw tiny's full green bar under tiny2, never tuned
    assert (panel.progress.value, panel.progress.bar_style) == (0, ""), panel.progress
    panel.models.value = tiny_id
    said = panel.status.value
    assert said.startswith("tiny: 6 tasks, untuned ") and "latest race: tuned " in said, said
    assert "found outside this model's tunes" not in panel.tasks_table.value
    assert panel.race_figure.layout.uirevision == "model tiny"
    panel.models.value = panel.models.options[-1][1]
    said = panel.status.value
    assert said.startswith("tiny2: 6 tasks, untuned ") and said.endswith("not raced yet."), said
    # tiny2's tasks are tiny's programs: their best is tiny's tune's, and the table says so
    assert "* found outside this model's tunes" in panel.tasks_table.value
    assert panel.race_figure.layout.uirevision == "model tiny2" and not panel.race_figure.data
    panel.models.value = tiny_id

    session = panel.open_task()
    task = panel.model.task(str(panel.task.value))
    assert session is not None and session.workload == task.workload
    assert local_ctx.session is session
    assert panel.status.value.startswith(f"Opened tiny:{task.name} in the editor")
    # A second click: a new user's history then held two identical load steps.
    steps = session.snapshot.step_id
    assert panel.open_task() is session and session.snapshot.step_id == steps


def test_what_it_refuses_before_any_work(local_ctx, tmp_path) -> None:
    panel = ModelPanel(local_ctx)
    assert panel.tune() is None and panel.status.value.startswith("Nothing to tune")
    assert panel.race() is None and panel.status.value.startswith("Nothing to race")
    assert panel.import_file() is None and "give the ONNX file's path" in panel.status.value
    panel.path.value, panel.inputs.value = "x.onnx", "x=1x0"
    assert panel.import_file() is None and "every dimension must be in" in panel.status.value
    # the box is named Inputs: no command-line flag in what the panel says
    panel.inputs.value = "abc"
    assert panel.import_file() is None and "--input" not in panel.status.value
    panel.path.value, panel.inputs.value = str(tmp_path), ""
    job = panel.import_file()
    assert job is not None and job.wait(WAIT) and job.state is JobState.ERROR
    assert f"{tmp_path} is a folder" in panel.status.value
    bad = tmp_path / "bad.onnx"
    bad.write_text("not a network")
    panel.path.value, panel.inputs.value = str(bad), ""
    job = panel.import_file()
    assert job is not None and job.wait(WAIT) and job.state is JobState.ERROR
    assert panel.status.value.startswith("Model import failed: ")
    assert "is not an ONNX model" in panel.status.value and not panel.import_button.disabled
    # the Trials bar is a tune's: a failed import turned it red beside later successes
    assert panel.progress.bar_style == ""
    assert local_ctx.store.models() == []


def test_the_explorer_has_a_model_tab_that_opens_tasks_in_the_editor(local_measurer, tiny_onnx):
    ex = Explorer(store=":memory:", measurer=local_measurer)
    try:
        ex.tabs.selected_index = MODEL_TAB
        panel = ex.model
        panel.path.value = str(tiny_onnx)
        panel.import_file()
        settle(panel)
        panel.open_task()
        assert ex.tabs.selected_index == SCHEDULE_TAB
        assert ex.session is not None and ex.session.workload.family == "task"
        # the expression form has nothing to edit for a task: it says whose shapes they are
        assert ex.builder.form.layout.display == "none"
        assert "of an imported model" in ex.builder.description.value
        # no operator of the catalog is on screen (the list said "matmul"), and Build says so
        assert ex.builder.family.value is None and ex.builder.build() is None
        assert "pick an operator first" in ex.builder.error.value
        ex.builder.family.value = "conv2d"  # picking one shows its form again
        assert ex.builder.form.layout.display is None and ex.builder.fields
    finally:
        ex.close()


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
    mine, theirs = ModelPanel(first), ModelPanel(second)
    try:
        assert mine.models.options == ()
        theirs.path.value = str(tiny_onnx)
        theirs.import_file()
        settle(theirs)
        assert eventually(lambda: mine.models.options == (("tiny (6 tasks)", 1),), 4 * POLL_SECS)
        # nothing was shown, so the new model is, with its tasks
        assert mine.model is not None and mine.model.name == "tiny"
        assert len(mine.tasks_table.value.split("<tr>")[2:]) == 6
        mine._say("what the user did last")
        picked = mine.task.options[-1]  # not the slowest, which the list starts on
        mine.task.value = picked
        theirs.race()
        settle(theirs)
        assert eventually(lambda: "<b>Race 1</b>" in mine.race_table.value, 4 * POLL_SECS)
        assert [t.name for t in mine.race_figure.data][-2:] == [
            "ONNX Runtime (1 in each race)",
            "untuned (latest race)",
        ]
        # the first notebook's status line and task stay what its own user did last
        assert mine.status.value == "what the user did last"
        assert mine.task.value == picked  # was set back to the slowest by the re-read
    finally:
        for panel in (mine, theirs):
            panel.close()
        first.close()
        second.close()


@pytest.mark.timeout(900)
def test_budget_again_double_click_and_a_stopped_race(local_ctx, tiny_onnx) -> None:
    panel = imported_panel(local_ctx, tiny_onnx)
    panel.trials.value, panel.strategy.value = "4", "random"
    assert panel.tune() is not None
    settle(panel)
    # the race that follows a tune stops when asked, at once, and stores nothing
    assert panel.job is not None and panel.job.name == RACE
    # a click on Tune meanwhile (a double-click's second) leaves the race's status alone: it
    # said "Not started: ... has spent 4 trials already" over the race that followed
    racing = panel.status.value
    assert panel.tune() is None and panel.status.value == racing, panel.status.value
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
    panel = imported_panel(local_ctx, tiny_onnx)
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


def test_an_import_and_a_tune_on_a_busy_machine_say_so(local_ctx, tiny_onnx) -> None:
    """Timed beside two CPU burners, the untuned times (the shares that order the tune's first
    chunks) read slow: the import's status and the table under them say so, after a re-pick
    too; and a tune's chunk run beside them says it in the progress line."""
    from explorer.model import ModelTuneProgress
    from explorer.testing.load import cpu_burners

    panel = ModelPanel(local_ctx)
    panel.path.value = str(tiny_onnx)
    with cpu_burners(2):
        panel.import_file()
        settle(panel)
    said = panel.status.value
    assert said.startswith("Imported tiny: 6 tasks") and "Other processes used" in said, (
        said,
        [t.untuned_busy for t in panel.model.tasks],
    )
    assert "while tiny's tasks were timed on import" in said, said
    table = panel.tasks_table.value
    assert "class='se-model-busy'" in table and "Other processes used" in table, table
    panel.refresh_models(select=panel.model.id)  # picked again: the table still says it
    assert "class='se-model-busy'" in panel.tasks_table.value
    progress = ModelTuneProgress("random/seed0/round-robin", "mean", 8, 16, (), 0.6)
    panel._on_progress(progress)
    assert panel.status.value.endswith(
        "Other processes used 60% of the CPUs while mean was tuned: its trials read slower "
        "than on a quiet machine and may rank its schedules wrongly (the race times the "
        "network again)."
    ), panel.status.value


@pytest.mark.timeout(900)
def test_a_tune_that_learns_from_the_other_tasks(local_ctx, tiny_onnx) -> None:
    panel = imported_panel(local_ctx, tiny_onnx)
    model = panel.model
    assert model is not None and not panel.transfer.value  # off unless asked for
    # a strategy without a model to teach is refused in one sentence, before any work
    panel.trials.value, panel.strategy.value, panel.transfer.value = "4", "random", True
    assert panel.tune() is None
    said = panel.status.value
    assert said.startswith("Not started: strategy 'random' cannot learn from other workloads'")
    assert said.endswith("(untick Learn from other tasks, or pick one).")
    assert "these can: autotvm, evolutionary" in said
    assert local_ctx.store.model_runs(model.id) == []

    panel.strategy.value = "evolutionary"
    job = panel.tune()
    assert job is not None
    said = panel.status.value
    assert said == (
        "Tuning tiny: 4 trials with evolutionary (gradient, learning from other tasks)..."
    )
    assert job.wait(WAIT) and job.state is JobState.FINISHED, job.exception
    runs = local_ctx.store.model_runs(model.id)
    assert runs and {tune for _, _, tune in runs} == {"evolutionary+transfer/seed0/gradient"}
    assert all(
        local_ctx.store.get_run(run_id).settings.get("transfer_from") == "auto"
        for run_id, _, _ in runs
    )
    # the race that follows is stopped: this test is about the tune
    assert eventually(lambda: panel.job is not None and panel.job.name == RACE, 30)
    panel.stop()
    settle(panel, JobState.ERROR)
    # Trials is that tune's total, as for any other tune
    assert panel.tune() is None
    assert panel.status.value.startswith(
        "Not started: tiny's tune with evolutionary (gradient, learning from other tasks) has "
        "spent 4 trials already"
    ), panel.status.value
