"""Background jobs for the notebook: one worker thread per runner, cancellable, observable.

A measurement or a search must never block the kernel's main thread (the notebook stays usable)
and must never take the kernel down: whatever the job raises is kept on the ``Job`` as data
(``state == ERROR``, ``exception``) and reported to the ``on_done`` callback. Solara's
``TaskResult`` states, without solara.

The worker only computes: ``on_done`` runs on the UI thread (``widgets._ui``), so it may write
widgets and read the session, and it may submit the next job to the same runner.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from explorer.errors import ExplorerError
from widgets import _ui

log = logging.getLogger(__name__)


class JobState(enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"
    CANCELLED = "cancelled"


class Job:
    """One submitted call, around the executor's ``Future``: ``cancel()`` only asks (the
    function polls ``is_cancelled``); what the call returned or raised is the future's."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.future: Future[Any] = Future()  # replaced by the executor's when submitted
        self._cancel = threading.Event()
        self._settled = threading.Event()  # its on_done has started (on the UI thread)
        self._done = threading.Event()  # ... and ended

    def cancel(self) -> None:
        self._cancel.set()

    def is_cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def state(self) -> JobState:
        f = self.future
        if not f.done():
            return JobState.RUNNING if f.running() else JobState.PENDING
        if f.cancelled():
            return JobState.CANCELLED
        if f.exception() is not None:
            return JobState.ERROR
        return JobState.CANCELLED if self.is_cancelled() else JobState.FINISHED

    @property
    def result(self) -> Any:
        """What the call returned (``None`` until it did, or when it raised)."""
        f = self.future
        return f.result() if f.done() and not f.cancelled() and f.exception() is None else None

    @property
    def exception(self) -> BaseException | None:
        """What the call raised, if it did."""
        f = self.future
        return f.exception() if f.done() and not f.cancelled() else None

    @property
    def is_active(self) -> bool:
        return self.state in (JobState.PENDING, JobState.RUNNING)

    @property
    def is_settled(self) -> bool:
        """Whether the job's end reached the UI (its ``on_done`` started on the UI thread)."""
        return self._settled.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job ended and its ``on_done`` ran (for tests, scripts and notebook
        cells). On the UI thread it runs the UI's queued calls meanwhile, ``on_done`` among them.
        """
        return _ui.wait_for(self._done, timeout)


class JobRunner:
    """Runs jobs one at a time on a single daemon worker thread.

    ``submit`` refuses a second job while one is active (``busy``) instead of queueing it
    silently: the UI shows the refusal.
    """

    def __init__(self, name: str = "explorer-job") -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._when_free: list[Callable[[], None]] = []
        self.current: Job | None = None

    @property
    def busy(self) -> bool:
        """A job runs, or its result has not reached the UI yet (its ``on_done`` has not
        started): the UI never sees a runner idle before it has seen the job's end."""
        return self.current is not None and not self.current.is_settled

    def when_free(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` on the UI thread each time a job has ended and its ``on_done``
        ran (the runner is free then, unless ``on_done`` submitted the next job), so a panel
        can start what waited for another panel's job; returns a function that unsubscribes."""
        self._when_free.append(callback)

        def unsubscribe() -> None:
            if callback in self._when_free:
                self._when_free.remove(callback)

        return unsubscribe

    def submit(
        self,
        name: str,
        fn: Callable[[Job], Any],
        *,
        on_done: Callable[[Job], None] | None = None,
    ) -> Job:
        """Run ``fn(job)`` in the background; ``on_done(job)`` runs on the UI thread after it.

        Raises:
            RuntimeError: a job is still active (its name is in the message).
        """
        with self._lock:
            if self.busy:
                assert self.current is not None
                raise RuntimeError(f"{self.current.name!r} is still running; stop it or wait")
            job = Job(name)
            self.current = job
            job.future = self._pool.submit(self._call, job, fn)
        # Done callbacks run on the worker (or here, if it already ended): post to the UI.
        job.future.add_done_callback(lambda _f: _ui.call_soon(self._settle, job, on_done))
        return job

    @staticmethod
    def _call(job: Job, fn: Callable[[Job], Any]) -> Any:
        try:
            return fn(job)
        except BaseException as exc:
            # The explorer's own errors are sentences the panel shows (a bad path, a bad file):
            # only the unexpected reach JupyterLab's log console too.
            level = logging.DEBUG if isinstance(exc, ExplorerError) else logging.WARNING
            log.log(level, "job %r failed: %s", job.name, exc)
            raise  # kept on the future: a job's failure is data, shown in the UI

    def _settle(self, job: Job, on_done: Callable[[Job], None] | None) -> None:
        """The job's end, on the UI thread."""
        job._settled.set()
        if job.future.cancelled():  # never started: the runner was shut down (its panel closed)
            job._done.set()
            return
        try:
            if on_done is not None:
                on_done(job)
        except Exception:  # a broken UI callback must not break the UI's other calls
            log.exception("on_done callback of job %r failed", job.name)
        finally:
            job._done.set()  # after on_done, so `wait()` returns once the UI is updated
        for callback in list(self._when_free):
            try:
                callback()
            except Exception:
                log.exception("when_free callback of runner after %r failed", job.name)

    def shutdown(self) -> None:
        if self.current is not None:
            self.current.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
