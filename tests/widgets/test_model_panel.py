"""The Model panel, headless: a real import of the tiny ONNX network (TVM's frontend, the real
LocalMeasurer, an in-memory store), a tune and the race that follows it (ONNX Runtime), the
tables and plots they fill, a task opened in the editor, and what it refuses."""

from __future__ import annotations

import shutil

import onnx
import pytest

from explorer.model import NETWORKS
from widgets._jobs import JobState
from widgets.explorer import MODEL_TAB, SCHEDULE_TAB, Explorer
from widgets.model import ModelPanel

WAIT = 300.0


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny.onnx"
    onnx.save(NETWORKS["tiny"](), path)
    return path


def settle(panel: ModelPanel) -> None:
    job = panel.job
    assert job is not None and job.wait(WAIT), "the job did not end"
    assert job.state is JobState.FINISHED, job.exception


@pytest.mark.timeout(900)
def test_import_tune_race_and_open_a_task(local_ctx, tiny_onnx, tmp_path) -> None:
    panel = ModelPanel(local_ctx)
    assert panel.models.options == () and "Import a model" in str(panel.tasks_figure.layout.title)
    panel.path.value = str(tiny_onnx)
    panel.import_button.click()
    # an import stores its model whole or not at all: Stop has nothing to stop there
    assert panel.import_button.disabled and panel.stop_button.disabled
    settle(panel)
    assert panel.status.value.startswith("Imported tiny: 5 tasks, untuned ")
    assert panel.models.options == (("tiny (5 tasks)", 1),) and panel.model is not None
    rows = panel.tasks_table.value.split("<tr>")[2:]
    assert len(rows) == 5 and "fused_conv2d1_add_add1_relu" in rows[0]  # the costliest first
    assert panel.task.value == "fused_conv2d1_add_add1_relu"
    assert len(panel.tasks_figure.data) == 5  # one segment per task

    panel.trials.value, panel.strategy.value, panel.scheduler.value = "10", "random", "round-robin"
    panel.tune_button.click()
    tune_job = panel.job
    settle(panel)
    assert tune_job is not None and panel.progress.value == 10
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
        "ONNX Runtime (latest race)",
        "untuned (latest race)",
    ]
    ort = race.entry("onnxruntime").fastest_secs * 1e3
    assert list(panel.race_figure.data[1].y) == [ort, ort]
    assert "tuned" in panel.tasks_table.value or "best" in panel.tasks_table.value

    # The same file again: found in the store, and said so.
    panel.import_button.click()
    settle(panel)
    assert panel.status.value.startswith("tiny is already stored (the same file): 5 tasks")
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
    panel.models.value = tiny_id
    said = panel.status.value
    assert said.startswith("tiny: 5 tasks, untuned ") and "latest race: tuned " in said, said
    assert "found outside this model's tunes" not in panel.tasks_table.value
    assert panel.race_figure.layout.uirevision == "model tiny"
    panel.models.value = panel.models.options[-1][1]
    said = panel.status.value
    assert said.startswith("tiny2: 5 tasks, untuned ") and said.endswith("not raced yet."), said
    # tiny2's tasks are tiny's programs: their best is tiny's tune's, and the table says so
    assert "* found outside this model's tunes" in panel.tasks_table.value
    assert panel.race_figure.layout.uirevision == "model tiny2" and not panel.race_figure.data
    panel.models.value = tiny_id

    session = panel.open_task()
    task = panel.model.task(str(panel.task.value))
    assert session is not None and session.workload == task.workload
    assert local_ctx.session is session
    assert panel.status.value.startswith(f"Opened tiny:{task.name} in the editor")


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
