"""A small persistent pool of measurement worker processes (``explorer.measure._worker``).

Workers are forks of this process's fork server (``_forkserver``), which imported TVM once,
so a worker starts in milliseconds rather than a second or two of CPU. They are started
lazily, reused for every request, and replaced only after one of them dies, hangs or grows
past the memory limit -- all three are detected here, in the parent, while it waits for a
reply:

* death: end of file on the worker's stdout, then its exit status (``SIGSEGV`` and friends);
* hang: the worker has run for the request's timeout and is killed. What counts is the
  worker's own time on a CPU, not the wall clock: on a busy machine a correct kernel waits for
  the cores, and a wall-clock limit of seconds killed it as a "timeout" (issue 21). A hang
  burns CPU and is killed as before; one that blocks without running (a deadlock) is killed
  once the wall clock reaches ``MAX_STRETCH`` times the timeout;
* memory: the worker's RSS is polled with ``psutil`` and the worker is killed past the limit.

Each becomes a ``WorkerLost`` exception carrying a one-line reason; the caller turns it into a
``MeasureResult``. Worker stderr goes to a per-worker log file whose tail is quoted on a crash.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import psutil

from explorer._process import owned_temp_dir
from explorer.core._forkserver import fork_worker, server_pids
from explorer.core._protocol import decode_from, encode_message
from explorer.errors import ExplorerError

POLL_SECS = 0.02  # RSS poll period while waiting; psutil's read is ~20 us, negligible on 2 cores
MAX_STRETCH = 10.0  # how much longer than its timeout a request may take on the wall clock
STARTUP_TIMEOUT_SECS = 180.0  # importing TVM takes ~1 s, far more on a loaded 2-core box
_TAIL_CHARS = 1500
_WORKER_MODULE = "explorer.measure._worker"  # by name: this layer never imports TVM


class WorkerLost(Exception):
    """The worker was lost while serving a request; it is dead and will be replaced.

    ``kind`` is ``"crash"``, ``"timeout"`` or ``"memory"``; ``message`` is one line
    (``"worker crashed (signal SIGSEGV)"``); ``detail`` is the tail of the worker's stderr.
    """

    def __init__(self, kind: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.detail = detail


class WorkerStartError(ExplorerError, RuntimeError):
    """A worker could not start at all: a broken environment, not a bad candidate."""


class Worker:
    """One worker process and its message stream.

    Args:
        role: ``"build"`` or ``"run"`` (passed to the worker; both accept every request).
        num_threads: ``TVM_NUM_THREADS`` in the worker's environment. TVM's thread pool reads
            it once, when it first starts, so it is fixed for the worker's lifetime.
        memory_limit_bytes: RSS above which the worker is killed (0: no limit).
        log_dir: where the worker's stderr log goes.
    """

    def __init__(
        self,
        role: str,
        *,
        num_threads: int,
        memory_limit_bytes: int,
        log_dir: str,
    ) -> None:
        self.role = role
        self.num_threads = num_threads
        self.memory_limit_bytes = memory_limit_bytes
        fd, self.log_path = tempfile.mkstemp(prefix=f"{role}-", suffix=".log", dir=log_dir)
        env = dict(os.environ)
        env["TVM_NUM_THREADS"] = str(num_threads)
        env["OMP_NUM_THREADS"] = str(num_threads)
        to_worker_r, self._in = os.pipe()
        self._out, from_worker_w = os.pipe()
        try:
            self._proc = fork_worker(
                _WORKER_MODULE,
                ["--role", role, "--memory-limit-bytes", str(memory_limit_bytes)],
                env,
                stdin=to_worker_r,
                stdout=from_worker_w,
                stderr=fd,
            )
        except BaseException:
            os.close(self._in)
            os.close(self._out)
            raise
        finally:
            for ours in (fd, to_worker_r, from_worker_w):
                os.close(ours)
        self._ps: psutil.Process | None = None
        self._buffer = bytearray()
        self._ready = False
        self._asked_to_exit = False

    @property
    def pid(self) -> int | None:
        """The worker's process id (waiting for its fork if the server is still starting);
        ``None`` if it was never forked."""
        return self._proc.wait_forked(STARTUP_TIMEOUT_SECS)

    # -- life cycle ---------------------------------------------------------------------------
    @property
    def is_alive(self) -> bool:
        return self._proc.poll() is None

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_SECS) -> None:
        """Block until the worker has imported TVM; raises ``WorkerStartError`` otherwise."""
        if self._ready:
            return
        try:
            hello = self._receive(timeout)
        except WorkerLost as exc:
            self.kill()
            raise WorkerStartError(
                f"measurement worker failed to start ({exc.message})\n{self.stderr_tail()}"
            ) from None
        if not (isinstance(hello, dict) and hello.get("ready")):
            self.kill()
            raise WorkerStartError(f"measurement worker sent {hello!r} instead of 'ready'")
        self._ready = True

    def kill(self) -> None:
        self._proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)
        for fd in (self._in, self._out):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._in = self._out = -1

    def close(self, timeout: float = 2.0) -> None:
        """Ask the worker to leave, kill it if it does not, and remove its log.

        A worker that never said it is ready is killed at once: it may still be importing TVM
        and would read the request to leave only after that (up to a second or more).
        """
        if self._proc.poll() is None and self._ready:
            self.ask_to_exit()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=timeout)
        self.kill()
        self._proc.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log_path)

    def ask_to_exit(self) -> None:
        """Send the request to leave, once: a second one would find the pipe already closed
        by a worker that left meanwhile (a ``WorkerLost`` at close, seen on a busy machine)."""
        if self._asked_to_exit:
            return
        self._asked_to_exit = True
        with contextlib.suppress(WorkerLost, OSError):
            self._write({"op": "exit"})

    def stderr_tail(self, max_chars: int = _TAIL_CHARS) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - max_chars))
                return fh.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    # -- requests -----------------------------------------------------------------------------
    def request(
        self, message: dict[str, Any], timeout: float | None, *, wall_clock: bool = False
    ) -> dict[str, Any]:
        """Send one request and wait for its reply; ``timeout`` counts the worker's own running
        time (see the module doc), or with ``wall_clock`` the wall clock's (a request that
        waits on the network rather than a CPU).

        Raises:
            WorkerLost: the worker died, exceeded ``timeout`` or the memory limit; it is dead
                afterwards and must be replaced.
        """
        self.wait_ready()
        try:
            self._write(message)
            reply: dict[str, Any] = self._receive(timeout, wall_clock)  # always a dict
        except WorkerLost:
            self.kill()
            raise
        except BaseException:
            # Interrupted (Ctrl-C) mid-request: the stream is out of step, so the worker goes.
            self.kill()
            raise
        return reply

    def _write(self, message: dict[str, Any]) -> None:
        data = memoryview(encode_message(message))
        try:
            while data:
                data = data[os.write(self._in, data) :]
        except (BrokenPipeError, OSError):
            raise self._lost_by_exit() from None

    def _receive(self, timeout: float | None, wall_clock: bool = False) -> Any:
        started, ran_before = time.monotonic(), self._cpu_secs()
        fd = self._out
        while True:
            done, message = decode_from(self._buffer)
            if done:
                return message
            wait = POLL_SECS
            if timeout is not None:
                took = time.monotonic() - started
                # Past the timeout on the wall clock, the worker must also have run that long
                # (a busy machine only makes it wait), up to MAX_STRETCH times the timeout.
                ran = took if wall_clock else self._cpu_secs() - ran_before
                if took >= timeout and (ran >= timeout or took >= MAX_STRETCH * timeout):
                    self.kill()
                    waited = f"; {took:.1f} s on the wall clock" if took > 1.5 * timeout else ""
                    raise WorkerLost(
                        "timeout", f"killed: exceeded the timeout of {timeout:g} s{waited}"
                    )
                wait = min(wait, max(timeout - took, 0.0) or POLL_SECS)
            readable, _, _ = select.select([fd], [], [], wait)
            if readable:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise self._lost_by_exit()
                self._buffer += chunk
            self._check_memory()

    def _cpu_secs(self) -> float:
        """CPU seconds the worker has used so far, all its threads (0 once it is gone, or
        while its fork is pending)."""
        try:
            times = self._process().cpu_times()
        except psutil.Error:
            return 0.0
        return float(times.user + times.system)

    def _check_memory(self) -> None:
        if self.memory_limit_bytes <= 0:
            return
        try:
            rss = self._process().memory_info().rss
        except psutil.Error:
            return  # exiting; the next read reports how
        if rss > self.memory_limit_bytes:
            self.kill()
            raise WorkerLost(
                "memory",
                f"killed: exceeded the memory limit of {self.memory_limit_bytes >> 20} MiB "
                f"(resident size reached {rss >> 20} MiB)",
            )

    def _process(self) -> psutil.Process:
        if self._ps is None:
            if self._proc.pid is None:
                raise psutil.NoSuchProcess(0, msg="not forked (yet)")
            self._ps = psutil.Process(self._proc.pid)
        return self._ps

    def _lost_by_exit(self) -> WorkerLost:
        try:
            code: int | None = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self._proc.returncode
        if code is not None and code < 0:
            try:
                how = f"signal {signal.Signals(-code).name}"
            except ValueError:
                how = f"signal {-code}"
        else:
            how = f"exit status {code}"
        return WorkerLost("crash", f"worker crashed ({how})", _last_lines(self.stderr_tail(), 3))


def _last_lines(text: str, n: int) -> str:
    """The last ``n`` informative stderr lines: TVM's crash banner and errors, not the frames
    of its backtrace (JIT-compiled kernels have no symbols, so those say nothing useful)."""
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith('File "')]
    return "\n".join(lines[-n:])


class WorkerPool:
    """``num_build_workers`` builder workers (1 thread each) plus one runner worker.

    The runner is the only process that times kernels, so two kernels never compete for the
    cores while one is being timed. Its ``TVM_NUM_THREADS`` is fixed at start; asking for a
    different thread count replaces it. Dead workers are replaced lazily, on their next use.
    All methods may be called from one thread at a time (``LocalMeasurer`` holds a lock).
    """

    def __init__(
        self,
        *,
        num_build_workers: int,
        memory_limit_bytes: int,
        log_dir: str | None = None,
    ) -> None:
        self.num_build_workers = max(1, int(num_build_workers))
        self.memory_limit_bytes = int(memory_limit_bytes)
        self._own_log_dir = log_dir is None
        self.log_dir = log_dir or owned_temp_dir("explorer-workers-")
        self._builders: list[Worker | None] = [None] * self.num_build_workers
        # Last in, first out: a build goes to the builder that finished last, which is alive,
        # rather than to a slot whose worker was never started (see ``start``'s num_builders).
        self._idle: queue.LifoQueue[int] = queue.LifoQueue()
        for slot in reversed(range(self.num_build_workers)):
            self._idle.put(slot)
        self._runner: Worker | None = None
        self._executor = ThreadPoolExecutor(self.num_build_workers, thread_name_prefix="build")
        self._lock = threading.Lock()
        self.num_replaced = 0
        self._closed = False

    # -- workers ------------------------------------------------------------------------------
    def _new_worker(self, role: str, num_threads: int) -> Worker:
        return Worker(
            role,
            num_threads=num_threads,
            memory_limit_bytes=self.memory_limit_bytes,
            log_dir=self.log_dir,
        )

    def start(
        self,
        runner_threads: int | None = None,
        *,
        num_builders: int | None = None,
        wait: bool = True,
    ) -> None:
        """Start missing workers at once and (with ``wait``) wait until they are ready.

        Args:
            runner_threads: start (or replace) the runner with this many threads too.
            num_builders: how many builders a batch will use (default: all of them); only
                that many are started (0: none). Each costs a TVM import (~1 s of CPU) that
                competes with the others' on a small machine.
            wait: block until the workers are ready. Without it they start in the background
                and the first request to each waits for it.
        """
        count = self.num_build_workers if num_builders is None else max(0, num_builders)
        started: list[Worker] = []
        for slot, worker in enumerate(self._builders[:count]):
            if worker is None or not worker.is_alive:
                if worker is not None:
                    worker.close()
                self._builders[slot] = worker = self._new_worker("build", 1)
                started.append(worker)
        if runner_threads is not None and not self._runner_matches(runner_threads):
            started.append(self._replace_runner(runner_threads, wait=False))
        if wait:
            for worker in started:
                worker.wait_ready()

    def _runner_matches(self, num_threads: int) -> bool:
        r = self._runner
        return r is not None and r.is_alive and r.num_threads == num_threads

    def _replace_runner(self, num_threads: int, *, wait: bool = True) -> Worker:
        if self._runner is not None:
            self._runner.close()
        self._runner = self._new_worker("run", num_threads)
        if wait:
            self._runner.wait_ready()
        return self._runner

    def _builder(self, slot: int) -> Worker:
        worker = self._builders[slot]
        if worker is None or not worker.is_alive:
            if worker is not None:
                worker.close()
                with self._lock:
                    self.num_replaced += 1
            worker = self._builders[slot] = self._new_worker("build", 1)
        return worker

    def runner(self, num_threads: int) -> Worker:
        if not self._runner_matches(num_threads):
            if self._runner is not None and not self._runner.is_alive:
                self.num_replaced += 1
            self._replace_runner(num_threads)
        return self._runner  # type: ignore[return-value]  # _replace_runner set it just above

    def helper_pids(self) -> list[int]:
        """The live workers' pids and their fork server's: the processes working for it."""
        return [*server_pids(), *(pid for role in self.pids().values() for pid in role)]

    def pids(self) -> dict[str, list[int]]:
        """Process ids of the live workers, by role."""
        runner = self._runner
        return {
            "build": [
                w.pid for w in self._builders if w is not None and w.is_alive and w.pid is not None
            ],
            "run": [runner.pid] if runner is not None and runner.is_alive and runner.pid else [],
        }

    # -- requests -----------------------------------------------------------------------------
    def submit_builds(
        self,
        requests: Sequence[dict[str, Any]],
        timeout: float | None,
        *,
        wall_clock: bool = False,
    ) -> list[Future[dict[str, Any] | WorkerLost]]:
        """Queue build requests on the free builders; one future per request, in order.

        A future's value is the worker's reply, or the ``WorkerLost`` that ended the request.
        """
        self._check_open()

        def one(request: dict[str, Any]) -> dict[str, Any] | WorkerLost:
            slot = self._idle.get()
            try:
                return self._builder(slot).request(request, timeout, wall_clock=wall_clock)
            except WorkerLost as exc:
                return exc
            finally:
                self._idle.put(slot)

        return [self._executor.submit(one, r) for r in requests]

    def build_many(
        self, requests: Sequence[dict[str, Any]], timeout: float | None
    ) -> list[dict[str, Any] | WorkerLost]:
        """``submit_builds`` and wait for all; replies in request order."""
        futures = self.submit_builds(requests, timeout)
        try:
            return [f.result() for f in futures]
        except BaseException:
            self.cancel(futures)
            raise

    def cancel(self, futures: Sequence[Future[Any]]) -> None:
        """Drop queued builds and kill the workers (after an interrupt mid-batch)."""
        for f in futures:
            f.cancel()
        self.abort()

    def run(
        self, request: dict[str, Any], *, num_threads: int, timeout: float | None
    ) -> dict[str, Any] | WorkerLost:
        """Send one request to the runner worker (started or replaced as needed)."""
        self._check_open()
        try:
            return self.runner(num_threads).request(request, timeout)
        except WorkerLost as exc:
            return exc

    def call(
        self,
        target: str,
        *args: Any,
        role: str = "run",
        num_threads: int = 1,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> dict[str, Any] | WorkerLost:
        """Run ``"module:function"`` in a worker (diagnostics and tests)."""
        request = {"op": "call", "target": target, "args": args, "kwargs": kwargs}
        if role == "run":
            return self.run(request, num_threads=num_threads, timeout=timeout)
        return self.build_many([request], timeout)[0]

    # -- shutdown -----------------------------------------------------------------------------
    def abort(self) -> None:
        """Kill every worker (they restart on next use): after an interrupt mid-request."""
        for worker in [*self._builders, self._runner]:
            if worker is not None:
                worker.kill()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._executor.shutdown(wait=True, cancel_futures=True)
        workers = [w for w in [*self._builders, self._runner] if w is not None]
        for worker in workers:  # ask all first, then wait: they exit in parallel
            if worker.is_alive:
                worker.ask_to_exit()
        for worker in workers:
            worker.close()
        self._builders = [None] * self.num_build_workers
        self._runner = None
        if self._own_log_dir:
            with contextlib.suppress(OSError):
                for name in os.listdir(self.log_dir):
                    os.unlink(os.path.join(self.log_dir, name))
                os.rmdir(self.log_dir)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the worker pool is closed")


def shutdown_pool(pool: WorkerPool) -> None:
    """Finalizer-friendly close (module level, so it holds no reference to the measurer)."""
    with contextlib.suppress(Exception):
        pool.close()
