"""A real fleet for the tests: a TVM RPC tracker and device servers on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from explorer.fleet import LocalFleet, default_servers, start_fleet, stop_fleet


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    """Two 1-thread servers under key ``local``, each pinned to its own core."""
    state = tmp_path_factory.mktemp("fleet") / "fleet.json"
    running = start_fleet(default_servers(2, threads=1), state=state, port=9250)
    try:
        yield running
    finally:
        stop_fleet(state)
    assert not [p for p in running.processes if p.is_alive()], "fleet down left processes"
