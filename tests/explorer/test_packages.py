"""Another package named ``widgets`` or ``explorer`` first on the import path is named in one
sentence, before anything confusing happens (real interpreters, real folders)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from explorer._packages import foreign_widgets, shadowed_in
from explorer.cli._args import EXIT_ENVIRONMENT


def python(code: str, folder: Path) -> subprocess.CompletedProcess:
    """``python -c code`` started in ``folder``, which Python puts first on the import path (as
    a notebook's kernel does with the notebook's folder)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-c", code]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=folder, timeout=120)


def fake_package(folder: Path, name: str) -> Path:
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text("")
    return folder / name


def test_our_packages_are_found() -> None:
    assert foreign_widgets() is None


def test_a_foreign_widgets_package_is_named(tmp_path: Path) -> None:
    fake = fake_package(tmp_path, "widgets")
    out = python(
        "from explorer._packages import foreign_widgets; print(foreign_widgets())", tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert f"`import widgets` would load {fake}, not Schedule Explorer's widgets" in out.stdout


def test_a_foreign_explorer_package_is_named_when_the_widgets_load(tmp_path: Path) -> None:
    fake = fake_package(tmp_path, "explorer")
    out = python("import widgets", tmp_path)
    assert out.returncode == 1
    assert f"ImportError: `import explorer` loaded {fake}, not Schedule Explorer's" in out.stderr


def test_lab_refuses_a_folder_whose_kernels_would_import_another_widgets(tmp_path: Path) -> None:
    fake = fake_package(tmp_path, "widgets")
    assert shadowed_in(tmp_path) is not None and shadowed_in(tmp_path / "nothing") is None
    cmd = [sys.executable, "-m", "explorer", "lab", "--copy-only", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == EXIT_ENVIRONMENT
    assert f"error: {fake} would shadow Schedule Explorer's `widgets` package" in out.stderr
    assert list(tmp_path.iterdir()) == [fake]  # nothing copied
