"""Talking to a TVM RPC tracker: where it is, what it holds, and a session on one of its devices.

The tracker speaks a small JSON protocol (``tvm.rpc.base``); TVM's ``TrackerSession.request``
hides which server it connected to, and a record must say which device measured it, so
``open_session`` makes the same two steps itself: ask the tracker for a free server of the key,
then connect to that server.
"""

from __future__ import annotations

import json
import re
import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import Any

from explorer.errors import FleetError

DEVICE_INFO_FUNC = "explorer.fleet.device_info"
"""The global function a device server started by ``explorer fleet`` answers with its identity
and target (JSON text); a plain ``tvm.exec.rpc_server`` has none."""

PIN_LAUNCHER_FUNC = "explorer.fleet.keep_off_worker_cores"
"""The global function of a device server started by ``explorer fleet`` that binds the session's
launching thread (the one calling it) off TVM's worker cores; answers the cores it is bound to,
comma-separated, or ``""`` when there was nothing to do (``explorer.measure``'s
``keep_off_worker_cores``)."""

_ADDRESS = re.compile(r"^\[?([A-Za-z0-9.:_-]+?)\]?:(\d{1,5})$")


@dataclass(frozen=True)
class TrackerAddress:
    """Where a tracker listens: ``TrackerAddress.parse("127.0.0.1:9190")``."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> TrackerAddress:
        """``HOST:PORT``; raises ``ValueError`` naming what is wrong."""
        match = _ADDRESS.match(str(text).strip())
        if not match or not 0 < int(match.group(2)) < 65536:
            raise ValueError(f"a tracker address is HOST:PORT, e.g. 127.0.0.1:9190 (got {text!r})")
        return cls(match.group(1), int(match.group(2)))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ServerEntry:
    """One device server registered with the tracker."""

    key: str
    host: str
    port: int

    @property
    def device(self) -> str:
        return device_name(self.key, self.host, self.port)


@dataclass(frozen=True)
class QueueInfo:
    """The tracker's queue for one key: free servers and requests waiting for one."""

    free: int
    pending: int


@dataclass(frozen=True)
class TrackerSummary:
    servers: tuple[ServerEntry, ...]
    queues: dict[str, QueueInfo]

    def keys(self) -> list[str]:
        return sorted({s.key for s in self.servers} | set(self.queues))


def device_name(key: str, host: str, port: int) -> str:
    """How records and the fleet name a device: ``key@host:port``."""
    return f"{key}@{host}:{port}"


def _rpc() -> Any:
    from explorer import _tvm

    return _tvm.rpc


def _tracker_socket(address: TrackerAddress, timeout: float) -> socket.socket:
    base = _rpc().base
    try:
        sock = socket.create_connection((address.host, address.port), timeout=timeout)
    except OSError as exc:
        raise FleetError(f"no tracker answers at {address}: {exc.strerror or exc}") from None
    try:
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", base.recvall(sock, 4))[0]
    except (OSError, RuntimeError) as exc:
        sock.close()
        raise FleetError(f"{address} did not answer as a TVM RPC tracker: {exc}") from None
    if magic != base.RPC_TRACKER_MAGIC:
        sock.close()
        raise FleetError(f"{address} is not a TVM RPC tracker")
    return sock


def _ask(sock: socket.socket, message: list[Any]) -> Any:
    base = _rpc().base
    base.sendjson(sock, message)
    return base.recvjson(sock)


def tracker_summary(address: TrackerAddress, *, timeout: float = 5.0) -> TrackerSummary:
    """The servers and per-key queues the tracker holds now.

    Raises:
        FleetError: nothing answers at ``address``, or it is not a tracker.
    """
    sock = _tracker_socket(address, timeout)
    try:
        reply = _ask(sock, [_rpc().base.TrackerCode.SUMMARY])
    except (OSError, RuntimeError, ValueError) as exc:
        raise FleetError(f"the tracker at {address} did not send its summary: {exc}") from None
    finally:
        sock.close()
    data = reply[1]
    servers = []
    for item in data.get("server_info", ()):
        key = str(item.get("key", ""))
        if not key.startswith("server:"):
            continue  # clients that asked with UPDATE_INFO; only servers are devices
        host, port = item.get("addr") or (None, None)
        servers.append(ServerEntry(key[len("server:") :], str(host), int(port or 0)))
    queues = {
        str(k): QueueInfo(int(v.get("free", 0)), int(v.get("pending", 0)))
        for k, v in (data.get("queue_info") or {}).items()
    }
    return TrackerSummary(tuple(sorted(servers, key=lambda s: (s.key, s.port))), queues)


def wait_for_devices(
    address: TrackerAddress, key: str, count: int, *, timeout: float = 60.0
) -> TrackerSummary:
    """Block until ``count`` servers of ``key`` are registered (servers register a second or
    so after they start).

    Raises:
        FleetError: they did not all register within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            summary = tracker_summary(address)
            found = sum(s.key == key for s in summary.servers)
            if found >= count:
                return summary
        except FleetError:
            found = 0
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise FleetError(
                f"{found} of {count} device server(s) with key {key!r} registered with the "
                f"tracker at {address} within {timeout:g} s"
            )
        time.sleep(0.2)


class QueueTimeout(FleetError):
    """No device of the key became free in time."""


class NoDevice(FleetError):
    """No device is registered under the key any more: its servers went away."""


ALONE_SECS = 2.0
"""How long a request waits while its key has no device registered at all, before it gives
up with ``NoDevice``. Short: a caller that retries (``RemoteMeasurer``) gives the servers of a
restarted tracker the seconds they take to register again before it retries."""
_POLL_SECS = 0.5


def open_session(
    address: TrackerAddress, key: str, *, session_timeout: float, queue_timeout: float
) -> tuple[Any, str]:
    """An RPC session on a free device of ``key``, and that device's name (``key@host:port``).

    ``session_timeout``: the server ends the session after this many seconds (a hung kernel
    cannot hold a device forever). ``queue_timeout``: how long to wait for a free device.

    Raises:
        QueueTimeout: no device of the key became free within ``queue_timeout``.
        NoDevice: while waiting, the key had no device at all for ``ALONE_SECS``.
        FleetError: the tracker cannot be reached, or the server it offered refused.
    """
    base = _rpc().base
    sock = _tracker_socket(address, timeout=min(queue_timeout, 10.0))
    try:
        try:
            base.sendjson(sock, [base.TrackerCode.REQUEST, key, "", 1])
            reply = _reply_while_served(sock, address, key, queue_timeout)
        except (OSError, RuntimeError, ValueError) as exc:
            raise FleetError(f"the tracker at {address} dropped the request: {exc}") from None
    finally:
        sock.close()
    if not reply or reply[0] != base.TrackerCode.SUCCESS:
        raise FleetError(f"the tracker at {address} refused the request for {key!r}: {reply}")
    host, port, matchkey = reply[1]
    device = device_name(key, str(host), int(port))
    try:
        session = _rpc().connect(host, port, matchkey, int(max(1, session_timeout)))
    except Exception as exc:  # noqa: BLE001  (TVM raises RuntimeError/TVMError/OSError)
        raise FleetError(f"device {device} refused the session: {_first_line(exc)}") from None
    return session, device


def _reply_while_served(
    sock: socket.socket, address: TrackerAddress, key: str, queue_timeout: float
) -> Any:
    """The tracker's answer to a request, waiting at most ``queue_timeout``; meanwhile the
    tracker is asked every second whether the key still has devices. (It queues a request for
    a key without any, silently: a fleet whose servers all died held a search for minutes.)"""
    deadline = time.monotonic() + queue_timeout
    alone_since: float | None = None
    while True:
        wait = max(0.0, min(_POLL_SECS, deadline - time.monotonic()))
        if select.select([sock], [], [], wait)[0]:
            sock.settimeout(10.0)  # the answer is on its way: a few bytes
            return _rpc().base.recvjson(sock)
        now = time.monotonic()
        if now >= deadline:
            raise QueueTimeout(
                f"no device with key {key!r} became free at the tracker {address} within "
                f"{queue_timeout:g} s"
            )
        if any(s.key == key for s in tracker_summary(address).servers):
            alone_since = None
        elif alone_since is None:
            alone_since = now
        elif now - alone_since >= ALONE_SECS:
            raise NoDevice(
                f"no device is registered under key {key!r} at the tracker {address} any more"
            )


def device_info(session: Any) -> dict[str, Any]:
    """What a server started by ``explorer fleet`` says about itself; ``{}`` from a plain one."""
    try:
        func = session.get_function(DEVICE_INFO_FUNC)
        info = json.loads(str(func()))
    except Exception:  # noqa: BLE001  (a plain tvm rpc_server has no such function)
        return {}
    return info if isinstance(info, dict) else {}


def keep_launcher_off_workers(session: Any) -> bool:
    """Ask the device to keep the session's launching thread off TVM's worker cores; whether it
    is bound now (``False`` also from a plain ``tvm.exec.rpc_server``, which cannot)."""
    try:
        return bool(str(session.get_function(PIN_LAUNCHER_FUNC)()))
    except Exception:  # noqa: BLE001  (a plain tvm rpc_server has no such function)
        return False


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0] if "\n" in text else text
