"""A private PostgreSQL server for the tests: Debian's binaries, a temporary data directory, a
free port on 127.0.0.1 and a socket in the data directory; stopped (and removed) at the end.

PostgreSQL refuses to run as root, and CI runs as root: there the server runs as Debian's
``postgres`` user (``runuser -u postgres --``); as any other user it runs as that user.

``python tests/explorer/storage/_pg_server.py`` starts one, prints its URL and stops it on Enter.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SUPERUSER = "postgres"
USER, PASSWORD = "alice", "s3cret"  # a role that logs in with a password (scram-sha-256)


def find_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` holding ``pg_ctl`` (``$PG_BIN_DIR`` first)."""
    candidates = [os.environ.get("PG_BIN_DIR", "")]
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(versions, key=lambda d: int(Path(d).parent.name or 0), reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One running server; ``url(db)`` connects to it, ``create_database()`` makes a new one."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.as_root = os.geteuid() == 0
        if self.as_root:
            try:
                self._owner = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError(
                    "running as root, PostgreSQL needs an unprivileged user to run as, and "
                    "Debian's `postgres` user does not exist (install the postgresql package)"
                ) from None
        # As root, in /tmp: the postgres user must be able to reach the folder ($TMPDIR may lie
        # in a folder only root can enter).
        where = "/tmp" if self.as_root else None
        self.data_dir = Path(tempfile.mkdtemp(prefix="explorer-pg-", dir=where))
        self.port = 0
        self._counter = 0
        self._started = False

    # -- lifetime ------------------------------------------------------------------------------
    def _run(self, *cmd: str, timeout: float = 120) -> str:
        prefix = ["runuser", "-u", "postgres", "--"] if self.as_root else []
        proc = subprocess.run(
            [*prefix, *cmd], capture_output=True, text=True, timeout=timeout, cwd="/"
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr}")
        return proc.stdout

    def start(self) -> PostgresServer:
        if self.as_root:
            os.chown(self.data_dir, self._owner.pw_uid, self._owner.pw_gid)
        pg_data = self.data_dir / "data"
        self._run(
            str(self.bin_dir / "initdb"), "-D", str(pg_data), "-U", SUPERUSER, "-E", "UTF8",
            "--locale=C", "--auth=trust", "--no-sync", "--no-instructions",
        )  # fmt: skip
        # The superuser logs in without a password; every other role needs its password.
        (pg_data / "pg_hba.conf").write_text(
            f"local all {SUPERUSER} trust\n"
            f"host all {SUPERUSER} 127.0.0.1/32 trust\n"
            "local all all scram-sha-256\n"
            "host all all 127.0.0.1/32 scram-sha-256\n"
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -c unix_socket_directories={self.data_dir} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=200"
        )
        for attempt in range(5):  # another process may take the free port before we do
            self.port = free_port()
            try:
                self._run(
                    str(self.bin_dir / "pg_ctl"), "-D", str(pg_data), "-l",
                    str(self.data_dir / "server.log"), "-w", "-t", "60",
                    "-o", f"{options} -p {self.port}", "start",
                )  # fmt: skip
                break
            except RuntimeError:
                if attempt == 4:
                    raise RuntimeError(f"the server did not start: {self.log()}") from None
        self._started = True
        self.admin(f"CREATE ROLE {USER} LOGIN CREATEDB PASSWORD '{PASSWORD}'")
        return self

    def stop(self) -> None:
        if self._started:
            self._started = False
            self._pid = self.pid()
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._run(
                    str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir / "data"),
                    "-m", "fast", "-w", "-t", "60", "stop",
                )  # fmt: skip
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def pid(self) -> int | None:
        """The postmaster's process id while it runs (from its ``postmaster.pid``)."""
        try:
            return int((self.data_dir / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def is_running(self) -> bool:
        """Whether the server (or, once stopped, the process it ran as) is still alive."""
        pid = self.pid() or getattr(self, "_pid", None)
        if pid is None:
            return False
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
        except OSError:
            return False

    def log(self) -> str:
        try:
            return (self.data_dir / "server.log").read_text()[-4000:]
        except OSError:
            return "(no server log)"

    # -- databases -----------------------------------------------------------------------------
    def url(self, db: str = "postgres", *, user: str = SUPERUSER, password: str = "") -> str:
        auth = f"{user}:{password}" if password else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{db}"

    def admin(self, sql: str, db: str = "postgres") -> None:
        """Run ``sql`` as the superuser (outside a transaction: CREATE DATABASE may be one)."""
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as conn:
            conn.execute(sql.encode())

    def create_database(self, owner: str = SUPERUSER) -> str:
        """A new empty database (its name)."""
        self._counter += 1
        name = f"records_{os.getpid()}_{self._counter}_{int(time.time() * 1000) % 100000}"
        self.admin(f"CREATE DATABASE {name} OWNER {owner}")
        return name


if __name__ == "__main__":
    found = find_bin_dir()
    if found is None:
        raise SystemExit("no PostgreSQL binaries under /usr/lib/postgresql/*/bin")
    server = PostgresServer(found).start()
    try:
        print(server.url(server.create_database()))
        input("running; press Enter to stop ")
    finally:
        server.stop()
