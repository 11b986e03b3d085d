"""The search launcher, headless: real short searches with the real LocalMeasurer."""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from explorer.measure import Candidate, LocalMeasurer, MeasureConfig, Measurer, MeasureResult
from explorer.search import STRATEGIES, capabilities
from explorer.session import ScheduleSession
from explorer.space import DesignSpace, KnobSpace, Point, start_mapping
from explorer.storage import NewTrial
from explorer.types import MeasureStatus
from explorer.workloads import get_workload
from widgets import SearchPanel, _ui
from widgets._context import Context
from widgets._jobs import JobState
from widgets.search_panel import NO_MODEL

WAIT = 180.0  # generous: the machine is shared
MATMUL = get_workload("matmul", M=64, N=64, K=64)


@pytest.fixture(scope="module")
def real_measurer():
    """One LocalMeasurer for the module (starting its worker processes takes a while)."""
    with LocalMeasurer(MeasureConfig(repeat=3, min_repeat_secs=0.005), num_build_workers=1) as m:
        yield m


class Lent(Measurer):
    """Lends a measurer to one search and counts ``close`` (the panel must call it once)."""

    def __init__(self, inner: Measurer, gate: threading.Event | None = None, fail: bool = False):
        self.inner, self.gate, self.fail = inner, gate, fail
        self.closed = 0

    def measure(
        self,
        candidates: Sequence[Candidate],
        *,
        best_secs: float | None = None,
        reference: bool = False,
    ) -> list[MeasureResult]:
        if self.gate is not None:
            assert self.gate.wait(WAIT)
        if self.fail:
            raise RuntimeError("the measurer broke")
        return self.inner.measure(candidates, best_secs=best_secs, reference=reference)

    def close(self) -> None:
        self.closed += 1


class Instant(Measurer):
    """Answers at once (for tests about the panel, not about measuring)."""

    def measure(
        self,
        candidates: Sequence[Candidate],
        *,
        best_secs: float | None = None,
        reference: bool = False,
    ) -> list[MeasureResult]:
        return [MeasureResult(MeasureStatus.OK, (1e-3,), flops=1) for _ in candidates]


@pytest.fixture
def make_panel():
    made = []

    def make(measurer: Measurer, *, session: bool = True, batch_size: int = 8):
        lent: list[Lent] = []

        def make_measurer() -> Measurer:
            lent.append(measurer if isinstance(measurer, Lent) else Lent(measurer))
            return lent[-1]

        ctx = Context(store=":memory:", make_measurer=make_measurer)
        if session:
            ctx.set_session(ScheduleSession(MATMUL, ctx.target))
        panel = SearchPanel(ctx, batch_size=batch_size)
        made.append((ctx, panel))
        return ctx, panel, lent

    yield make
    for ctx, panel in made:
        if panel.job is not None:
            panel.job.cancel()
            panel.job.wait(WAIT)
        panel.close()
        ctx.close()


def test_a_real_search_runs_to_the_end(make_panel, real_measurer):
    ctx, panel, lent = make_panel(real_measurer)
    panel.strategy.value = "random"
    panel.trials.value = 6
    panel.seed.value = 3
    job = panel.start()
    assert job is panel.job and job is not None
    assert panel.start_button.disabled and not panel.stop_button.disabled
    assert job.wait(WAIT)
    assert job.state is JobState.FINISHED, panel.status.value
    assert panel.progress.max == 6 and panel.progress.value == 6
    assert panel.status.value.startswith("Done: 6 trials")
    (run,) = ctx.store.runs(workload=MATMUL)
    assert run.strategy == "random" and run.settings["seed"] == 3
    assert ctx.store.count_trials(run_id=run.id) >= 6  # plus the final re-measurements
    assert [m.closed for m in lent] == [1]
    assert not panel.start_button.disabled and panel.stop_button.disabled

    # Issue 21: "Open best in editor" replaced the history; it is one more step of it now.
    session = ctx.session
    session.apply("split", loop="i", factors=[None, 16])
    session.apply("split", loop="j", factors=[None, 8])
    mine = session.snapshot.step_id
    assert not panel.open_best_button.disabled
    panel.open_best_button.click()
    assert ctx.session is session
    best = panel.result.best
    assert best.run_id == run.id
    assert session.candidate().trace == best.candidate.trace
    rows = ctx.store.trial_rows(run_id=run.id)
    number = 1 + sum(1 for r in rows if r.id < best.id and not r.is_remeasure)
    assert panel.status.value == (
        f"Opened the search's best, trial {number} of run {run.id} as step "
        f"{session.snapshot.step_id} in the editor (Undo goes back to step {mine})."
    )
    assert session.undo().step_id == mine  # back where the user was, every step kept
    assert len(session.history) == 2


def test_stop_mid_run(make_panel, real_measurer):
    ctx, panel, lent = make_panel(real_measurer, batch_size=2)
    panel.trials.value = 40
    job = panel.start()
    deadline = time.monotonic() + WAIT
    while panel.progress.value < 2 and time.monotonic() < deadline:
        _ui.drain()  # as the kernel's loop would: progress reaches the bar on the UI thread
        time.sleep(0.05)
    panel.stop_button.click()
    assert "Stopping" in panel.status.value
    assert job.wait(WAIT)
    assert job.state is JobState.CANCELLED
    assert panel.result.stopped_because == "cancelled"
    assert 2 <= panel.result.num_trials < 40
    assert panel.progress.value < panel.progress.max
    assert panel.status.value.startswith("Stopped:")
    assert [m.closed for m in lent] == [1]


def test_a_second_start_is_refused_while_running(make_panel, real_measurer):
    gate = threading.Event()
    ctx, panel, lent = make_panel(Lent(Instant(), gate=gate))
    panel.trials.value = 2
    first = panel.start()
    assert first is not None
    assert panel.start() is None
    assert "already running" in panel.status.value
    assert ctx.search_jobs.current is first
    gate.set()
    assert first.wait(WAIT) and first.state is JobState.FINISHED
    assert panel.start() is not None  # allowed again once it ended
    assert panel.job.wait(WAIT)


def test_errors_are_shown_as_text(make_panel):
    ctx, panel, lent = make_panel(Lent(Instant(), fail=True))
    job = panel.start()
    assert job.wait(WAIT)
    assert job.state is JobState.ERROR
    assert panel.status.value == "Search failed: RuntimeError: the measurer broke"
    assert panel.progress.bar_style == "danger"
    assert [m.closed for m in lent] == [1]

    panel.trials.value = 0
    assert panel.start() is None and "at least 1" in panel.status.value
    # A decimal is refused, never read as its digits (IntText's front end made "2.5" into 25).
    runs = ctx.store.runs()
    for box, typed, said in [
        (panel.trials, "2.5", "Max trials must be a whole number (got 2.5)."),
        (panel.trials, "", "Max trials must be a whole number (got an empty box)."),
        (
            panel.trials,
            "1000000000",
            "Max trials must be at most 1000000: a million trials take days; split the work "
            "into several runs (got 1000000000).",
        ),
        (panel.seed, "-1", "Seed must be a whole number >= 0 (got -1)."),
        # Above the databases' largest integer: a new user's seed once started and was stored.
        (
            panel.seed,
            "99999999999999999999999",
            "Seed must be at most 9223372036854775807 (got 99999999999999999999999).",
        ),
        # Refused before starting, as every other box is (it once failed the started search).
        (
            panel.secs,
            1e23,
            "Max secs must be at most 2592000: 30 days; resume the run to go on longer "
            "(got 1e+23).",
        ),
        (panel.secs, -5.0, "Max secs must be 0 (no limit) or positive (got -5)."),
    ]:
        panel.trials.value, panel.seed.value, panel.secs.value = 4, 0, 0.0
        box.value = typed
        assert panel.start() is None and panel.status.value == said
    assert ctx.store.runs() == runs  # nothing new was started

    _, alone, _ = make_panel(Instant(), session=False)
    alone.start_button.click()
    assert alone.job is None and "first" in alone.status.value


def test_a_hand_made_schedule_starts_droplet_and_is_the_reference(make_panel):
    ctx, panel, _ = make_panel(Instant())
    ctx.session.apply("split", loop="i", factors=[None, 8])  # not a point of the knob space
    ctx.session.apply("parallel", loop="i_0")
    panel.strategy.value = "droplet"
    panel.from_session.value = True
    panel.trials.value = 3
    job = panel.start()
    assert job.wait(WAIT) and job.state is JobState.FINISHED, panel.status.value
    (run,) = ctx.store.runs()
    baseline, first = ctx.store.trials(run_id=run.id)[:2]  # the unscheduled program, then
    assert baseline.candidate.decisions == {"baseline": True}
    assert first.candidate.trace == ctx.session.candidate().trace
    assert first.candidate.decisions["start"] is True  # the run's reference
    # Every trial takes 1 ms here: the answer is the user's schedule or one as fast.
    status = panel.status.value
    # (the same sentences as `explorer tune`: TuneResult.verdicts)
    assert (
        "No faster schedule found: your start" in status
        or "1.00x faster than your start" in status
    )
    # ...and as fast as the unscheduled program, measured as the run's baseline
    assert "No schedule beat the unscheduled program (" in status and "it is the answer." in status
    # Issue 21: how the schedule was mapped into the space is shown, as the CLI prints it
    mapping = start_mapping(ctx.session.candidate())
    assert not mapping.exact and mapping.notes
    shown = html.unescape(panel.start_mapping.value)
    assert "Your schedule (step 2) is measured first, as the run's reference" in shown
    assert f"the nearest point of its space, {mapping.point.key()}" in shown
    assert all(note in shown for note in mapping.notes), shown


def test_cost_model_and_start_options_follow_the_strategy(make_panel):
    ctx, panel, _ = make_panel(Instant())
    panel.strategy.value = "random"
    assert panel.cost_model.disabled and panel.cost_model.value == NO_MODEL
    assert panel.from_session.disabled and "droplet" in panel.from_session_note.value
    panel.strategy.value = "autotvm"
    assert not panel.cost_model.disabled
    assert list(panel.cost_model.options) == ["xgb-rank", "xgb-reg"]
    panel.strategy.value = "droplet"
    assert not panel.from_session.disabled and panel.from_session_note.value == ""
    panel.strategy.value = "static"  # its one model: shown, nothing to choose
    assert list(panel.cost_model.options) == ["static"] and panel.cost_model.disabled
    # the options are the strategies' declarations (issue 10: no reflection on constructors)
    for name in STRATEGIES:
        panel.strategy.value = name
        declared = list(capabilities(name).cost_models) or [NO_MODEL]
        assert list(panel.cost_model.options) == declared, name
        assert panel.from_session.disabled != capabilities(name).start, name
        assert panel.transfer.disabled != capabilities(name).transfer, name
        assert ("learn from other" in panel.transfer_note.value) == panel.transfer.disabled


def test_learn_from_other_workloads_runs_the_model_on_their_trials_first(make_panel):
    ctx, panel, _ = make_panel(Instant())
    other = get_workload("matmul", M=32, N=32, K=32)
    space = KnobSpace(DesignSpace.of(other, ctx.target))
    rng = np.random.default_rng(0)
    cands = [c for c in (space.materialize(space.random_point(rng)) for _ in range(12)) if c]
    run = ctx.store.create_run(other, ctx.target, "random")
    ctx.store.add_trials(
        run.id,
        [
            NewTrial(c, MeasureResult(MeasureStatus.OK, (1e-3 * (1 + i),)))
            for i, c in enumerate(cands)
        ],
    )
    panel.strategy.value = "evolutionary"
    panel.transfer.value = True
    panel.trials.value = 2
    job = panel.start()
    assert job is not None and job.wait(WAIT) and job.state is JobState.FINISHED, (
        panel.status.value
    )
    settings = panel.result.run.settings
    assert settings["transfer_from"] == "auto"
    searched = ctx.store.get_run(panel.result.run.id).settings
    assert searched["transfer_trials"] == len(cands)
    said = f"Transfer: its model learned first from {len(cands)} trials of other workloads."
    assert said in panel.status.value
    # unticked, value search keeps to this workload's trials (ticked is its default in Python)
    panel.strategy.value = "value"
    panel.transfer.value = False
    job = panel.start()
    assert job is not None and job.wait(WAIT) and job.state is JobState.FINISHED, (
        panel.status.value
    )
    assert panel.result.run.settings["transfer_from"] is None
    assert "Transfer:" not in panel.status.value


def test_the_chosen_cost_model_is_the_one_the_search_runs_with(make_panel):
    ctx, panel, _ = make_panel(Instant())
    panel.strategy.value = "autotvm"
    panel.cost_model.value = "xgb-reg"
    panel.trials.value = 2
    job = panel.start()
    assert job is not None and job.wait(WAIT), panel.status.value
    assert job.state is JobState.FINISHED, panel.status.value
    assert panel.result is not None and panel.result.run.settings["loss"] == "reg"


def test_droplet_starts_from_my_schedule(make_panel):
    ctx, panel, _ = make_panel(Instant())
    space = KnobSpace(DesignSpace.of(MATMUL, ctx.target))
    start = space.materialize(Point(1, (3, 2, 1, 0)))
    ctx.session.load_trace(start.trace)  # a schedule with knob coordinates
    panel.strategy.value = "droplet"
    panel.from_session.value = True
    panel.trials.value = 3
    job = panel.start()
    assert job.wait(WAIT) and job.state is JobState.FINISHED, panel.status.value
    (run,) = ctx.store.runs()
    assert run.strategy == "droplet"
    first = ctx.store.trials(run_id=run.id)[1]  # after the unscheduled baseline
    assert first.candidate.decisions["point"] == [3, 2, 1, 0]  # droplet measured its start
    assert panel.start_mapping.value == (
        "Your schedule (step 1) is the point 1:3,2,1,0 of the search space: the search "
        "starts there, nothing of it changed."
    )


def test_dom_classes_and_labels(make_panel):
    _, panel, _ = make_panel(Instant())
    expected = {
        panel.widget: "se-search",
        panel.strategy: "se-strategy",
        panel.trials: "se-trials",
        panel.secs: "se-secs",
        panel.seed: "se-seed",
        panel.start_button: "se-start",
        panel.stop_button: "se-stop",
        panel.progress: "se-progress",
        panel.status: "se-search-status",
        panel.open_best_button: "se-open-best",
        panel.from_session: "se-from-session",
        panel.transfer: "se-transfer",
    }
    for widget, css in expected.items():
        assert css in widget._dom_classes
    assert [b.description for b in (panel.start_button, panel.stop_button)] == ["Start", "Stop"]
    assert panel.open_best_button.description == "Open best in editor"


def test_the_settings_say_what_they_mean(make_panel):
    _ctx, panel, _lent = make_panel(Instant(), session=False)
    assert "0: no limit" in panel.secs.description  # not only in a tooltip (issue 10)
