"""The state every panel shares: the store, the target, the current session, background jobs.

Panels never talk to each other directly; they read and change the ``Context`` and listen to its
events, so the expression builder, the editor, the search launcher and the dashboards can each be
used alone or composed by ``Explorer``. Plain Python (no ipywidgets): testable without a kernel.

Events (``ctx.on(name, callback)``, called on the UI thread, see ``widgets._ui``):
    * ``"session"``: ``callback(session)``: a new ``ScheduleSession`` became current (a workload
      was built, or a record was opened).

New measurements (manual or a search's) are announced by the store: ``ctx.store.subscribe``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from explorer.measure import LocalMeasurer, Measurer, trace_key
from explorer.session import ScheduleSession
from explorer.storage import (
    MANUAL,
    NewTrial,
    RecordStore,
    RunInfo,
    TrialRecord,
    get_store,
    name_trial,
)
from explorer.target import Target
from explorer.workloads import Workload
from widgets._jobs import JobRunner

log = logging.getLogger(__name__)

EVENTS = ("session",)


class Context:
    """Shared state of one explorer (one notebook may hold several, each with its own).

    Args:
        store: a ``RecordStore``, a path, ``":memory:"``, or ``None`` for the default database.
        target: where schedules are built and measured (default: this machine's CPU).
        measurer: yours: the editor and every search use it, and the explorer never closes it
            (it is yours to close, after ``close()``).
        make_measurer: without ``measurer``, what builds the explorer's own measurers (default:
            ``LocalMeasurer``): one for the editor, started on first use and closed by
            ``close()``, and one per search, closed when the search ends, so a manual
            measurement never waits for a search batch.
    """

    def __init__(
        self,
        *,
        store: RecordStore | str | None = None,
        target: Target | None = None,
        measurer: Measurer | None = None,
        make_measurer: Callable[[], Measurer] = LocalMeasurer,
    ) -> None:
        self.store = get_store(store)
        self.target = target or Target.local_cpu()
        self.make_measurer = make_measurer
        self._given = measurer
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
        listeners = self._listeners[event]
        listeners.append(callback)

        def unsubscribe() -> None:  # a second call (a panel closed twice) does nothing
            if callback in listeners:
                listeners.remove(callback)

        return unsubscribe

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
        """Show a stored trial's schedule in the editor, without losing the history.

        Of the current session's workload and target, it is loaded as one more step of that
        session (``load_trace``): a branch from the step on screen, so Undo goes back there
        and every earlier step stays in the history. Of another workload or target, it starts
        a new session, which becomes current. A schedule already on screen is not loaded
        again (a second click made a second, identical step).
        """
        candidate = record.candidate
        current = self.session
        if (
            current is not None
            and current.workload == candidate.workload
            and current.target.key() == candidate.target.key()
        ):
            if trace_key(current.candidate().trace) != trace_key(candidate.trace):
                current.load_trace(candidate.trace)
            return current
        session = ScheduleSession(candidate.workload, candidate.target)
        session.load_trace(candidate.trace)
        self.set_session(session)
        return session

    def open_trial(self, record: TrialRecord) -> str:
        """``open_record``, and what a panel says about it: ``"trial 12 of run 5 as step 38 in
        the editor (Undo goes back to step 37)"``, the trial named in its run."""
        before = self.session
        step = before.snapshot.step_id if before is not None else None
        session = self.open_record(record)
        name = name_trial(self.store, record)
        if session is before and session.snapshot.step_id == step:
            return f"{name}: it is the schedule on screen already (step {step})"
        if session is before:
            return (
                f"{name} as step {session.snapshot.step_id} in the editor (Undo goes back to "
                f"step {step})"
            )
        return f"{name} in the editor"

    # -- measurement --------------------------------------------------------------------------
    @property
    def measurer(self) -> Measurer:
        """The editor's measurer: yours, or the explorer's own, started on first use."""
        if self._given is not None:
            return self._given
        with self._lock:
            if self._measurer is None:
                self._measurer = self.make_measurer()
            return self._measurer

    @contextlib.contextmanager
    def search_measurer(self) -> Iterator[Measurer]:
        """The measurer of one search: yours (left open), or a new one closed at the end."""
        if self._given is not None:
            yield self._given
            return
        measurer = self.make_measurer()
        try:
            yield measurer
        finally:
            measurer.close()  # its worker processes must not outlive the search

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
        return record

    def close(self) -> None:
        """Stop background jobs and the explorer's own measurer (never one you passed in)."""
        self.measure_jobs.shutdown()
        self.search_jobs.shutdown()
        if self._measurer is not None:
            self._measurer.close()
            self._measurer = None
        for run in self._manual_runs.values():
            self.store.finish_run(run.id)
        self._manual_runs.clear()
