"""Fixtures of the real-browser layer: a real JupyterLab server and headless Debian Chromium.

* ``jupyter_lab`` (session): ``python -m jupyterlab`` on a free 127.0.0.1 port with a random
  token. Its root dir is a temp copy of ``notebooks/``, ``EXPLORER_DB`` points at a temp database,
  and Jupyter/IPython config, data, runtime, workspaces and settings dirs are all temp dirs, so
  nothing in ``$HOME`` is read or written. Stopped with SIGTERM, then SIGKILL of its own process
  group (its kernels included), never anything else.
* ``browser`` (session): Playwright driving ``/usr/bin/chromium`` (``executable_path``; we never
  run ``playwright install``). A missing Chromium FAILS the tests: ``make test`` installs it.
* ``page``: a fresh browser context that records console errors and page errors, and saves a
  full-page screenshot ``FAILED_<test>.png`` when the test fails.

Environment: ``CHROMIUM_PATH`` (default: ``chromium`` on PATH, else /usr/bin/chromium),
``BROWSER_ARTIFACTS`` (screenshots; default ``artifacts/browser/`` at the repo root),
``BROWSER_VIEWPORT`` (default 1400x1000), ``JUPYTER_START_TIMEOUT`` (seconds, default 120).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import NOTEBOOKS, REPO, new_page, safe_name, save_failure_screenshot

SERVER_START_TIMEOUT = float(os.environ.get("JUPYTER_START_TIMEOUT", "120"))
# Playwright already passes --headless --no-sandbox --disable-dev-shm-usage ...; repeated here to
# document intent (root needs --no-sandbox, containers have a 64 MB /dev/shm). No GPU: WebGL
# still works through SwiftShader.
CHROMIUM_ARGS = ["--disable-gpu", "--disable-dev-shm-usage", "--no-sandbox"]


def chromium_path() -> str | None:
    """The Chromium executable to drive, or None when there is none on this machine."""
    candidates = [os.environ.get("CHROMIUM_PATH"), shutil.which("chromium"), "/usr/bin/chromium"]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


# --------------------------------------------------------------------------- process helpers
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _isolated_env(base: Path, db: Path) -> dict[str, str]:
    """The server's (and so its kernels') environment: no state shared with $HOME or other runs."""
    env = dict(os.environ)
    for var, sub in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("IPYTHONDIR", "ipython"),
    ]:
        (base / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(base / sub)
    env["JUPYTER_PLATFORM_DIRS"] = "1"  # silences a jupyter_core deprecation warning
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # silences a debugpy frozen-modules warning
    env["EXPLORER_DB"] = str(db)
    # The kernels import the working tree's `explorer` and `widgets`, even if the venv's editable
    # install is stale (one made before widgets/__init__.py existed maps `widgets` to a namespace
    # package when imported from outside the repo, as kernels in the temp root dir do).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.pop("JUPYTER_TOKEN", None)
    # kernels must run with this interpreter (the project venv)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def _http_ok(url: str, headers: dict[str, str]) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _tail(path: Path, n: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


def _stop(proc: subprocess.Popen[bytes], grace: float = 15) -> None:
    if proc.poll() is None:
        proc.terminate()  # SIGTERM: Jupyter shuts its kernels down cleanly
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    try:  # whatever is left in *our* process group (orphaned kernels, measurement workers)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def _root_flag() -> list[str]:
    return ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []


# --------------------------------------------------------------------------- JupyterLab server
@dataclass
class JupyterServer:
    url: str  # http://127.0.0.1:PORT
    token: str
    root: Path  # served as "/": a temp copy of notebooks/
    db: Path  # EXPLORER_DB of the server and its kernels
    log: Path
    proc: subprocess.Popen[bytes]
    start_s: float

    def api(self, method: str, path: str) -> Any:
        req = urllib.request.Request(
            f"{self.url}{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def lab_url(self, nb_path: str) -> str:
        # ?reset: start from an empty workspace (no restored tabs or layout)
        return f"{self.url}/lab/tree/{nb_path}?reset&token={self.token}"

    def log_tail(self, n: int = 60) -> str:
        return _tail(self.log, n)

    def shutdown_sessions(self, suffix: str) -> None:
        """Shut down the kernel session(s) of notebooks whose path ends with ``suffix``."""
        try:
            for s in self.api("GET", "/api/sessions"):
                if s.get("path", "").endswith(suffix):
                    self.api("DELETE", f"/api/sessions/{s['id']}")
        except Exception as exc:  # noqa: BLE001 - never mask the test result
            print(f"session cleanup for {suffix} failed: {exc}")


@pytest.fixture(scope="session")
def jupyter_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("jlab")
    root = base / "root"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    db = base / "records.db"
    env = _isolated_env(base, db)
    # no "official Jupyter news?" toast (it covers the notebook), no update check (offline CI)
    settings = base / "user-settings"
    notif = settings / "@jupyterlab" / "apputils-extension"
    notif.mkdir(parents=True)
    (notif / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    port, token = free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        *_root_flag(),
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp (commands, kernel status)
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        f"--LabApp.user_settings_dir={settings}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--ServerApp.terminals_enabled=False",
    ]
    url = f"http://127.0.0.1:{port}"
    log = base / "jupyter-lab.log"
    t0 = time.monotonic()
    with open(log, "wb") as fh:
        # own session and process group: teardown kills the server and its kernels, nothing else
        proc = subprocess.Popen(
            cmd, env=env, cwd=root, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    headers = {"Authorization": f"token {token}"}
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while not _http_ok(f"{url}/api/status", headers):
        if proc.poll() is not None:
            pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            _stop(proc)
            pytest.fail(f"jupyter lab not ready after {SERVER_START_TIMEOUT:.0f}s:\n{_tail(log)}")
        time.sleep(0.1)
    server = JupyterServer(url, token, root, db, log, proc, time.monotonic() - t0)
    yield server
    _stop(proc)


@pytest.fixture
def lab_notebook(jupyter_lab: JupyterServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A private copy of the tour notebook (its own kernel session), shut down afterwards."""
    name = f"{safe_name(request.node.name)}.ipynb"
    shutil.copy(NOTEBOOKS / "00_tour.ipynb", jupyter_lab.root / name)
    yield name
    jupyter_lab.shutdown_sessions(name)


# --------------------------------------------------------------------------- browser
@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    exe = chromium_path()
    if exe is None:
        pytest.fail(
            "Chromium is not installed (looked at $CHROMIUM_PATH, `chromium` on PATH and "
            "/usr/bin/chromium). The browser tests need it: run `make test` (it installs it), or "
            "`apt-get install -y --no-install-recommends chromium fonts-liberation`. "
            "Never `playwright install`.",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    ctx, pg, plog = new_page(browser)
    pg.log = plog  # the tests read pg.log.console_errors / pg.log.page_errors
    yield pg
    save_failure_screenshot(pg, request)
    ctx.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)  # lets fixtures see whether the test failed
    return rep
