"""``JobRunner`` and ``Job``: a background call whose end reaches the UI thread, as data."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from widgets import _ui
from widgets._jobs import Job, JobRunner, JobState

WAIT = 30.0


@pytest.fixture
def runner():
    r = JobRunner("test-job")
    yield r
    r.shutdown()


def test_a_job_ends_on_the_ui_thread_with_its_result(runner: JobRunner) -> None:
    seen: list[tuple[JobState, object, bool]] = []
    job = runner.submit(
        "add",
        lambda _job: 2 + 3,
        on_done=lambda j: seen.append((j.state, j.result, threading.current_thread().name)),
    )
    assert isinstance(job.future, Future)
    assert job.wait(WAIT) and job.is_settled and not runner.busy
    assert seen == [(JobState.FINISHED, 5, threading.main_thread().name)]
    assert job.future.result() == 5 and job.exception is None and not job.is_active


def test_what_a_job_raises_is_kept_as_data(runner: JobRunner) -> None:
    def fail(_job: Job) -> None:
        raise KeyError("missing")

    states: list[JobState] = []
    job = runner.submit("fail", fail, on_done=lambda j: states.append(j.state))
    assert job.wait(WAIT) and states == [JobState.ERROR]
    assert isinstance(job.exception, KeyError) and job.result is None
    again = runner.submit("next", lambda _job: "ok")  # the runner is free again
    assert again.wait(WAIT) and again.result == "ok"


def test_a_job_is_busy_until_its_end_reached_the_ui(runner: JobRunner) -> None:
    release = threading.Event()
    job = runner.submit("slow", lambda _job: release.wait(WAIT))
    with pytest.raises(RuntimeError, match="'slow' is still running; stop it or wait"):
        runner.submit("second", lambda _job: None)
    release.set()
    job.future.result(WAIT)  # ended on its thread ...
    assert job.state is JobState.FINISHED and runner.busy and not job.is_settled
    freed: list[bool] = []
    runner.when_free(lambda: freed.append(runner.busy))
    _ui.drain()  # ... and the UI has seen it once its queued calls ran
    assert job.is_settled and freed == [False] and job.wait(0)


def test_a_cancelled_job_says_so(runner: JobRunner) -> None:
    started = threading.Event()

    def poll(job: Job) -> str:
        started.set()
        while not job.is_cancelled():
            job._cancel.wait(0.01)
        return "stopped early"

    job = runner.submit("poll", poll)
    assert started.wait(WAIT)
    assert job.state is JobState.RUNNING and job.is_active
    job.cancel()
    assert job.wait(WAIT) and job.state is JobState.CANCELLED and job.result == "stopped early"


def test_a_job_that_never_started_calls_nothing_after_shutdown() -> None:
    runner = JobRunner("test-shutdown")
    release = threading.Event()
    first = runner.submit("first", lambda _job: release.wait(WAIT))
    runner.current = None  # (a second job cannot be submitted otherwise: it waits behind)
    called: list[str] = []
    second = runner.submit("second", lambda _job: None, on_done=lambda j: called.append(j.name))
    runner.shutdown()  # the panel closed: the waiting job is dropped
    release.set()
    assert first.wait(WAIT) and second.wait(WAIT)
    assert second.state is JobState.CANCELLED and called == []
