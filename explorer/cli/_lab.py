"""``explorer lab [DIR]``: the notebooks in a folder of your own, opened in JupyterLab.

The notebooks ship inside the package (``explorer/notebooks/``: in a checkout a symlink to the
repository's ``notebooks/``, their one source; in a wheel, copies). JupyterLab autosaves the
notebooks it opens, outputs included, so it is never pointed at those: ``lab`` copies each one
into ``DIR`` (default ``~/schedule-explorer-notebooks``) unless a file of that name is already
there (yours, edited or not: never overwritten), then starts JupyterLab in ``DIR`` on the tour,
bound to 127.0.0.1. A notebook added to the package later is copied on the next run.
``make lab`` runs this command, so the tour never dirties the repository.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib.util
import os
import sys
import tempfile
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from explorer._packages import foreign_widgets, shadowed_in
from explorer.cli._args import EXIT_ENVIRONMENT, EXIT_OK, UsageError, file_name, port_number

DEFAULT_FOLDER_NAME = "schedule-explorer-notebooks"
TOUR = "00_tour.ipynb"
"""The notebook JupyterLab opens first (the tour)."""


def default_folder() -> Path:
    """Where ``explorer lab`` puts the notebooks when no folder is given."""
    return Path.home() / DEFAULT_FOLDER_NAME


def packaged_notebooks() -> list[Path]:
    """The notebooks shipped with the package, in order (the tour first)."""
    folder = Path(str(resources.files("explorer") / "notebooks"))
    return sorted(folder.glob("*.ipynb"))


@dataclass(frozen=True)
class CopyResult:
    """What ``copy_notebooks`` did: file names copied, and those kept (already there)."""

    folder: Path
    copied: tuple[str, ...]
    kept: tuple[str, ...]


def copy_notebooks(folder: str | Path, notebooks: Sequence[Path] | None = None) -> CopyResult:
    """Copy each notebook into ``folder`` (created if missing) unless a file of that name is
    already there: a notebook you have is never overwritten, even one edited meanwhile.

    Args:
        folder: Where the notebooks go.
        notebooks: What to copy (default: ``packaged_notebooks()``).

    Raises:
        UsageError: ``folder`` is a file, cannot be created, or cannot be written.
    """
    folder = Path(folder).expanduser()
    sources = packaged_notebooks() if notebooks is None else list(notebooks)
    _make_folder(folder)
    copied, kept = [], []
    for source in sources:
        if _copy_once(source, folder / source.name):
            copied.append(source.name)
        else:
            kept.append(source.name)
    return CopyResult(folder, tuple(copied), tuple(kept))


def _make_folder(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"explorer lab {folder}: is a file, not a folder")
    # Errors are raised outside the `except`: a bad folder is the command's input (exit 2),
    # and the OSError as its context would make it read as the environment's (exit 3).
    problem = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a parent is a file
        problem = "a part of that path is a file"
    except OSError as exc:
        problem = f"cannot create it ({_reason(exc)})"
    if problem:
        raise UsageError(f"explorer lab {folder}: {problem}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"explorer lab {folder}: not writable (permission denied)")


def _copy_once(source: Path, dest: Path) -> bool:
    """Copy ``source`` to ``dest`` unless ``dest`` exists; True when copied.

    The bytes go to a temporary file first, linked into place only if ``dest`` is still absent:
    an interrupted copy leaves no half notebook (which would be "kept" forever), and a file
    created meanwhile is not overwritten. The copy gets the user's default permissions, not the
    (possibly read-only) installed file's.
    """
    if dest.exists() or dest.is_symlink():
        return False
    data = source.read_bytes()
    tmp: str | None = None
    problem = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        return _link_once(tmp, dest)
    except OSError as exc:
        problem = f"cannot write {dest.name} ({_reason(exc)})"
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    raise UsageError(f"explorer lab {dest.parent}: {problem}")  # outside `except`: exit 2


def _link_once(tmp: str, dest: Path) -> bool:
    try:
        os.link(tmp, dest)  # fails if dest exists: never overwrites
    except FileExistsError:
        return False
    except OSError as exc:  # no hard links on this file system: check, then rename
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
            raise
        if dest.exists():
            return False
        os.replace(tmp, dest)
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _reason(exc: OSError) -> str:
    return (exc.strerror or str(exc)).lower()


def jupyter_command(
    folder: Path, notebook: str, *, port: int | None = None, open_browser: bool = True
) -> list[str]:
    """The command line that starts JupyterLab in ``folder`` on ``notebook``, on 127.0.0.1."""
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={folder}",
        # the address it prints (and "/") opens the notebook, not only the browser it starts
        f"--LabApp.default_url=/lab/tree/{urllib.parse.quote(notebook)}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers and CI machines run as root
        argv.append("--allow-root")
    if port is not None:
        argv += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0"]
    if not open_browser:
        argv.append("--no-browser")
    argv.append(str(folder / notebook))
    return argv


def _describe(result: CopyResult) -> str:
    lines = [f"notebooks in {result.folder}:"]
    if result.copied:
        lines.append(f"  copied {len(result.copied)}: {', '.join(result.copied)}")
    if result.kept:
        lines.append(
            f"  kept {len(result.kept)} already there (yours, never overwritten): "
            f"{', '.join(result.kept)}"
        )
    if not result.copied and not result.kept:
        lines.append("  none: this installation ships no notebooks")
    return "\n".join(lines)


def cmd_lab(args: argparse.Namespace) -> int:
    if args.copy_only:
        started = {"--port": args.port is not None, "--no-browser": args.no_browser}
        for option in (o for o, given in started.items() if given):
            raise UsageError(f"{option} does not apply with --copy-only (nothing is started)")
    folder = Path(args.folder).expanduser() if args.folder else default_folder()
    if not args.copy_only and importlib.util.find_spec("jupyterlab") is None:
        print(
            "error: JupyterLab is not installed: pip install 'schedule-explorer[lab]' "
            "(or use --copy-only and open the notebooks with your own Jupyter)",
            file=sys.stderr,
        )
        return EXIT_ENVIRONMENT
    shadow = foreign_widgets() or shadowed_in(folder)
    if shadow is not None:
        print(f"error: {shadow}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    result = copy_notebooks(folder)
    print(_describe(result), flush=True)
    if args.copy_only:
        return EXIT_OK
    names = sorted(result.copied + result.kept)
    first = TOUR if TOUR in names else (names[0] if names else None)
    if first is None:
        raise UsageError("there is no notebook to open: this installation ships none")
    argv = jupyter_command(
        folder.resolve(), first, port=args.port, open_browser=not args.no_browser
    )
    print(f"starting JupyterLab on {first}, at 127.0.0.1", flush=True)
    sys.stderr.flush()
    os.chdir(folder)
    os.execv(argv[0], argv)  # JupyterLab takes over this process (and its Ctrl-C); no return


def add_lab_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lab",
        help="copy the notebooks into a folder of yours and open JupyterLab on the tour",
        description=(
            "Copy the notebooks into DIR (once: a notebook already there is never overwritten) "
            "and start JupyterLab there on the tour, bound to 127.0.0.1."
        ),
    )
    p.add_argument(
        "folder",
        nargs="?",
        type=file_name,
        metavar="DIR",
        help=f"your notebook folder (default: ~/{DEFAULT_FOLDER_NAME})",
    )
    p.add_argument("--copy-only", action="store_true", help="copy, but do not start JupyterLab")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--port", type=port_number, default=None, help="JupyterLab's port")
    p.set_defaults(func=cmd_lab)
