"""The fleet panel and the search panel's fleet option, headless, against a real local fleet.

A tracker with three device servers runs for the module (key ``local``: two 1-thread servers;
key ``avx2``: one 1-thread server compiling for ``x86-64-v3``), on a port the OS hands out (as
every fleet test's: ``explorer.testing.ports``), and is stopped at the end, leaving no process.
As everywhere in tests/widgets, no widget may be written off the UI thread (``ui_thread_only``);
here, in addition, the panels' code must never talk to a tracker on the UI thread (the kernel's):
``no_network_on_the_ui_thread`` fails a test that does.
"""

from __future__ import annotations

import collections
import math
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

import widgets
from explorer import _tvm
from explorer.core import _tracker as tracker_module
from explorer.fleet import (
    LocalFleet,
    ServerSpec,
    default_servers,
    read_fleet,
    start_fleet,
    stop_fleet,
)
from explorer.machine import CACHE_ENV, FleetDevice, MachinePeak
from explorer.machine._peak import _cache_key, _write_cache
from explorer.measure import Candidate, MeasureConfig, Measurer, MeasureResult, RemoteMeasurer
from explorer.session import ScheduleSession
from explorer.storage import NewTrial, get_store
from explorer.target import Target, cpu_model
from explorer.testing.ports import free_port
from explorer.types import MeasureStatus
from explorer.workloads import get_workload
from widgets import Explorer, FleetPanel, SearchPanel, _ui
from widgets._context import Context
from widgets._jobs import JobState
from widgets.explorer import FLEET_TAB
from widgets.fleet import NO_LOCAL_FLEET
from widgets.search_panel import FLEET

WAIT = 180.0  # seconds: generous, the machine is shared (2 cores, 3 servers, builds)
MATMUL = get_workload("matmul", M=64, N=64, K=64)
FAST = MeasureConfig(
    repeat=3,
    min_repeat_secs=0.002,
    run_timeout_secs=10.0,
    max_spread=math.inf,  # about devices and counts, not timing quality
)
WIDGETS = str(Path(widgets.__file__).resolve().parent) + os.sep  # the panels' code
NOBODY = f"127.0.0.1:{free_port()}"  # nothing listens there (checked by the fixture)
SILENT_PORT = free_port()  # accepts connections and never answers


def group_leftovers(processes: tuple[object, ...]) -> list[str]:
    """Live processes in the process groups of ``processes`` (FleetProcess): what a stop left."""
    groups = {p.identity.pid for p in processes}  # type: ignore[attr-defined]
    left = []
    for proc in psutil.process_iter(["pid", "status", "cmdline"]):
        try:
            if os.getpgid(proc.pid) in groups and proc.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(f"{proc.pid}: {' '.join(proc.info['cmdline'] or [])}")
        except (ProcessLookupError, psutil.Error):
            continue
    return left


@pytest.fixture(scope="module")
def fleet_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fleet-panel") / "fleet.json"


@pytest.fixture(scope="module")
def fleet(fleet_state: Path) -> Iterator[LocalFleet]:
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", int(NOBODY.split(":")[1]))) != 0, NOBODY
    specs = [*default_servers(2, threads=1), ServerSpec("avx2", threads=1, mcpu="x86-64-v3")]
    running = start_fleet(specs, state=fleet_state, port=free_port())
    try:
        yield running
    finally:
        stop_fleet(fleet_state)
    assert not [p for p in running.processes if p.is_alive()], "the fleet's processes live on"
    assert not group_leftovers(running.processes), group_leftovers(running.processes)


# Every connection widget code opens on the UI thread, while a test watches (a list), else
# None. Python's audit hook sees each Python socket's connect, whichever module opens it (the
# tracker's client, TVM's Python RPC helpers), so the check needs no stand-in for the tracker.
_ui_connects: list[str] | None = None


def _on_audit(event: str, args: tuple[object, ...]) -> None:
    if event != "socket.connect" or _ui_connects is None or not _ui.is_ui_thread():
        return
    widget_frames = [f for f in traceback.extract_stack() if f.filename.startswith(WIDGETS)]
    if widget_frames:
        _ui_connects.append(f"{args[1]} from {widget_frames[-1].name}")


sys.addaudithook(_on_audit)  # for the process's life: audit hooks cannot be removed


@pytest.fixture(autouse=True)
def no_network_on_the_ui_thread() -> Iterator[list[str]]:
    """Fails the test if widget code connected to anything (a tracker, a device) on the UI
    thread: the kernel's thread would wait for the network."""
    global _ui_connects
    offenders: list[str] = []
    _ui_connects = offenders
    try:
        yield offenders
    finally:
        _ui_connects = None
    assert not offenders, "widget code connected on the UI thread: " + "; ".join(offenders)


def test_a_connection_from_widget_code_on_the_ui_thread_is_caught(
    no_network_on_the_ui_thread: list[str],
) -> None:
    # code compiled as if it were a panel's, connecting on the UI thread (here, the test's)
    code = compile(
        "with socket.socket() as s:\n    s.connect_ex(('127.0.0.1', PORT))",
        WIDGETS + "a_panel.py",
        "exec",
    )
    port = free_port()
    exec(code, {"socket": socket, "PORT": port})
    assert no_network_on_the_ui_thread == [f"('127.0.0.1', {port}) from <module>"]
    no_network_on_the_ui_thread.clear()  # caught: the fixture need not fail this test


class Pump:
    """Runs the UI thread's queued calls, as a kernel's event loop would between cells."""

    def until(self, condition: Callable[[], bool], timeout: float = WAIT) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            _ui.drain()
            if condition():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)

    def wait(self, secs: float) -> None:
        self.until(lambda: False, secs)


@pytest.fixture
def pump() -> Pump:
    return Pump()


@pytest.fixture
def make_panel(make_ctx: Callable[..., Context]) -> Iterator[Callable[..., FleetPanel]]:
    made: list[FleetPanel] = []

    def make(ctx: Context | None = None, **kwargs: object) -> FleetPanel:
        kwargs.setdefault("poll_secs", 0.3)
        panel = FleetPanel(ctx or make_ctx(), **kwargs)  # type: ignore[arg-type]
        made.append(panel)
        return panel

    yield make
    for panel in made:
        panel.close()


def devices_of(fleet: LocalFleet, key: str | None = None) -> set[str]:
    return {
        f"{p.spec.key}@127.0.0.1:{p.port}"
        for p in fleet.servers
        if p.spec is not None and key in (None, p.spec.key)
    }


def unscheduled(target: Target) -> Candidate:
    return Candidate(MATMUL, target, _tvm.trace_to_json(_tvm.Schedule(MATMUL.mod()).trace))


# -- the fleet panel ------------------------------------------------------------------------------
def test_the_panel_lists_devices_by_key_with_the_target_each_key_reports(
    fleet: LocalFleet,
    fleet_state: Path,
    make_panel: Callable[..., FleetPanel],
    pump: Pump,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # key local's peak was measured before (`explorer peak --tracker`), avx2's was not
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "peak.json"))
    one_core = Target.local_cpu(num_cores=1)
    device = FleetDevice(str(fleet.tracker), "local", cpu_model())
    kept = MachinePeak(123.0, 45.0, one_core.key(), cpu_model(), "0.27", 1, 1.0, None)
    _write_cache({_cache_key(one_core, device): kept})
    asked: list[str] = []
    original = RemoteMeasurer.device_target

    def counted(self: RemoteMeasurer) -> Target:
        asked.append(self.key)
        return original(self)

    RemoteMeasurer.device_target = counted  # type: ignore[method-assign]
    try:
        panel = make_panel(state=fleet_state)
        assert pump.until(
            lambda: (
                panel.info is not None
                and len(panel.info.devices) == 3
                and all(k.target is not None for k in panel.info.keys)
            )
        ), (panel.status.value, panel.targets())
        polls = panel.num_polls
        assert pump.until(lambda: panel.num_polls >= polls + 3)  # polling goes on...
    finally:
        RemoteMeasurer.device_target = original  # type: ignore[method-assign]
    assert sorted(asked) == ["avx2", "local"]  # ...and each key's target was asked once

    info = panel.info
    assert info is not None and info.tracker == str(fleet.tracker)
    assert [k.key for k in info.keys] == ["avx2", "local"]
    local, avx2 = info.key("local"), info.key("avx2")
    assert local is not None and avx2 is not None
    assert {d.device for d in local.devices} == devices_of(fleet, "local")
    assert {d.device for d in avx2.devices} == devices_of(fleet, "avx2")
    assert local.target is not None and avx2.target is not None
    assert local.target.key() == Target.local_cpu(num_cores=1).key()
    assert avx2.target.key() == "llvm:x86-64-v3:1"
    assert all(d.measured == 0 and d.per_minute == 0 for d in info.devices)
    assert panel.status.value.startswith(f"Tracker {fleet.tracker}: 3 devices under 2 keys;")
    table = panel.table.value
    assert table.count("class='se-fleet-device'") == 3
    assert "llvm:x86-64-v3:1" in table and local.target.key() in table
    assert "1 thread on core" in table  # this machine's servers: how each was started
    assert local.peak == kept and avx2.peak is None
    assert "peak 123 GFLOPS, 45 GB/s" in table
    hint = (
        f"peak not measured yet (<code>explorer peak --tracker {fleet.tracker} --key avx2</code>)"
    )
    assert hint in table
    assert not panel.stop_button.disabled and panel.start_button.disabled  # a fleet runs


def test_a_key_whose_devices_are_all_busy_is_asked_its_target_once_one_is_free(
    fleet: LocalFleet, fleet_state: Path, make_panel: Callable[..., FleetPanel], pump: Pump
) -> None:
    # the avx2 key's one device is in a session (as during a search): no request is queued
    session, device = tracker_module.open_session(
        fleet.tracker, "avx2", session_timeout=120, queue_timeout=60
    )
    try:
        panel = make_panel(state=fleet_state)
        assert pump.until(lambda: panel.targets().get("avx2") is not None)
        assert pump.until(lambda: isinstance(panel.targets().get("local"), Target))
        polls = panel.num_polls
        assert pump.until(lambda: panel.num_polls >= polls + 2)
        assert panel.targets()["avx2"] == "not known yet: every device is busy"
        assert panel.info is not None and (avx2 := panel.info.key("avx2")) is not None
        assert (avx2.free, avx2.target) == (0, None)
        assert "target not known yet: every device is busy" in panel.table.value
    finally:
        del session  # ends the session: the device registers again
    assert pump.until(lambda: isinstance(panel.targets().get("avx2"), Target)), panel.targets()
    assert device in devices_of(fleet, "avx2")


def test_counts_per_device_follow_a_measurement_live(
    fleet: LocalFleet,
    fleet_state: Path,
    make_ctx: Callable[..., Context],
    make_panel: Callable[..., FleetPanel],
    pump: Pump,
) -> None:
    ctx = make_ctx()
    panel = make_panel(ctx, state=fleet_state)
    assert pump.until(lambda: panel.info is not None and len(panel.info.devices) == 3)
    with RemoteMeasurer(fleet.tracker, "local", FAST) as m:
        target = m.device_target()
        results = m.measure([unscheduled(target)] * 4)
    assert all(r.device in devices_of(fleet, "local") for r in results), results
    run = ctx.store.create_run(MATMUL, target, "manual")
    trials = [NewTrial(unscheduled(target), r) for r in results]
    failed = MeasureResult(MeasureStatus.RUN_ERROR, error_msg="lost", device=results[0].device)
    ctx.store.add_trials(run.id, [*trials, NewTrial(unscheduled(target), failed)])

    expected = collections.Counter(r.device for r in results)
    expected[results[0].device] += 1
    # the store's subscription reaches the panel at once, without waiting for a poll
    _ui.drain()
    info = panel.info
    assert info is not None
    assert {d.device: d.measured for d in info.devices if d.measured} == dict(expected)
    first = info.device(str(results[0].device))
    assert first is not None and first.errors == (("run_error", 1),)
    assert first.per_minute == pytest.approx(expected[results[0].device] / 5)
    assert all(d.num_errors == 0 for d in info.devices if d is not first)
    assert "1 (run_error 1)" in panel.table.value and "s ago" in panel.table.value


def test_trials_another_process_stores_show_at_the_next_poll(
    fleet: LocalFleet,
    fleet_state: Path,
    tmp_path: Path,
    make_panel: Callable[..., FleetPanel],
    pump: Pump,
) -> None:
    db = tmp_path / "records.db"
    ctx = Context(store=str(db), measurer=Instant())
    try:
        panel = make_panel(ctx, state=fleet_state)
        assert pump.until(lambda: panel.info is not None and len(panel.info.devices) == 3)
        device = sorted(devices_of(fleet, "avx2"))[0]
        target = Target.local_cpu(num_cores=1)
        with get_store(db) as other:  # another connection: its batches are not announced here
            run = other.create_run(MATMUL, target, "random")
            ok = MeasureResult(MeasureStatus.OK, (1e-3,), flops=1, device=device)
            other.add_trials(run.id, [NewTrial(unscheduled(target), ok)] * 3)
        assert pump.until(
            lambda: (
                panel.info is not None
                and (d := panel.info.device(device)) is not None
                and d.measured == 3
            )
        ), panel.table.value
    finally:
        ctx.close()


def test_a_tracker_that_does_not_answer_is_one_sentence_and_the_ui_never_waits(
    fleet: LocalFleet, make_panel: Callable[..., FleetPanel], pump: Pump
) -> None:
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", SILENT_PORT))
        silent.listen(8)
        # a poll waits 2 s for the silent tracker, on a worker: the field and the polling
        # return before it ended (a UI thread that waited with it would have seen it end)
        panel = make_panel(tracker_timeout=2.0, poll_secs=0.2, autostart=False)
        panel.tracker.value = f"127.0.0.1:{SILENT_PORT}"  # polls at once, on a worker
        panel.start_polling()
        assert panel.num_polls == 0
        assert pump.until(lambda: panel.num_polls >= 2, timeout=60)
    status = panel.status.value
    assert status == (
        f"127.0.0.1:{SILENT_PORT} did not answer as a TVM RPC tracker: timed out "
        "(asking again every 0.2 s)."
    ), status
    assert panel.info is None and panel.table.value == ""

    panel.tracker.value = NOBODY
    assert pump.until(lambda: "Connection refused" in panel.status.value, timeout=30)
    assert panel.status.value == (
        f"No tracker answers at {NOBODY}: Connection refused (asking again every 0.2 s)."
    )
    panel.tracker.value = "nonsense"
    assert panel.status.value == (
        "A tracker address is HOST:PORT, e.g. 127.0.0.1:9190 (got 'nonsense')."
    )
    panel.tracker.value = str(fleet.tracker)  # polling went on: a tracker that answers shows
    assert pump.until(lambda: panel.info is not None and len(panel.info.devices) == 3)
    for text in (panel.status.value, panel.notice.value):
        assert "\n" not in text and "Traceback" not in text


def test_closing_the_panel_stops_its_polling(
    fleet: LocalFleet, fleet_state: Path, make_panel: Callable[..., FleetPanel], pump: Pump
) -> None:
    panel = make_panel(state=fleet_state, poll_secs=0.1)
    assert pump.until(lambda: panel.num_polls >= 2)
    panel.close()
    assert not panel.is_polling
    after = panel.num_polls
    pump.wait(1.5)
    assert panel.num_polls <= after + 1  # the poll under way when it closed, at most
    panel.close()  # twice is harmless


def test_start_and_stop_buttons_run_a_local_fleet(
    tmp_path: Path, make_panel: Callable[..., FleetPanel], pump: Pump
) -> None:
    state = tmp_path / "fleet.json"
    panel = make_panel(state=state, port=free_port())
    try:
        assert pump.until(
            lambda: (
                panel.status.value == NO_LOCAL_FLEET.rstrip(".") + " (asking again every 0.3 s)."
            ),
            timeout=30,
        ), panel.status.value
        assert panel.stop_button.disabled and not panel.start_button.disabled

        panel.start_button.click()
        assert panel.start_button.disabled and panel.stop_button.disabled
        assert panel.notice.value == "Starting a local fleet: a tracker and 2 servers..."
        # The panel's polling can see both devices before the start's job has ended.
        assert pump.until(lambda: panel.info is not None and len(panel.info.devices) == 2)
        assert pump.until(lambda: panel.notice.value.startswith("Started")), panel.notice.value
        running = read_fleet(state)
        assert running is not None and len(running.servers) == 2
        assert all(p.spec is not None and p.spec.threads == 1 for p in running.servers)
        assert panel.notice.value.startswith(
            f"Started a local fleet: tracker {running.tracker}, 2 device servers (1 thread"
        )
        assert not panel.stop_button.disabled and panel.start_button.disabled

        panel.stop_button.click()
        assert panel.notice.value == "Stopping the local fleet..."
        assert pump.until(lambda: panel.notice.value.startswith("Stopped"), timeout=60)
        assert panel.notice.value == "Stopped the local fleet (3 processes)."
        assert pump.until(lambda: panel.status.value.startswith("No fleet runs"), timeout=30)
        assert not running.processes[0].is_alive() and not state.exists()
        assert not [p for p in running.processes if p.is_alive()]
        assert not group_leftovers(running.processes), group_leftovers(running.processes)
        assert panel.stop_button.disabled and not panel.start_button.disabled
    finally:
        stop_fleet(state)


# -- the explorer's tab ---------------------------------------------------------------------------
class Instant(Measurer):
    """Answers at once (the fleet tests use no local measurement)."""

    def __init__(self) -> None:
        self.measured = 0
        self.closed = 0

    def measure(  # type: ignore[override]
        self,
        candidates: list[Candidate],
        *,
        best_secs: float | None = None,
        reference: bool = False,
    ) -> list[MeasureResult]:
        self.measured += len(candidates)
        return [MeasureResult(MeasureStatus.OK, (1e-3,), flops=1) for _ in candidates]

    def close(self) -> None:
        self.closed += 1


def test_the_explorer_has_a_fleet_tab_that_polls_while_shown(
    fleet: LocalFleet, fleet_state: Path, pump: Pump
) -> None:
    ex = Explorer(store=":memory:", measurer=Instant())
    try:
        ex.fleet.state = fleet_state
        assert ex.tabs.titles[FLEET_TAB] == "Fleet"
        assert ex.tabs.children[FLEET_TAB].children == (ex.fleet.widget,)
        assert not ex.fleet.is_polling and ex.fleet.num_polls == 0
        ex.tabs.selected_index = FLEET_TAB
        assert ex.fleet.is_polling
        assert pump.until(lambda: ex.fleet.info is not None and len(ex.fleet.info.devices) == 3)
        ex.tabs.selected_index = 0
        assert not ex.fleet.is_polling
    finally:
        ex.close()
    assert not ex.fleet.is_polling


# -- the search panel's fleet option --------------------------------------------------------------
@pytest.fixture
def made_remote(monkeypatch: pytest.MonkeyPatch) -> list[RemoteMeasurer]:
    """Every RemoteMeasurer the search panel makes (real ones), and how often each closed."""
    import widgets.search_panel as search_panel

    made: list[RemoteMeasurer] = []

    class Recorded(RemoteMeasurer):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            self.times_closed = 0
            made.append(self)

        def close(self) -> None:
            self.times_closed += 1
            super().close()

    monkeypatch.setattr(search_panel, "RemoteMeasurer", Recorded)
    return made


@pytest.fixture
def search(
    make_ctx: Callable[..., Context], fleet_state: Path
) -> Iterator[tuple[Context, SearchPanel, Instant]]:
    mine = Instant()
    ctx = make_ctx(mine)
    ctx.set_session(ScheduleSession(MATMUL, ctx.target))
    panel = SearchPanel(ctx, batch_size=4, fleet_config=FAST, fleet_state=fleet_state)
    yield ctx, panel, mine
    if panel.job is not None:
        panel.job.cancel()
        panel.job.wait(WAIT)
    panel.close()


def test_a_search_on_the_fleet_runs_on_its_devices_for_their_target(
    fleet: LocalFleet,
    search: tuple[Context, SearchPanel, Instant],
    made_remote: list[RemoteMeasurer],
) -> None:
    ctx, panel, mine = search
    assert panel.fleet_row.layout.display == "none"
    panel.measure_on.value = FLEET
    assert panel.fleet_row.layout.display is None and panel.target.disabled
    assert panel.fleet_tracker.value == str(fleet.tracker)  # this machine's fleet, proposed
    assert panel.target_note.value.startswith("target: what the devices of key local report")
    panel.strategy.value = "random"
    panel.trials.value = 4
    job = panel.start()
    assert job is not None and job.wait(WAIT)
    assert job.state is JobState.FINISHED, panel.status.value
    assert panel.status.value.startswith("Done: 4 trials"), panel.status.value

    expected = Target.local_cpu(num_cores=1)
    assert panel.fleet_target is not None and panel.fleet_target.key() == expected.key()
    assert panel.target_note.value == f"target: {expected.key()} (reported by key local)"
    (run,) = ctx.store.runs()
    assert run.target.key() == expected.key()  # the devices' target, not this machine's
    result = panel.result
    assert result is not None and result.num_trials == 4
    rows = ctx.store.trial_rows(run_id=run.id)
    assert sum(not r.is_remeasure for r in rows) == 4
    assert {r.device for r in rows} <= devices_of(fleet, "local"), [r.device for r in rows]
    assert all(r.device for r in rows)
    assert [m.times_closed for m in made_remote] == [1]  # the panel's own, closed at the end
    assert mine.measured == 0 and mine.closed == 0  # the user's measurer: unused, left open

    panel.fleet_key.value = "avx2"
    assert panel.fleet_target is None
    panel.trials.value = 2
    job = panel.start()
    assert job is not None and job.wait(WAIT)
    assert job.state is JobState.FINISHED, panel.status.value
    assert panel.target_note.value == "target: llvm:x86-64-v3:1 (reported by key avx2)"
    avx2_run = ctx.store.runs()[-1]
    assert avx2_run.target.key() == "llvm:x86-64-v3:1"
    assert {r.device for r in ctx.store.trial_rows(run_id=avx2_run.id)} <= devices_of(
        fleet, "avx2"
    )
    assert [m.times_closed for m in made_remote] == [1, 1]


def test_a_fleet_search_that_cannot_start_says_why_and_stores_nothing(
    fleet: LocalFleet,
    search: tuple[Context, SearchPanel, Instant],
    made_remote: list[RemoteMeasurer],
) -> None:
    ctx, panel, mine = search
    panel.measure_on.value = FLEET
    panel.trials.value = 2

    panel.fleet_tracker.value = ""
    assert panel.start() is None
    assert panel.status.value == (
        "Not started: type the fleet's tracker as HOST:PORT (`explorer fleet up` prints it)."
    )
    panel.fleet_tracker.value = "nonsense"
    assert panel.start() is None
    assert panel.status.value.startswith("Not started: a tracker address is HOST:PORT")

    cases = [
        (NOBODY, "local", f"Not started: no tracker answers at {NOBODY}: Connection refused."),
        (
            str(fleet.tracker),
            "nope",
            f"Not started: no device is registered under key 'nope' at the tracker "
            f"{fleet.tracker} (keys with devices: avx2, local).",
        ),
    ]
    for tracker, key, said in cases:
        panel.fleet_tracker.value, panel.fleet_key.value = tracker, key
        job = panel.start()
        assert job is not None and job.wait(WAIT)
        assert panel.status.value == said
        assert panel.progress.bar_style == "" and panel.progress.value == 0
        assert not panel.start_button.disabled and panel.stop_button.disabled
    assert ctx.store.runs() == []  # nothing was started, so nothing stored
    assert [m.times_closed for m in made_remote] == [1, 1]
    assert mine.measured == 0 and mine.closed == 0


def test_a_search_on_this_machine_still_uses_the_contexts_measurer(
    search: tuple[Context, SearchPanel, Instant], made_remote: list[RemoteMeasurer]
) -> None:
    ctx, panel, mine = search
    panel.measure_on.value = FLEET
    panel.measure_on.value = "local"
    assert panel.fleet_row.layout.display == "none" and not panel.target.disabled
    assert panel.target_note.value == ""
    panel.trials.value = 2
    job = panel.start()
    assert job is not None and job.wait(WAIT) and job.state is JobState.FINISHED
    (run,) = ctx.store.runs()
    assert run.target == ctx.target and mine.measured > 0 and mine.closed == 0
    assert made_remote == []
    assert all(r.device is None for r in ctx.store.trial_rows(run_id=run.id))
