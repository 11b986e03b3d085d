"""A benchmark times the code of the checkout it is run from (``benchmarks/_checkout.py``).

Run from a clone (a frozen copy of a commit), ``bench_model.py`` imported the ``explorer`` the
virtual environment was installed from, in editable mode from the main checkout: a run labelled
with the clone's commit timed the main checkout's working tree, edits made during the run
included (2026-12-06: an A/B of two commits ran the newer code in both arms)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import explorer

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
LOCAL = {p.stem for p in BENCHMARKS.glob("*.py")}


def _first_import_line(tree: ast.Module, names: set[str]) -> int | None:
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in names for a in node.names):
            return node.lineno
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in names:
            return node.lineno
    return None


def test_every_benchmark_imports_its_checkout_before_the_package() -> None:
    late = []
    for path in sorted(BENCHMARKS.glob("*.py")):
        if path.name == "_checkout.py":
            continue
        tree = ast.parse(path.read_text())
        first_use = _first_import_line(tree, {"explorer", "widgets"} | (LOCAL - {"_checkout"}))
        if first_use is None:
            continue
        checkout = _first_import_line(tree, {"_checkout"})
        if checkout is None or checkout > first_use:
            late.append(path.name)
    assert not late, f"import _checkout first in {late}"


def test_a_clone_s_benchmark_imports_the_clone_s_package_not_the_installed_one(tmp_path) -> None:
    # A checkout of its own: its package says where it is, and the interpreter is this one,
    # whose environment has the project installed (editable) from elsewhere.
    (tmp_path / "explorer").mkdir()
    (tmp_path / "explorer" / "__init__.py").write_text("")
    (tmp_path / "benchmarks").mkdir()
    shutil.copy(BENCHMARKS / "_checkout.py", tmp_path / "benchmarks")
    script = "import {}\nimport explorer\nprint(explorer.__file__)\n"
    installed = Path(explorer.__file__).resolve().parent.parent  # what the tests import
    for first, expected in (("_checkout", tmp_path), ("os", installed)):
        (tmp_path / "benchmarks" / "which.py").write_text(script.format(first))
        out = subprocess.run(
            [sys.executable, str(tmp_path / "benchmarks" / "which.py")],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
        ).stdout.strip()
        assert Path(out).parent.parent == expected, (first, out)
