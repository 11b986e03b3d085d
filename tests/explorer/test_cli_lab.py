"""``explorer lab``: the packaged notebooks copied once into a folder of the user's, JupyterLab
started there on the tour (127.0.0.1), and the wheel that ships the notebooks.

Real files and real processes: the copies go into temp folders, the permission case runs as
another user (root ignores permissions), the wheel is built by pip from a copy of the sources
and installed into a temp folder, and JupyterLab is started in its own process group and
stopped with it.
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
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import psutil
import pytest

from explorer.cli import EXIT_OK, EXIT_USAGE, main
from explorer.cli import _lab as _cli_lab

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
NAMES = [p.name for p in NOTEBOOKS]
NOBODY = 65534


def _lab(capsys, *args):
    code = main(["lab", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_package_ships_the_repository_notebooks_tour_first():
    shipped = _cli_lab.packaged_notebooks()
    assert [p.name for p in shipped] == NAMES and NAMES[0] == _cli_lab.TOUR
    for ours, repo in zip(shipped, NOTEBOOKS, strict=True):
        assert ours.read_bytes() == repo.read_bytes()


def test_the_first_run_copies_every_notebook(tmp_path, capsys):
    folder = tmp_path / "deep" / "notebooks"  # created, parents included
    code, out, err = _lab(capsys, folder, "--copy-only")
    assert code == EXIT_OK, err
    assert sorted(p.name for p in folder.iterdir()) == NAMES  # no temp file left behind
    for repo in NOTEBOOKS:
        copy = folder / repo.name
        assert copy.read_bytes() == repo.read_bytes()
        assert copy.stat().st_mode & 0o200  # the user can save it (whatever the package's mode)
    assert out.splitlines() == [
        f"notebooks in {folder}:",
        f"  copied {len(NAMES)}: {', '.join(NAMES)}",
    ]


def test_a_second_run_keeps_the_users_notebooks_and_copies_only_missing_ones(tmp_path, capsys):
    folder = tmp_path / "mine"
    assert _lab(capsys, folder, "--copy-only")[0] == EXIT_OK
    tour = folder / NAMES[0]
    edited = json.loads(tour.read_text())
    edited["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "my notes"})
    tour.write_text(json.dumps(edited))
    mine = tour.read_bytes()
    (folder / NAMES[1]).unlink()  # deleted by the user: copied afresh

    code, out, err = _lab(capsys, folder, "--copy-only")
    assert code == EXIT_OK, err
    assert tour.read_bytes() == mine
    assert (folder / NAMES[1]).read_bytes() == NOTEBOOKS[1].read_bytes()
    kept = [n for n in NAMES if n != NAMES[1]]
    assert out.splitlines()[1:] == [
        f"  copied 1: {NAMES[1]}",
        f"  kept {len(kept)} already there (yours, never overwritten): {', '.join(kept)}",
    ]


def test_a_notebook_added_to_the_package_later_is_copied(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "mine"
    assert _lab(capsys, folder, "--copy-only")[0] == EXIT_OK
    newer = tmp_path / "package" / "05_new_topic.ipynb"
    newer.parent.mkdir()
    newer.write_text(NOTEBOOKS[0].read_text())
    shipped = [*_cli_lab.packaged_notebooks(), newer]
    monkeypatch.setattr(_cli_lab, "packaged_notebooks", lambda: shipped)
    code, out, _ = _lab(capsys, folder, "--copy-only")
    assert code == EXIT_OK
    assert out.splitlines()[1] == "  copied 1: 05_new_topic.ipynb"
    assert (folder / newer.name).read_bytes() == newer.read_bytes()


def test_a_file_created_meanwhile_is_not_overwritten(tmp_path):
    dest = tmp_path / NAMES[0]
    dest.write_text("mine")
    result = _cli_lab.copy_notebooks(tmp_path, NOTEBOOKS[:1])
    assert (result.copied, result.kept) == ((), (NAMES[0],))
    assert dest.read_text() == "mine"


@pytest.mark.parametrize(
    "below, message",
    [("", "is a file, not a folder"), ("sub", "a part of that path is a file")],
    ids=["a file", "under a file"],
)
def test_a_folder_that_is_a_file_is_one_sentence_and_exit_2(tmp_path, capsys, below, message):
    (tmp_path / "f").write_text("x")
    folder = tmp_path / "f" / below if below else tmp_path / "f"
    code, out, err = _lab(capsys, folder, "--copy-only")
    assert code == EXIT_USAGE and out == ""
    assert err == f"error: explorer lab {folder}: {message}\n"
    assert (tmp_path / "f").read_text() == "x"


def test_options_that_start_nothing_are_refused_with_copy_only(tmp_path, capsys):
    code, _, err = _lab(capsys, tmp_path, "--copy-only", "--port", "8888")
    assert code == EXIT_USAGE
    assert err == "error: --port does not apply with --copy-only (nothing is started)\n"
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("inside", [False, True], ids=["the folder", "a folder inside it"])
def test_an_unwritable_folder_is_one_sentence_and_exit_2(inside):
    base = Path(tempfile.mkdtemp(prefix="lab-ro-"))
    try:
        os.chmod(base, 0o555)  # others may enter, nobody may write
        folder = base / "sub" if inside else base
        out = subprocess.run(
            [*_other_user(), sys.executable, "-m", "explorer", "lab", str(folder), "--copy-only"],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "HOME": tempfile.gettempdir()},
        )  # fmt: skip
        left = list(base.iterdir())
    finally:
        os.chmod(base, 0o755)
        shutil.rmtree(base)
    assert out.returncode == EXIT_USAGE, out.stderr
    reason = "cannot create it" if inside else "not writable"
    assert out.stderr == f"error: explorer lab {folder}: {reason} (permission denied)\n"
    assert left == []


def test_the_default_folder_is_in_the_home_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, _ = _lab(capsys, "--copy-only")
    assert code == EXIT_OK
    folder = tmp_path / "schedule-explorer-notebooks"
    assert out.startswith(f"notebooks in {folder}:")
    assert sorted(p.name for p in folder.iterdir()) == NAMES


def test_jupyterlab_is_started_on_the_tour_bound_to_localhost():
    argv = _cli_lab.jupyter_command(Path("/w"), "00_tour.ipynb", port=9999, open_browser=False)
    assert argv[:3] == [sys.executable, "-m", "jupyterlab"]
    assert "--ServerApp.ip=127.0.0.1" in argv and "--ServerApp.root_dir=/w" in argv
    assert "--LabApp.default_url=/lab/tree/00_tour.ipynb" in argv
    assert "--ServerApp.port=9999" in argv and "--no-browser" in argv
    assert argv[-1] == "/w/00_tour.ipynb"


# -- the real thing ----------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, token: str) -> tuple[int, bytes, str]:
    """Status, body and final URL of a GET (redirects followed)."""
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.status, r.read(), r.url
    except urllib.error.HTTPError as exc:
        return exc.code, b"", url
    except (urllib.error.URLError, OSError):
        return 0, b"", url


def _group(pgid: int) -> list[psutil.Process]:
    """The live processes of process group ``pgid``."""
    alive = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except (ProcessLookupError, psutil.Error):
            pass  # ended meanwhile
    return alive


def _listening(proc: psutil.Process) -> list[tuple[str, int]]:
    try:
        conns = proc.net_connections(kind="inet")
    except psutil.Error:  # ended meanwhile (a short-lived child)
        return []
    return [tuple(c.laddr) for c in conns if c.status == psutil.CONN_LISTEN]


def test_explorer_lab_starts_jupyterlab_on_the_copied_tour(tmp_path):
    folder = tmp_path / "my notebooks"  # a space: paths are passed, never split
    jupyter = tmp_path / "jupyter"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JUPYTER_PLATFORM_DIRS": "1"}
    for var in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        env[var] = str(jupyter / var.lower())  # nothing read from or written to $HOME
    token, port = secrets.token_hex(16), _free_port()
    env["JUPYTER_TOKEN"] = token
    log = tmp_path / "lab.log"
    url = f"http://127.0.0.1:{port}"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "explorer", "lab", str(folder), "--no-browser",
             "--port", str(port)],
            env=env, cwd=tmp_path, stdout=fh, stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped with its kernels
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while _get(f"{url}/api/status", token)[0] != 200:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        # the server runs in the user's folder, on the copies, and "/" opens the tour
        raw = f"{url}/api/contents/{_cli_lab.TOUR}?content=1&type=file&format=text"
        status, body, _ = _get(raw, token)
        assert status == 200
        assert json.loads(body)["content"] == NOTEBOOKS[0].read_text()
        listing = json.loads(_get(f"{url}/api/contents", token)[1])
        assert sorted(item["name"] for item in listing["content"]) == NAMES
        assert _get(f"{url}/", token)[2].startswith(f"{url}/lab/tree/{_cli_lab.TOUR}")
        # bound to 127.0.0.1 only
        listening = {a for p in _group(proc.pid) for a in _listening(p)}
        assert listening and {ip for ip, _ in listening} == {"127.0.0.1"}, listening
        text = log.read_text()
        assert text.startswith(f"notebooks in {folder}:\n  copied {len(NAMES)}: ")
        assert f"starting JupyterLab on {_cli_lab.TOUR}, at 127.0.0.1" in text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    deadline = time.monotonic() + 10
    while _group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _group(proc.pid) == [], "processes of explorer lab were left running"
    assert not list(ROOT.joinpath("notebooks").glob(".ipynb_checkpoints"))


# -- the wheel ---------------------------------------------------------------------------------
def test_the_wheel_ships_the_notebooks_and_explorer_lab_copies_them_from_it(tmp_path):
    # Built from a copy of the sources, so the build writes nothing into the checkout.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for name in ("explorer", "widgets", "notebooks"):
        shutil.copytree(ROOT / name, src / name, symlinks=True, ignore=skip)
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(dist)],
        cwd=src, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        shipped = {n: z.read(n) for n in z.namelist() if n.startswith("explorer/notebooks/")}
    assert shipped == {f"explorer/notebooks/{p.name}": p.read_bytes() for p in NOTEBOOKS}

    # installed (not editable), `explorer lab` copies them from the installed package
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
         str(wheel)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    folder = tmp_path / "mine"
    env = {**os.environ, "PYTHONPATH": str(site)}
    code = (
        "import explorer, sys; from explorer.cli import main; "
        f"assert explorer.__file__.startswith({str(site)!r}), explorer.__file__; "
        f"sys.exit(main(['lab', {str(folder)!r}, '--copy-only']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert out.returncode == EXIT_OK, out.stderr
    assert sorted(p.name for p in folder.iterdir()) == NAMES


def _other_user() -> list[str]:
    """A command prefix that drops root's permission bypass (none when not root)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = [*prefix, "test", "-r", str(ROOT / "explorer" / "__init__.py")]
    if subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip(f"{ROOT} is not readable by another user: permissions cannot be tested")
    return prefix
