"""Ports for tests that start servers (a tracker, a device server): a port the operating system
has just handed out, so that tests running side by side never ask for the same one (fixed ports
collided: one test's device server took the port another test's tracker wanted)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` right now (the OS picks it among its ephemeral
    ports, which it hands out in turn, so it is not handed out again soon)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
