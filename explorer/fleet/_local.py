"""A fleet on this machine: a TVM RPC tracker and device servers, each in its own process group.

``start_fleet`` starts the tracker (``python -m tvm.exec.rpc_tracker``) when none is running
and adds device servers (``explorer.fleet._server``); ``stop_fleet`` stops them all with their
process groups (a server forks one process per session and TVM's tracker runs in a child
process: killing the pids alone left those behind). What is running is kept in a small JSON
state file, so that ``explorer fleet down`` in another shell finds it; each process is
recorded with its start time, so a pid reused by an unrelated process is never signalled, and
as soon as it starts, so that nothing ``start_fleet`` started can outlive ``stop_fleet`` (not
even when ``start_fleet`` itself is killed half-way). A tracker that died while its servers
run is started again on its own port, where the servers look for it; the fleet is never
forgotten and replaced by another.

TVM RPC has no authentication: anyone who reaches a server can run code on it. Everything
binds to 127.0.0.1 unless told otherwise, and another address is refused unless the caller
says it knows (``allow_remote``); for devices elsewhere, the usual pattern is an SSH tunnel to
the tracker (README).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import psutil

import explorer
from explorer._process import ProcessIdentity, remove_stale_temp_dirs
from explorer.core import TrackerAddress, tracker_summary, wait_for_devices
from explorer.errors import FleetError
from explorer.target import KNOWN_MCPUS, available_cores

DEFAULT_PORT = 9190
STATE_ENV = "EXPLORER_FLEET_STATE"
START_TIMEOUT_SECS = 120.0  # a server imports TVM before it listens: seconds on a busy machine


@dataclass(frozen=True)
class ServerSpec:
    """One device server to start.

    Attributes:
        key: the device key it registers under; servers of one key are interchangeable.
        threads: TVM threads for its kernels (0: every core it may use).
        cores: CPU ids it is pinned to (empty: not pinned).
        mcpu: the LLVM CPU name kernels for it are compiled for (empty: this machine's), e.g.
            ``x86-64-v3`` to measure what AVX2-only code does here.
    """

    key: str = "local"
    threads: int = 0
    cores: tuple[int, ...] = ()
    mcpu: str = ""

    def __post_init__(self) -> None:
        if not self.key or any(c.isspace() for c in self.key) or ":" in self.key:
            raise ValueError(f"a device key is one word without ':' (got {self.key!r})")
        if self.threads < 0:
            raise ValueError(f"threads must be 0 (every core) or more (got {self.threads})")
        bad = [c for c in self.cores if c not in os.sched_getaffinity(0)]
        if bad:
            raise ValueError(
                f"cores {bad} are not CPUs this process may use "
                f"({sorted(os.sched_getaffinity(0))})"
            )
        if self.mcpu and self.mcpu not in KNOWN_MCPUS:
            raise ValueError(
                f"mcpu {self.mcpu!r} is not a CPU name LLVM accepts here; use one of: "
                f"{', '.join(KNOWN_MCPUS)}"
            )


@dataclass(frozen=True)
class FleetProcess:
    """A process the fleet started: the tracker or a server."""

    role: str  # "tracker" or "server"
    identity: ProcessIdentity
    port: int
    log_path: str
    spec: ServerSpec | None = None

    def is_alive(self) -> bool:
        return bool(self.identity.is_alive())

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["spec"] = None if self.spec is None else asdict(self.spec)
        return data

    @staticmethod
    def from_json(data: dict[str, object]) -> FleetProcess:
        spec = data.get("spec")
        identity = data["identity"]
        assert isinstance(identity, dict)
        return FleetProcess(
            role=str(data["role"]),
            identity=ProcessIdentity(**identity),
            port=int(str(data["port"])),
            log_path=str(data["log_path"]),
            spec=None
            if not isinstance(spec, dict)
            else ServerSpec(**{**spec, "cores": tuple(spec.get("cores") or ())}),
        )


@dataclass(frozen=True)
class LocalFleet:
    """The tracker and servers running on this machine, as the state file records them."""

    host: str
    tracker: TrackerAddress
    processes: tuple[FleetProcess, ...] = field(default_factory=tuple)

    @property
    def servers(self) -> tuple[FleetProcess, ...]:
        return tuple(p for p in self.processes if p.role == "server")

    @property
    def has_tracker(self) -> bool:
        """Whether the fleet's tracker runs (its servers may outlive it: ``read_fleet``)."""
        return any(p.role == "tracker" for p in self.processes)

    def to_json(self) -> dict[str, object]:
        return {
            "host": self.host,
            "tracker": str(self.tracker),
            "processes": [p.to_json() for p in self.processes],
        }

    @staticmethod
    def from_json(data: dict[str, object]) -> LocalFleet:
        processes = data.get("processes") or []
        assert isinstance(processes, list)
        return LocalFleet(
            host=str(data["host"]),
            tracker=TrackerAddress.parse(str(data["tracker"])),
            processes=tuple(FleetProcess.from_json(p) for p in processes),
        )


def state_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Where the fleet's state lives: ``path``, ``$EXPLORER_FLEET_STATE`` or the user cache."""
    if path is not None:
        return Path(path)
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    return Path.home() / ".cache" / "explorer" / "fleet.json"


def read_fleet(path: str | os.PathLike[str] | None = None) -> LocalFleet | None:
    """The fleet recorded at ``path`` (``state_path``), its dead processes left out; ``None``
    when none is recorded or none of its processes runs.

    A fleet whose tracker died while its servers run is returned too (``has_tracker`` is
    false): those servers are still this machine's fleet, which ``start_fleet`` mends and
    ``stop_fleet`` stops.
    """
    fleet = _recorded(state_path(path))
    if fleet is None:
        return None
    alive = tuple(p for p in fleet.processes if p.is_alive())
    return replace(fleet, processes=alive) if alive else None


def _recorded(file: Path) -> LocalFleet | None:
    try:
        return LocalFleet.from_json(json.loads(file.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, AssertionError) as exc:
        raise FleetError(f"{file} is not a fleet state file ({exc}); delete it") from None


def _record(file: Path, fleet: LocalFleet) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps(fleet.to_json(), indent=1))
    os.replace(tmp, file)


@contextlib.contextmanager
def _locked(file: Path) -> Iterator[None]:
    """One ``start_fleet``/``stop_fleet`` at a time on a state file (two shells, or a notebook
    and a shell): each reads the state, starts or stops processes, and writes it back."""
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file.with_name(file.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def start_fleet(
    servers: list[ServerSpec],
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    allow_remote: bool = False,
    state: str | os.PathLike[str] | None = None,
    timeout: float = START_TIMEOUT_SECS,
) -> LocalFleet:
    """Start a tracker (unless the recorded one still runs) and ``servers``, wait until every
    server has registered, and record them all in the state file.

    ``port`` is the tracker's: exactly that one (a port in TIME_WAIT is free, as for any
    server), or, when ``None``, the first free one from ``DEFAULT_PORT`` on. A recorded fleet
    whose tracker died while its servers run gets its tracker back on its own port, where those
    servers look for it, and they register again.

    Raises:
        ValueError: ``host`` is not a loopback address and ``allow_remote`` is not set, or a
            fleet already runs here on another ``port`` or ``host``.
        FleetError: a process did not start or register within ``timeout`` seconds (what was
            started is stopped again), or the port is taken.
    """
    _check_host(host, allow_remote)
    file = state_path(state)
    with _locked(file):
        fleet = read_fleet(file)
        if fleet is None:
            fleet = LocalFleet(host, TrackerAddress(host, _tracker_port(host, port)))
        else:
            _check_same_place(fleet, host, port)
            if not fleet.has_tracker:  # its servers look for it there: nowhere else will do
                _check_port_free_for(fleet)
        started: list[FleetProcess] = []

        def record() -> None:  # each process as soon as it runs (module docs)
            _record(file, replace(fleet, processes=(*fleet.processes, *started)))

        try:
            if not fleet.has_tracker:
                started.append(_start_tracker(fleet.host, fleet.tracker.port, file.parent))
                record()
                _wait_for_tracker(fleet.tracker, started[-1], timeout)
            for spec in servers:
                proc, process = _spawn_server(fleet, spec, file.parent)
                started.append(process)
                record()
                started[-1] = _server_port(proc, process, file.parent, timeout)
            counts: dict[str, int] = {}
            for p in (*fleet.servers, *(p for p in started if p.role == "server")):
                assert p.spec is not None
                counts[p.spec.key] = counts.get(p.spec.key, 0) + 1
            for key, count in counts.items():
                wait_for_devices(fleet.tracker, key, count, timeout=timeout)
        except BaseException:
            _stop(started)
            started.clear()
            if fleet.processes:
                record()
            else:
                file.unlink(missing_ok=True)
            raise
        record()
    return replace(fleet, processes=(*fleet.processes, *started))


def stop_fleet(state: str | os.PathLike[str] | None = None) -> int:
    """Stop every process of the recorded fleet with its process group; how many were
    running. The state file is removed."""
    file = state_path(state)
    if not file.exists():  # nothing recorded: nothing to lock either
        return 0
    with _locked(file):
        fleet = _recorded(file)
        if fleet is None:
            return 0
        alive = [p for p in fleet.processes if p.is_alive()]
        _stop(alive)
        remove_stale_temp_dirs(WORK_PREFIX)  # the stopped servers' sessions' kernels
        file.unlink(missing_ok=True)
    return len(alive)


def _check_same_place(fleet: LocalFleet, host: str, port: int | None) -> None:
    """Servers join the fleet that runs here; a tracker elsewhere would be a second fleet,
    which ``stop_fleet`` could not tell from the first."""
    wanted = TrackerAddress(host, fleet.tracker.port if port is None else port)
    if wanted != fleet.tracker:
        raise ValueError(
            f"a fleet already runs here with its tracker at {fleet.tracker}; new servers join "
            f"it (leave --port/--host out), or stop it first (`explorer fleet down`) to start "
            f"one at {wanted}"
        )


# -- processes ----------------------------------------------------------------------------------
WORK_PREFIX = "explorer-device-"  # a server's temp folder (``_server``)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(explorer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _spawn(argv: list[str], log_path: Path, *, reply: bool) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session; with ``reply``, its stdout is a pipe to read its first
    line from (a server's port), else it goes to the log with its stderr."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if reply else log,
            stderr=log,
            env=_env(),
            start_new_session=True,  # its own process group: stopped with everything it forks
            close_fds=True,
        )


def _identity(proc: subprocess.Popen[bytes]) -> ProcessIdentity:
    return ProcessIdentity.of(proc.pid)


def _start_tracker(host: str, port: int, state_dir: Path) -> FleetProcess:
    log = state_dir / f"tracker-{port}.log"
    argv = [sys.executable, "-m", "tvm.exec.rpc_tracker", "--host", host, "--port", str(port)]
    proc = _spawn([*argv, "--port-end", str(port + 1), "--silent"], log, reply=False)
    return FleetProcess("tracker", _identity(proc), port, str(log))


def _spawn_server(
    fleet: LocalFleet, spec: ServerSpec, state_dir: Path
) -> tuple[subprocess.Popen[bytes], FleetProcess]:
    """A device server started, its port not known yet (``_server_port`` reads it)."""
    argv = [
        sys.executable,
        "-m",
        "explorer.fleet._server",
        "--tracker",
        str(fleet.tracker),
        "--key",
        spec.key,
        "--host",
        fleet.host,
        "--port",
        str(fleet.tracker.port + 100),
        "--port-end",
        str(fleet.tracker.port + 1000),
        "--threads",
        str(spec.threads),
    ]
    if spec.cores:
        argv += ["--cores", ",".join(map(str, spec.cores))]
    if spec.mcpu:
        argv += ["--mcpu", spec.mcpu]
    log = state_dir / f"server-{spec.key}-{time.time_ns()}.log"
    proc = _spawn(argv, log, reply=True)
    return proc, FleetProcess("server", _identity(proc), 0, str(log), spec)


def _server_port(
    proc: subprocess.Popen[bytes], process: FleetProcess, state_dir: Path, timeout: float
) -> FleetProcess:
    """``process`` with the port it listens on, which it prints once it does."""
    spec, log = process.spec, Path(process.log_path)
    assert spec is not None
    try:
        line = _first_line(proc, timeout)
        port = int(json.loads(line)["port"])
    except (ValueError, KeyError, TypeError) as exc:
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        raise FleetError(
            f"a device server with key {spec.key!r} did not start ({exc}):\n{tail}"
        ) from None
    log = log.rename(state_dir / f"server-{spec.key}-{port}.log")
    return replace(process, port=port, log_path=str(log))


def _first_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise ValueError(f"no answer within {timeout:g} s")
    line = proc.stdout.readline().decode(errors="replace").strip()
    if not line:
        raise ValueError(f"it exited with status {proc.wait(5)}")
    return line


def _wait_for_tracker(address: TrackerAddress, tracker: FleetProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            tracker_summary(address, timeout=2.0)
            return
        except FleetError:
            if not tracker.is_alive():
                tail = Path(tracker.log_path).read_text(errors="replace")[-1500:]
                raise FleetError(f"the tracker did not start on {address}:\n{tail}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _stop(processes: list[FleetProcess], grace: float = 5.0) -> None:
    """SIGTERM each process group, then SIGKILL what is left after ``grace`` seconds."""
    groups = []
    for p in processes:
        if p.is_alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                groups.append(os.getpgid(p.identity.pid))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
            time.sleep(0.05)
        groups = [g for g in groups if _group_alive(g)]
        if not groups:
            break
    for p in processes:  # reap our own children, so none is left a zombie
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(p.identity.pid, os.WNOHANG)


def _group_alive(pgid: int) -> bool:
    for proc in psutil.process_iter(["pid", "status"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return True
    return False


def _tracker_port(host: str, port: int | None) -> int:
    """``port`` if it is free, or the first free port from ``DEFAULT_PORT`` on."""
    if port is not None:
        if not _can_bind(host, port):
            raise FleetError(
                f"port {port} on {host} is in use by another program: choose another --port, or "
                f"leave it out (the first free port from {DEFAULT_PORT} on is taken)"
            )
        return port
    for candidate in range(DEFAULT_PORT, DEFAULT_PORT + 100):
        if _can_bind(host, candidate):
            return candidate
    raise FleetError(f"no free port in {DEFAULT_PORT}-{DEFAULT_PORT + 99} on {host}")


def _check_port_free_for(fleet: LocalFleet) -> None:
    if not _can_bind(fleet.host, fleet.tracker.port):
        raise FleetError(
            f"the fleet's tracker stopped and its port {fleet.tracker.port} is now used by "
            f"another program; its {len(fleet.servers)} device server(s) still run and look "
            "for the tracker there: `explorer fleet down` stops them"
        )


def _can_bind(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As TVM's tracker binds: a port whose last connection is in TIME_WAIT is free (it
        # stays so for a minute after a tracker stops; without this, "--port N" took N + 1).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _check_host(host: str, allow_remote: bool) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and not allow_remote:
        raise ValueError(
            f"binding the fleet to {host} lets anyone who reaches it run code on this machine "
            "(TVM RPC has no authentication); bind to 127.0.0.1 and use an SSH tunnel, or pass "
            "--allow-remote if this network is trusted"
        )


def default_servers(count: int, *, key: str = "local", threads: int = 0) -> list[ServerSpec]:
    """``count`` servers of one key; with ``threads`` below the core count, each is pinned to
    its own cores (round robin), so that they do not time kernels on the same core."""
    if count < 1:
        raise ValueError(f"--servers must be at least 1 (got {count})")
    cpus = sorted(os.sched_getaffinity(0))
    specs = []
    for n in range(count):
        cores: tuple[int, ...] = ()
        if 0 < threads < available_cores():
            cores = tuple(cpus[(n * threads + t) % len(cpus)] for t in range(threads))
        specs.append(ServerSpec(key=key, threads=threads, cores=cores))
    return specs
