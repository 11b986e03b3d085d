"""Worker processes forked from a server that has already imported them.

A measurement worker needs TVM, and importing it costs 1-2 s of CPU: paid by every worker a
caller starts (a builder per core, a runner, each replacement after a crash or a new thread
count, the trace checker's). The fork server pays it once per caller process: it imports the
worker's module, then forks a copy of itself for each worker (about 15 ms).

Not ``multiprocessing``'s forkserver: its children re-run the caller's ``__main__`` script, so
a user's script without an ``if __name__ == "__main__"`` guard would run again in every worker.

Protocol, over a ``SOCK_SEQPACKET`` socket pair (one message per worker, never split): the
caller sends a pickled ``{"argv", "env", "cwd", "cpus"}`` with four descriptors: the worker's
stdin, stdout and stderr, and the write end of a *status* pipe. The server forks; the child
runs the server's module's ``main(argv)`` on those streams, environment, folder and cores. On
the status pipe the server writes the worker's pid, and once it has exited its exit code
(``Popen.returncode``'s meaning: ``-N`` for signal ``N``), each an 8-byte signed big-endian
integer. The caller reads both from its end of the pipe, without a round trip on the socket:
starting a worker never blocks, even while the server is still importing. The server leaves
when the caller closes the socket (at its exit, or when it dies); a worker whose server has
gone sees its parent change and leaves too.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

INT = struct.Struct(">q")
_MAX_MESSAGE = 1 << 20
_NEVER_STARTED = 255  # the exit code reported for a worker the server never forked


class ForkedProcess:
    """One forked worker, seen from the caller: what a ``subprocess.Popen`` offers for it.

    ``pid`` is ``None`` until the server has forked it (a pending start never blocks).
    """

    def __init__(self, status_fd: int) -> None:
        os.set_blocking(status_fd, False)
        self._status_fd = status_fd
        self._lock = threading.Lock()
        self._buffer = b""
        self._ended = False  # end of file on the status pipe
        self.pid: int | None = None
        self.returncode: int | None = None
        self._pidfd: int | None = None

    def _read(self, timeout: float | None) -> None:
        """Take what the status pipe holds, waiting up to ``timeout`` for the first byte.

        Two threads may ask at once (one waiting for a lost worker, one killing it): the pipe is
        non-blocking, and only one of them reads at a time.
        """
        while True:
            with self._lock:
                if self.returncode is not None or self._ended or self._status_fd < 0:
                    break
                fd = self._status_fd
            readable, _, _ = select.select([fd], [], [], timeout)
            if not readable:
                return
            with self._lock:
                self._take(fd)
            timeout = 0
        with self._lock:
            if self._ended and self.returncode is None:
                # The server went away before it reported: a forked worker follows it (it
                # watches its parent), one never forked never will be.
                self._signal(signal.SIGKILL)
                self.returncode = -signal.SIGKILL if self.pid is not None else _NEVER_STARTED

    def _take(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 2 * INT.size - len(self._buffer))
        except BlockingIOError:
            return  # the other thread took it
        if not chunk:
            self._ended = True
            return
        self._buffer += chunk
        if self.pid is None and len(self._buffer) >= INT.size:
            self.pid = INT.unpack_from(self._buffer)[0]
            # A pidfd signals this process and no other, even once its pid is reused.
            with contextlib.suppress(OSError, AttributeError):
                self._pidfd = os.pidfd_open(self.pid)
        if len(self._buffer) == 2 * INT.size:
            self.returncode = INT.unpack_from(self._buffer, INT.size)[0]

    def poll(self) -> int | None:
        self._read(0)
        return self.returncode

    def wait_forked(self, timeout: float) -> int | None:
        """The pid, once the server has forked the process (``None``: not within ``timeout``,
        or never)."""
        deadline = time.monotonic() + timeout
        while self.pid is None and self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._read(left)
        return self.pid

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("measurement worker", timeout or 0.0)
            self._read(left)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is not None:
            return
        if self.pid is None:
            self._read(5.0)  # the server is still importing: the fork follows shortly
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(OSError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signum)
            elif self.pid is not None and not self._ended:
                os.kill(self.pid, signum)

    def close(self) -> None:
        """Release the descriptors, once no other thread waits on this process (kill it
        first; one still unreported counts as killed)."""
        self.poll()
        for fd in (self._status_fd, self._pidfd):
            if fd is not None and fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._status_fd, self._pidfd = -1, None
        if self.returncode is None:
            self.returncode = -signal.SIGKILL


class ForkServer:
    """The caller's end: a server process that has imported ``module`` and forks it."""

    def __init__(self, module: str) -> None:
        self.module = module
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        # The server must import the same `explorer` as the caller, even from a source
        # checkout that a notebook put on sys.path by hand.
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _SERVER, str(theirs.fileno()), module],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        self.owner = os.getpid()

    def start(
        self,
        argv: list[str],
        env: dict[str, str],
        stdin: int,
        stdout: int,
        stderr: int,
    ) -> ForkedProcess:
        """Ask for a worker running ``self.module``'s ``main(argv)`` on these descriptors (the
        caller keeps its copies); raises ``OSError`` if the server is gone."""
        status_r, status_w = os.pipe()
        request = {
            "argv": argv,
            "env": env,
            "cwd": os.getcwd(),
            # The caller's cores (its main thread's): not those of the thread that happened
            # to start the server, which may have been bound to one core to time a kernel.
            "cpus": sorted(os.sched_getaffinity(os.getpid())),
        }
        try:
            socket.send_fds(self._sock, [pickle.dumps(request)], [stdin, stdout, stderr, status_w])
        except OSError:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
        return ForkedProcess(status_r)

    @property
    def is_alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def pid(self) -> int:
        return self._proc.pid

    def close(self) -> None:
        self._sock.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


# Not `-m`: the package imports this module, and runpy would warn of running it twice.
_SERVER = "import sys; from explorer.core._forkserver import main; main(sys.argv[1:])"
_servers: dict[str, ForkServer] = {}
_lock = threading.Lock()


@atexit.register
def _close_servers() -> None:
    # The server would leave on its own once this process has gone; waiting for it here means
    # a command leaves nothing behind when it returns.
    with _lock:
        for server in _servers.values():
            if server.owner == os.getpid():
                server.close()
        _servers.clear()


def server_pids() -> list[int]:
    """The pids of this process's live servers: forking and reaping workers is its work too."""
    with _lock:
        return [s.pid for s in _servers.values() if s.owner == os.getpid() and s.is_alive]


def fork_worker(
    module: str,
    argv: list[str],
    env: dict[str, str],
    stdin: int,
    stdout: int,
    stderr: int,
) -> ForkedProcess:
    """Start ``module.main(argv)`` as a fork of this process's server for ``module``, starting
    (or restarting) the server as needed."""
    with _lock:
        for attempt in (1, 2):
            server = _servers.get(module)
            # A server belongs to the process that started it (not to a fork of that process).
            if server is None or not server.is_alive or server.owner != os.getpid():
                server = _servers[module] = ForkServer(module)
            try:
                return server.start(argv, env, stdin, stdout, stderr)
            except OSError:
                if attempt == 2:
                    raise
                server.close()
                del _servers[module]
    raise AssertionError("unreachable")


# -- the server process -------------------------------------------------------------------------
def _child(module: str, request: dict[str, Any], fds: list[int], keep_closed: list[int]) -> None:
    """In the forked child: take the worker's streams and environment, run it, never return."""
    code = 1
    try:
        for fd in keep_closed:
            with contextlib.suppress(OSError):
                os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        os.sched_setaffinity(0, request["cpus"])
        main = importlib.import_module(module).main
        code = int(main(request["argv"]) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001  (reported on the worker's stderr, its log)
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _reap(status: dict[int, int]) -> None:
    while True:
        try:
            pid, how = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, INT.pack(os.waitstatus_to_exitcode(how)))
            os.close(fd)


def serve(sock: socket.socket, module: str) -> None:
    # A Ctrl-C in the terminal reaches the whole process group: the caller decides.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(
        Exception
    ):  # a broken import fails again, and is reported, per worker
        importlib.import_module(module)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    status: dict[int, int] = {}  # pid -> its status pipe
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap(status)
        if sock.fileno() not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            return  # the caller has gone
        request = pickle.loads(data)
        pid = os.fork()
        if pid == 0:
            _child(module, request, fds, [sock.fileno(), wake_r, wake_w, *status.values()])
        for fd in fds[:3]:
            os.close(fd)
        status[pid] = fds[3]
        with contextlib.suppress(OSError):
            os.write(fds[3], INT.pack(pid))
        _reap(status)  # a child may have ended before its status pipe was recorded


def main(argv: list[str]) -> None:
    """The server's entry: ``argv`` is its socket's descriptor and the module to preload."""
    serve(socket.socket(fileno=int(argv[0])), argv[1])
    # Unloading TVM and LLVM at the interpreter's teardown takes a quarter of a second, and the
    # caller waits for it at its exit: nothing here needs finalizing.
    os._exit(0)
