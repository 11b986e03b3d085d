"""The fleet panel: a TVM RPC tracker's devices by key, each key's target, its free devices and
queue, and per device the trials it measured, its trials per minute and its errors, live.

Data flow. A poll runs every ``poll_secs`` on a worker thread (``explorer-fleet-poll``): it finds
the tracker (the address typed in, else this machine's fleet from ``read_fleet``), asks it for
its summary over the network, and counts the store's trials; only when that count differs from
what the panel has seen (another process stored trials) does it re-read the store's rows. Trials
this process stores reach the panel at once through the store's subscription. Each key's target
is asked of one of its devices once, on another worker (``explorer-fleet-targets``), and cached.
What to show is computed by ``explorer.fleet.fleet_status`` and written on the UI thread
(``widgets._ui``): the kernel's thread never waits for the network. A tracker that does not
answer is one sentence in the panel, and polling goes on.

"Start a local fleet" and "Stop" run ``start_fleet``/``stop_fleet`` on a third worker: a
tracker and ``num_servers`` device servers of ``threads`` thread(s) on this machine, as
``explorer fleet up`` would start them. Closing the panel stops its polling, not the fleet
(``Stop``, or ``explorer fleet down`` in a terminal, does).
"""

from __future__ import annotations

import html
import os
import threading
import time
from dataclasses import dataclass

import ipywidgets as w

from explorer.errors import FleetError
from explorer.fleet import (
    DEFAULT_WINDOW_SECS,
    DeviceTally,
    DeviceTargets,
    FleetStatus,
    KeyStatus,
    LocalFleet,
    ServerSpec,
    TargetAnswer,
    TrackerAddress,
    TrackerSummary,
    ask_target,
    default_servers,
    fleet_status,
    read_fleet,
    start_fleet,
    stop_fleet,
    tracker_summary,
)
from explorer.storage import TrialRecord, TrialRow
from explorer.target import Target
from explorer.text import error_text, plural
from widgets import _ui
from widgets._context import Context
from widgets._jobs import Job, JobRunner, JobState
from widgets._panel import Panel
from widgets._style import themed

NO_LOCAL_FLEET = "No fleet runs on this machine: start a local one, or type a tracker's HOST:PORT."


@dataclass(frozen=True)
class _Poll:
    """What one poll found (on a worker), for the UI thread to show."""

    address: TrackerAddress | None
    local: LocalFleet | None
    summary: TrackerSummary | None
    problem: str | None  # one sentence: why there is no summary
    rows: list[TrialRow] | None  # the store re-read (another process stored trials), or None
    typed: str  # the address field when the poll started


class FleetPanel(Panel):
    """Shows a fleet's devices, live, and starts or stops a fleet on this machine.

    Args:
        ctx: the shared context (its store's trials say what each device measured).
        state: the local fleet's state file (default: ``explorer fleet``'s, see
            ``explorer.fleet.state_path``).
        port: the tracker port "Start a local fleet" uses (default: the first free one from
            ``explorer.fleet.DEFAULT_PORT`` on).
        num_servers: device servers "Start a local fleet" starts (each of ``threads`` threads,
            under key ``local``, pinned to their own cores when there are enough).
        threads: TVM threads of each of those servers.
        poll_secs: seconds between two polls of the tracker.
        window_secs: how far back "trials per minute" looks.
        tracker_timeout: seconds a tracker has to answer one poll.
        target_timeout: seconds to wait for a free device when asking a key's target.
        autostart: start polling at once (the ``Explorer`` starts it when its tab is shown).

    Attributes:
        widget: the panel to display.
        tracker: the address field (empty: this machine's fleet).
        info: what the panel shows now (``None`` before the first answer of a tracker).
        num_polls: polls that ended (for tests and notebooks).

    Example:
        >>> panel = FleetPanel(Context(store="records.db"))  # doctest: +SKIP
        >>> panel  # a notebook cell ending here shows it  # doctest: +SKIP
    """

    def __init__(
        self,
        ctx: Context,
        *,
        state: str | os.PathLike[str] | None = None,
        port: int | None = None,
        num_servers: int = 2,
        threads: int = 1,
        poll_secs: float = 3.0,
        window_secs: float = DEFAULT_WINDOW_SECS,
        tracker_timeout: float = 5.0,
        target_timeout: float = 10.0,
        autostart: bool = True,
    ) -> None:
        if poll_secs <= 0:
            raise ValueError(f"poll_secs must be positive (got {poll_secs})")
        self.ctx = ctx
        self.state = state
        self.port = port
        self.num_servers = num_servers
        self.threads = threads
        self.poll_secs = poll_secs
        self.window_secs = window_secs
        self.tracker_timeout = tracker_timeout
        self.target_timeout = target_timeout
        self.info: FleetStatus | None = None
        self.num_polls = 0

        # Touched on the UI thread only; a worker gets copies.
        self._tally = DeviceTally()
        self._since_poll: list[TrialRecord] = []  # what the subscription brought since a poll
        self._address: TrackerAddress | None = None
        self._summary: TrackerSummary | None = None
        self._local: LocalFleet | None = None
        self._devices = DeviceTargets()  # per tracker and key: the target, asked once
        self._polling = False
        self._again = False  # a poll was asked for while one ran
        self._timer: threading.Timer | None = None
        self._closed = False
        self._poll_jobs = JobRunner("explorer-fleet-poll")
        self._target_jobs = JobRunner("explorer-fleet-targets")
        self._control_jobs = JobRunner("explorer-fleet-control")
        self.widget = self._make_widgets()
        self.tracker.observe(lambda _: self._guard(self._address_changed), names="value")
        self.start_button.on_click(lambda _: self._guard(self.start_local_fleet))
        self.stop_button.on_click(lambda _: self._guard(self.stop_local_fleet))
        self._unsubscribe = ctx.store.subscribe(
            lambda records: _ui.call_soon(self._on_batch, records)
        )
        if autostart:
            self.start_polling()

    def _make_widgets(self) -> w.VBox:
        """The tracker's address, Start and Stop, the status and the devices' table."""
        self.tracker = w.Text(
            value="",
            placeholder="this machine's fleet (or HOST:PORT)",
            description="Tracker",
            continuous_update=False,
            layout=w.Layout(width="420px"),
        )
        self.tracker.add_class("se-fleet-tracker")
        self.start_button = w.Button(
            description="Start a local fleet",
            icon="play",
            tooltip=f"a tracker and {self.num_servers} device servers of {self.threads} "
            "thread(s) on this machine (as `explorer fleet up`)",
            layout=w.Layout(width="auto"),
        )
        self.start_button.add_class("se-fleet-start")
        self.stop_button = w.Button(
            description="Stop",
            icon="stop",
            disabled=True,
            tooltip="stop this machine's fleet (as `explorer fleet down`)",
            layout=w.Layout(width="auto"),
        )
        self.stop_button.add_class("se-fleet-stop")
        self.status = w.Label(value="Not polled yet.")
        self.status.add_class("se-fleet-status")
        self.notice = w.Label(value="")  # what the last Start or Stop did
        self.notice.add_class("se-fleet-notice")
        self.table = w.HTML(value="")
        self.table.add_class("se-fleet-table")
        buttons = w.HBox([self.tracker, self.start_button, self.stop_button])
        buttons.add_class("se-buttons")
        box = w.VBox([buttons, self.status, self.notice, self.table])
        box.add_class("se-fleet")
        themed(box)
        return box

    # -- polling ------------------------------------------------------------------------------
    def start_polling(self) -> None:
        """Poll now, then every ``poll_secs`` until ``stop_polling`` or ``close``."""
        if self._closed or self._polling:
            return
        self._polling = True
        self.refresh()

    def stop_polling(self) -> None:
        """No more polls after the one running now (if any)."""
        self._polling = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    @property
    def is_polling(self) -> bool:
        return self._polling

    def refresh(self) -> Job | None:
        """Poll the tracker now (or right after the poll that runs); the poll's job, if one
        started."""
        if self._closed:
            return None
        if self._poll_jobs.busy:
            self._again = True
            return None
        typed = self.tracker.value.strip()
        try:
            address = TrackerAddress.parse(typed) if typed else None
        except ValueError as exc:  # nothing to ask until the field changes
            self._show_problem(str(exc), again=False)
            return None
        self._again = False
        self._since_poll = []
        seen, state, store = self._tally.num_seen, self.state, self.ctx.store
        timeout = self.tracker_timeout

        def poll(job: Job) -> _Poll:
            # Worker thread: network and database only, no widget.
            try:
                local = read_fleet(state)
                problem = None
            except FleetError as exc:
                local, problem = None, str(exc)
            where = address or (local.tracker if local is not None else None)
            summary = None
            if where is not None:
                try:
                    summary = tracker_summary(where, timeout=timeout)
                except FleetError as exc:
                    problem = str(exc)
            elif problem is None:
                problem = NO_LOCAL_FLEET
            rows = store.trial_rows() if store.count_trials() != seen else None
            return _Poll(where, local, summary, problem, rows, typed)

        return self._poll_jobs.submit("fleet poll", poll, on_done=self._polled)

    def _polled(self, job: Job) -> None:
        self.num_polls += 1
        if self._closed:
            return
        if job.state is JobState.ERROR:
            self._show_problem(f"Could not poll: {error_text(job.exception)}")
        else:
            found: _Poll = job.result
            self._local = found.local
            if found.rows is not None:  # another process stored trials: count them afresh
                tally = DeviceTally(found.rows)
                tally.add(self._since_poll)
                self._tally = tally
            if found.typed != self.tracker.value.strip():
                pass  # the field changed meanwhile: its own poll follows (``_again``)
            elif found.summary is None:
                self._show_problem(found.problem or "The tracker sent nothing.")
            else:
                self._address, self._summary = found.address, found.summary
                self._render()
                self._ask_targets()
        self._sync_buttons()
        if self._again:
            self.refresh()
        else:
            self._schedule_next()

    def _schedule_next(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._polling and not self._closed:
            self._timer = _ui.call_later(self.poll_secs, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self._polling and not self._closed:
            self.refresh()

    def _address_changed(self) -> None:
        self._summary = None
        self.info = None
        self.table.value = ""
        self.refresh()

    # -- trials (UI thread) -------------------------------------------------------------------
    def _on_batch(self, records: list[TrialRecord]) -> None:
        if self._closed:
            return
        self._since_poll.extend(records)
        if self._tally.add(records) and self._summary is not None:
            self._render()

    # -- targets ------------------------------------------------------------------------------
    def _ask_targets(self) -> None:
        """Ask the keys with devices whose target is not known (or due again) on a worker."""
        if self._summary is None or self._address is None or self._target_jobs.busy:
            return
        tracker = str(self._address)
        keys = self._devices.due(tracker, self._summary)
        if not keys:
            return
        address, timeout = self._address, self.target_timeout

        def ask(job: Job) -> dict[str, TargetAnswer]:
            # Worker thread: one session per key, on whichever device the tracker hands out.
            found: dict[str, TargetAnswer] = {}
            for key in keys:
                if job.is_cancelled():
                    break
                found[key] = ask_target(address, key, timeout)
            return found

        def done(job: Job) -> None:
            found: dict[str, TargetAnswer]
            if job.state is JobState.ERROR:
                found = {k: (f"not known: {error_text(job.exception)}", None, False) for k in keys}
            else:
                found = job.result or {}
            self._devices.record(tracker, found)
            if not self._closed and self._summary is not None and str(self._address) == tracker:
                self._render()

        self._target_jobs.submit("fleet targets", ask, on_done=done)

    def targets(self) -> dict[str, Target | str]:
        """Per key of the current tracker, its devices' target, or why it is not known."""
        return self._devices.targets(str(self._address))

    # -- local fleet --------------------------------------------------------------------------
    def start_local_fleet(self) -> Job | None:
        """Start a tracker and ``num_servers`` servers on this machine (a worker does it);
        refused while a local fleet runs."""
        if self._control_jobs.busy:
            self._note("Wait: the local fleet is still starting or stopping.")
            return None
        specs = default_servers(self.num_servers, threads=self.threads)
        state, port = self.state, self.port

        def start(job: Job) -> LocalFleet | str:
            running = read_fleet(state)
            if running is not None:
                return f"A local fleet already runs (tracker {running.tracker}): stop it first."
            return start_fleet(specs, state=state, port=port)

        self._note(f"Starting a local fleet: a tracker and {plural(len(specs), 'server')}...")
        job = self._control_jobs.submit("start a local fleet", start, on_done=self._started)
        self._sync_buttons()
        return job

    def _started(self, job: Job) -> None:
        if job.state is JobState.ERROR:
            self._note(f"Could not start a local fleet: {error_text(job.exception)}")
        elif isinstance(job.result, str):
            self._note(job.result)
        else:
            fleet: LocalFleet = job.result
            self._local = fleet
            specs = [p.spec for p in fleet.servers if p.spec is not None]
            self._note(
                f"Started a local fleet: tracker {fleet.tracker}, "
                f"{plural(len(specs), 'device server')} ({_describe(specs)})."
            )
            if self.tracker.value.strip():
                self.tracker.value = ""  # show it (observing the field polls again)
        self._sync_buttons()
        self.refresh()

    def stop_local_fleet(self) -> Job | None:
        """Stop this machine's fleet with its process groups (a worker does it)."""
        if self._control_jobs.busy:
            self._note("Wait: the local fleet is still starting or stopping.")
            return None
        state = self.state
        self._note("Stopping the local fleet...")
        job = self._control_jobs.submit(
            "stop the local fleet", lambda job: stop_fleet(state), on_done=self._stopped
        )
        self._sync_buttons()
        return job

    def _stopped(self, job: Job) -> None:
        if job.state is JobState.ERROR:
            self._note(f"Could not stop the local fleet: {error_text(job.exception)}")
        elif job.result:
            self._local = None
            self._note(f"Stopped the local fleet ({plural(int(job.result), 'process')}).")
        else:
            self._local = None
            self._note("No local fleet was running.")
        self._sync_buttons()
        self.refresh()

    def _sync_buttons(self) -> None:
        """Start while no local fleet runs, Stop while one does; neither while one of them
        is at work."""
        busy = self._control_jobs.busy
        self.start_button.disabled = busy or self._local is not None
        self.stop_button.disabled = busy or self._local is None

    # -- showing ------------------------------------------------------------------------------
    def _render(self) -> None:
        assert self._summary is not None and self._address is not None
        info = fleet_status(
            str(self._address),
            self._summary,
            self._tally,
            now=time.time(),
            targets=self._devices.targets(str(self._address)),
            peaks=self._devices.peaks(str(self._address)),
            window_secs=self.window_secs,
        )
        self.info = info
        local = (
            {p.port: p.spec for p in self._local.servers if p.spec is not None}
            if self._local is not None and self._local.tracker == self._address
            else {}
        )
        n = len(info.devices)
        self._say(
            f"Tracker {info.tracker}: {plural(n, 'device')} under "
            f"{plural(len(info.keys), 'key')}; updated {time.strftime('%H:%M:%S')}."
        )
        self.table.value = render_fleet(info, local, now=time.time())

    def _show_problem(self, problem: str, *, again: bool = True) -> None:
        """One sentence instead of the table."""
        self._summary = None
        self.info = None
        self.table.value = ""
        text = (" ".join(problem.split()) or "unknown problem").rstrip(".")
        if again and self._polling:
            text += f" (asking again every {self.poll_secs:g} s)"
        self._say(text[:1].upper() + text[1:] + ".")

    def _note(self, text: str) -> None:
        self.notice.value = text

    def _show_error(self, exc: Exception) -> None:
        self._note(f"Error: {error_text(exc)}")

    def close(self) -> None:
        """Stop polling and listening to the store (the fleet itself keeps running)."""
        self._closed = True
        self.stop_polling()
        self._unsubscribe()
        for runner in (self._poll_jobs, self._target_jobs, self._control_jobs):
            runner.shutdown()


# -- workers ------------------------------------------------------------------------------------
def render_fleet(
    info: FleetStatus, local: dict[int, ServerSpec] | None = None, *, now: float
) -> str:
    """The HTML table of ``info``: a header row per key, a row per device (escaped text)."""
    local = local or {}
    minutes = info.window_secs / 60.0
    rows = [
        "<table class='se-fleet-devices' style='border-collapse:collapse'>",
        "<thead><tr>"
        + "".join(
            f"<th style='text-align:left;padding:2px 10px 2px 0'>{h}</th>"
            for h in (
                "device",
                "server",
                "measured",
                f"per min (last {minutes:g} min)",
                "errors",
                "last trial",
            )
        )
        + "</tr></thead><tbody>",
    ]
    for key in info.keys:
        rows.append(
            "<tr class='se-fleet-key'><td colspan='6' style='padding:8px 0 2px 0'>"
            + _key_line(key, info.tracker)
            + "</td></tr>"
        )
        if not key.devices:
            rows.append(
                "<tr><td colspan='6' style='color:#777'>no device registered under this key"
                "</td></tr>"
            )
        for d in key.devices:
            spec = local.get(d.port) if d.host in ("127.0.0.1", "localhost", "::1") else None
            errors = (
                f"{d.num_errors} ({', '.join(f'{s} {n}' for s, n in d.errors)})"
                if d.errors
                else "0"
            )
            last = "none yet" if d.last_at is None else _ago(now - d.last_at)
            cells = (
                f"{d.host}:{d.port}",
                "" if spec is None else _describe([spec]),
                str(d.measured),
                f"{d.per_minute:.1f}",
                errors,
                last,
            )
            rows.append(
                f"<tr class='se-fleet-device' data-device='{html.escape(d.device, quote=True)}'>"
                + "".join(
                    f"<td style='padding:2px 10px 2px 0'>{html.escape(c)}</td>" for c in cells
                )
                + "</tr>"
            )
    rows.append("</tbody></table>")
    if info.gone_devices:
        rows.append(
            "<div class='se-fleet-gone' style='color:#777'>"
            + html.escape(
                f"{plural(info.gone_measured, 'trial')} in the database were measured by "
                f"{plural(info.gone_devices, 'device')} of these keys no longer registered."
            )
            + "</div>"
        )
    return "".join(rows)


def _key_line(key: KeyStatus, tracker: str) -> str:
    queue = (
        "no request yet"
        if key.free is None
        else f"{key.free} free, {plural(key.pending or 0, 'request')} waiting"
    )
    if key.target is not None:
        target = (
            f"target {html.escape(str(key.target))} <code>{html.escape(key.target.key())}</code>"
            f", {_peak_text(key, tracker)}"
        )
    else:
        target = f"target {html.escape(key.target_note)}"
    return (
        f"<b>key {html.escape(key.key)}</b>: {plural(len(key.devices), 'device')}, "
        f"{html.escape(queue)}; <span class='se-fleet-target'>{target}</span>"
    )


def _peak_text(key: KeyStatus, tracker: str) -> str:
    if key.peak is None:
        command = html.escape(f"explorer peak --tracker {tracker} --key {key.key}")
        return f"peak not measured yet (<code>{command}</code>)"
    return f"peak {key.peak.gflops_f32:.0f} GFLOPS, {key.peak.bandwidth_gbs:.0f} GB/s"


def _describe(specs: list[ServerSpec]) -> str:
    parts = []
    for spec in specs:
        threads = plural(spec.threads, "thread") if spec.threads else "all cores"
        cores = f" on core{'s' * (len(spec.cores) != 1)} {','.join(map(str, spec.cores))}"
        mcpu = f", code for {spec.mcpu}" if spec.mcpu else ""
        parts.append(f"{threads}{cores if spec.cores else ''}{mcpu}")
    distinct = list(dict.fromkeys(parts))
    return "; ".join(distinct) + (" each" if len(distinct) == 1 and len(parts) > 1 else "")


def _ago(secs: float) -> str:
    secs = max(0.0, secs)
    if secs < 90:
        return f"{secs:.0f} s ago"
    if secs < 90 * 60:
        return f"{secs / 60:.0f} min ago"
    return f"{secs / 3600:.1f} h ago"


__all__ = ["FleetPanel", "render_fleet"]
