"""A race beside CPU burners: what it can and cannot measure, said plainly (issue 21 for models).

TVM's thread pool yields its cores while a thread waits, so a 2-thread build beside busy cores
waits for another process's time slice in most calls; ONNX Runtime and 1-thread builds do not.
The race cannot measure a 2-thread build's cost then, so it says the machine was busy instead
of letting a slow reading pass for a verdict; and the tune still picks the fast schedules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from explorer.machine import BUSY
from explorer.model import (
    TUNED,
    UNTUNED,
    ModelTuneProgress,
    busy_note,
    import_busy_note,
    import_model,
    race_model,
    tune_model,
)
from explorer.storage import get_store
from explorer.target import Target

# Timing-sensitive: run alone after the parallel part of `make test` (the `serial` marker).
pytestmark = [pytest.mark.serial, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def two_cores(tiny_onnx, measurer, tmp_path_factory, import_and_tune):
    """The tiny network for two cores, tuned on the quiet machine."""
    db = tmp_path_factory.mktemp("load") / "records.db"
    model, tune = import_and_tune(tiny_onnx, db, measurer, cores=2, trials=16)
    return db, model, tune


def test_a_race_beside_burners_says_what_slowed_it(two_cores, burners):
    db, model, tune = two_cores
    with get_store(db) as store:
        busy = race_model(model, store, tune=tune, rounds=2)
    others = busy.environment["others_cpus"]
    assert others >= 1.0, busy.environment  # two burners sharing 2 cores with the race
    note = busy_note(busy)
    assert note is not None and f"kept {others:.1f} of the cores busy" in note
    assert "2-thread TVM builds" in note and "race again" in note
    for entry in busy.entries:  # slowed, but every build still ran and is checked
        assert entry.error is None and entry.fastest_secs > 0, entry
    out = subprocess.run(
        [sys.executable, "-m", "explorer", "model", "show", model.name, "--db", str(db)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert note in out.stdout, out.stdout  # the latest race, with its note


def test_a_race_has_a_note_exactly_when_other_processes_kept_the_cores_busy(two_cores):
    """Without burners of its own: on a quiet machine (a plain `make test`) no note and the
    tuned network faster; beside the burners a whole suite may run with (issue 21's "done
    when"), the race says the machine was busy rather than pass a reading off as quiet."""
    db, model, tune = two_cores
    with get_store(db) as store:
        race = race_model(model, store, tune=tune, rounds=2)
    others = race.environment["others_cpus"]
    if others / 2 >= BUSY:  # the machine was not quiet: said, never hidden
        note = busy_note(race)
        assert note is not None and f"kept {others:.1f} of the cores busy" in note
        return
    assert busy_note(race) is None
    # the 2-thread tuned network against its 1-thread default lowering, undisturbed
    assert race.entry(TUNED).fastest_secs < race.entry(UNTUNED).fastest_secs


def test_a_tune_beside_burners_still_finds_the_fast_convolution(tiny_onnx, measurer, tmp_path):
    """Beside two burners, most calls of a 2-thread convolution wait 4-8 ms for a time slice
    (it runs in 40 us); the build takes each task's fastest reading, where the undisturbed
    calls show. Before, the tuned network was the untuned one (1.4 ms convolution chosen).

    How fast the chosen one reads depends on how the machine shares its cores, which no
    estimator controls: 20-40 us here with two burners (the scheduler's autogroups on or off),
    0.75 ms on a CI host whose quiet untuned reading was already 1.6x slow (2.2 ms). The
    promise is the choice: a schedule clearly faster than the untuned one, never that one."""
    from explorer.model import best_schedules
    from explorer.testing.load import cpu_burners

    with get_store(tmp_path / "records.db") as store:
        model = import_model(
            tiny_onnx, store, measurer=measurer, target=Target.local_cpu(num_cores=2)
        )
        conv = next(t for t in model.tasks if t.name == "fused_conv2d1_add_add1_relu")
        progress: list[ModelTuneProgress] = []
        with cpu_burners(2):
            tune = tune_model(
                model, store, measurer, max_trials=12, strategy="random",
                scheduler="round-robin", chunk=8, on_progress=progress.append,
            )  # fmt: skip
        chosen = dict(best_schedules(model, store, tune=tune))
    best = chosen[conv.name].result.fastest_secs
    assert best is not None and best < conv.untuned_secs / 2, (best, conv.untuned_secs)
    assert progress, "no chunk was reported"
    for p in progress:  # every chunk beside the burners says so (their time is not the tune's)
        assert p.busy_elsewhere is not None and p.busy_elsewhere >= BUSY, p.busy_elsewhere
        assert p.busy_note is not None and f"while {p.task} was tuned" in p.busy_note


def test_an_import_beside_burners_says_its_untuned_times_read_slow(tiny_onnx, measurer, tmp_path):
    """The untuned times give each task's share of the network, which orders the tune's first
    chunks: taken beside burners, the model says so where its tasks are listed."""
    from explorer.testing.load import cpu_burners

    db = tmp_path / "records.db"
    with get_store(db) as store, cpu_burners(2):
        model = import_model(tiny_onnx, store, measurer=measurer)
    note = import_busy_note(model)
    assert note is not None and "while tiny's tasks were timed on import" in note, note
    assert all(t.untuned_busy is not None and t.untuned_busy >= BUSY for t in model.tasks)
    with get_store(db) as store:  # stored with the model: another process reads it too
        assert import_busy_note(store.get_model("tiny")) == note
    out = subprocess.run(
        [sys.executable, "-m", "explorer", "model", "show", "tiny", "--db", str(db)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert note in out.stdout, out.stdout
