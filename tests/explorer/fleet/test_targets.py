"""``DeviceTargets``: each key's devices asked once for their target, again only when the
answer was not final; a key whose devices are all busy is not asked (its request would wait in
the tracker's queue behind a search). Asking real devices is tests/widgets/test_fleet_panel.py's
and tests/explorer/fleet/test_remote_measurer.py's."""

from __future__ import annotations

from explorer.fleet import DeviceTargets, QueueInfo, ServerEntry, TrackerSummary
from explorer.machine import MachinePeak
from explorer.target import Target

TRACKER = "127.0.0.1:9190"


def summary(**free: int) -> TrackerSummary:
    """One device per key, with that many free."""
    servers = tuple(ServerEntry(k, "127.0.0.1", 9000 + i) for i, k in enumerate(sorted(free)))
    return TrackerSummary(servers, {k: QueueInfo(free=n, pending=0) for k, n in free.items()})


def test_each_key_is_asked_once_and_its_answer_kept() -> None:
    book = DeviceTargets()
    assert book.due(TRACKER, summary(a=1, b=1), now=0) == ["a", "b"]
    assert book.targets(TRACKER) == {k: "asking one of its devices..." for k in "ab"}
    cpu = Target.local_cpu()
    peak = MachinePeak(100.0, 10.0, cpu.key(), "x", "0.27", 1, 0.0, None)
    book.record(TRACKER, {"a": (cpu, peak, True), "b": ("not reported", None, True)}, now=1)
    assert book.targets(TRACKER) == {"a": cpu, "b": "not reported"}
    assert book.peaks(TRACKER) == {"a": peak}
    assert book.due(TRACKER, summary(a=1, b=1), now=1000) == []  # final: never again
    assert book.targets("127.0.0.1:9191") == {}  # per tracker


def test_an_answer_that_is_not_final_is_asked_again_later() -> None:
    book = DeviceTargets(retry_secs=30)
    assert book.due(TRACKER, summary(a=1), now=0) == ["a"]
    book.record(TRACKER, {"a": ("not known yet: every device was busy", None, False)}, now=10)
    assert book.due(TRACKER, summary(a=1), now=39) == []
    assert book.due(TRACKER, summary(a=1), now=40) == ["a"]


def test_a_key_whose_devices_are_all_busy_waits_for_a_later_poll() -> None:
    book = DeviceTargets()
    assert book.due(TRACKER, summary(a=0, b=1), now=0) == ["b"]
    assert book.targets(TRACKER)["a"] == "not known yet: every device is busy"
    assert book.due(TRACKER, summary(a=1, b=1), now=1) == ["a"]  # free again: asked now
    cpu = Target.local_cpu()
    book.record(TRACKER, {"a": (cpu, None, True)}, now=2)
    book.due(TRACKER, summary(a=0), now=3)
    assert book.targets(TRACKER)["a"] == cpu  # a known target is never replaced by "busy"
