"""The state every panel shares: the store, the target, the current session, background jobs.

Panels never talk to each other directly; they read and change the ``Context`` and listen to its
events, so the expression builder, the editor, the search launcher and the dashboards can each be
used alone or composed by ``Explorer``. Plain Python (no ipywidgets): testable without a kernel.

Events (``ctx.on(name, callback)``; callbacks may run on a job's worker thread):
    * ``"session"``: ``callback(session)``: a new ``ScheduleSession`` became current (a workload
      was built, or a record was opened).
    * ``"record"``: ``callback(record)``: a manual measurement was stored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from explorer.measure import LocalMeasurer, Measurer
from explorer.session import ScheduleSession
from explorer.storage import NewTrial, RecordStore, RunInfo, TrialRecord, get_store
from explorer.target import Target
from explorer.workloads import Workload
from widgets._jobs import JobRunner

log = logging.getLogger(__name__)

EVENTS = ("session", "record")

MANUAL = "manual"
"""The strategy name of the runs that hold measurements made by hand in the editor."""


class Context:
    """Shared state of one explorer (one notebook may hold several, each with its own).

    Args:
        store: a ``RecordStore``, a path, ``":memory:"``, or ``None`` for the default database.
        target: where schedules are built and measured (default: this machine's CPU).
        make_measurer: builds a measurer on first use (default: ``LocalMeasurer``). The editor
            and the search launcher each get their own, so a manual measurement never waits for
            a search batch.
    """

    def __init__(
        self,
        *,
        store: RecordStore | str | None = None,
        target: Target | None = None,
        make_measurer: Callable[[], Measurer] = LocalMeasurer,
    ) -> None:
        self.store = get_store(store)
        self.target = target or Target.local_cpu()
        self.make_measurer = make_measurer
        self.session: ScheduleSession | None = None
        self.measure_jobs = JobRunner("explorer-measure")
        self.search_jobs = JobRunner("explorer-search")
        self._measurer: Measurer | None = None
        self._listeners: dict[str, list[Callable[[Any], None]]] = {e: [] for e in EVENTS}
        self._manual_runs: dict[str, RunInfo] = {}
        self._lock = threading.Lock()

    # -- events -------------------------------------------------------------------------------
    def on(self, event: str, callback: Callable[[Any], None]) -> Callable[[], None]:
        """Call ``callback`` on ``event``; returns a function that unsubscribes it."""
        if event not in self._listeners:
            raise ValueError(f"unknown event {event!r}; valid: {', '.join(EVENTS)}")
        self._listeners[event].append(callback)
        return lambda: self._listeners[event].remove(callback)

    def _emit(self, event: str, payload: Any) -> None:
        for callback in list(self._listeners[event]):
            try:
                callback(payload)
            except Exception:  # one broken panel must not break the others
                log.exception("%s listener %r failed", event, callback)

    # -- session ------------------------------------------------------------------------------
    def set_session(self, session: ScheduleSession) -> None:
        self.session = session
        self._emit("session", session)

    def open_record(self, record: TrialRecord) -> ScheduleSession:
        """Make a stored trial's schedule the current session (its steps become the history)."""
        session = ScheduleSession(record.candidate.workload, record.candidate.target)
        session.load_trace(record.candidate.trace)
        self.set_session(session)
        return session

    # -- measurement --------------------------------------------------------------------------
    @property
    def measurer(self) -> Measurer:
        """The editor's measurer, started on first use."""
        with self._lock:
            if self._measurer is None:
                self._measurer = self.make_measurer()
            return self._measurer

    def record_manual(
        self, trial: NewTrial, workload: Workload, target: Target | None = None
    ) -> TrialRecord:
        """Store a hand-made schedule's measurement in this workload's ``manual`` run."""
        target = target or self.target
        key = f"{workload.key()}|{target.key()}"
        with self._lock:
            run = self._manual_runs.get(key)
            if run is None:
                run = self.store.create_run(workload, target, MANUAL)
                self._manual_runs[key] = run
        try:
            (record,) = self.store.add_trials(run.id, [trial])
        finally:
            # Ended after every measurement (the next one reopens it by adding to it), so the
            # run never reads as running once the kernel is gone.
            self.store.finish_run(run.id)
        self._emit("record", record)
        return record

    def close(self) -> None:
        """Stop background jobs and the measurer's worker processes."""
        self.measure_jobs.shutdown()
        self.search_jobs.shutdown()
        if self._measurer is not None:
            self._measurer.close()
            self._measurer = None
        for run in self._manual_runs.values():
            self.store.finish_run(run.id)
        self._manual_runs.clear()
