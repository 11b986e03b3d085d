"""What the repository says about itself holds: every Markdown document its code, tests,
benchmarks and docs point to is in the repository (a reader can follow every reference)."""

from __future__ import annotations

import ast
import contextlib
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `docs/tvm-notes.md`, `reproduction.md#a-busy-machine`, `README.md`: a path or a bare name.
MARKDOWN_REF = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")


def tracked_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / name for name in out.splitlines()]


def test_every_markdown_document_cited_is_in_the_repository() -> None:
    files = tracked_files()
    documents = {f.relative_to(ROOT).as_posix() for f in files if f.suffix == ".md"}
    texts = [f for f in files if f.suffix in {".py", ".md", ".toml", ".js", ".yml"}]
    texts += [ROOT / "Makefile"]
    missing = []
    for path in texts:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for ref in MARKDOWN_REF.findall(line):
                # a path relative to the file, the root, or (a link's text) any folder
                if not any(d == ref or d.endswith("/" + ref) for d in documents):
                    missing.append(f"{path.relative_to(ROOT)}:{lineno}: {ref}")
    assert not missing, "documents cited but not in the repository:\n" + "\n".join(missing)


def pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_build_system_can_read_the_license_field() -> None:
    # `license = "Apache-2.0"` (PEP 639) needs setuptools 77; with 70 the build failed.
    from packaging.requirements import Requirement

    config = pyproject()
    (setuptools,) = [
        Requirement(r) for r in config["build-system"]["requires"] if r.startswith("setuptools")
    ]
    if isinstance(config["project"]["license"], str):
        assert not setuptools.specifier.contains("76.99"), setuptools
        assert setuptools.specifier.contains("77.0.0"), setuptools


def test_environment_yml_installs_what_pyproject_declares() -> None:
    import yaml
    from packaging.specifiers import SpecifierSet

    env = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert SpecifierSet(pyproject()["project"]["requires-python"]).contains(python.split("=")[1])
    (pip,) = [d["pip"] for d in env["dependencies"] if isinstance(d, dict)]
    assert pip == ["-e .[lab,dev]"]  # the one list of pins: nothing to drift


def test_the_testing_extra_brings_what_the_contract_kits_import() -> None:
    extras = pyproject()["project"]["optional-dependencies"]
    kits = (ROOT / "explorer" / "testing" / "contracts").glob("*.py")
    imported = {m for p in kits for m in re.findall(r"^import (\w+)", p.read_text(), re.M)}
    declared = {re.split(r"[<>=\[]", r)[0] for r in extras["testing"]}
    assert {"pytest"} <= imported and (imported & {"pytest", "hypothesis"}) <= declared
    assert "schedule-explorer[testing,postgres,nas,model]" in extras["dev"]


def test_every_test_module_has_its_own_basename() -> None:
    # The test folders are not packages, so pytest imports each module by its basename: a
    # second `test_transfer.py` in another folder stops the whole suite at collection.
    tests = [f for f in tracked_files() if f.name.startswith("test_") and f.suffix == ".py"]
    seen: dict[str, list[str]] = {}
    for path in tests:
        seen.setdefault(path.name, []).append(path.relative_to(ROOT).as_posix())
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"test modules sharing a basename: {clashes}"


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80  # docstring included


def test_modules_and_functions_stay_small_enough_to_read() -> None:
    # A newcomer reads a module in one sitting and a function on one screen; both grew back
    # past these bounds between two restructures.
    sources = [
        f
        for f in tracked_files()
        if f.suffix == ".py" and f.relative_to(ROOT).parts[0] in ("explorer", "widgets")
    ]
    assert len(sources) > 100
    too_long: list[str] = []
    for path in sources:
        text = path.read_text()
        name = path.relative_to(ROOT).as_posix()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}: {node.name} has {lines} lines")
    assert not too_long, "split by what they do: " + "; ".join(too_long)


def test_every_shipped_record_database_is_at_the_current_schema() -> None:
    """Reading a record database needs the current schema, so opening an older one, read-only
    too, migrates it in place first: the suite's own read-only opens rewrote the tracked
    recording (a column added since it was made), and a read-only install could not open it.
    Shipped at the current schema, in rollback-journal mode, a read-only open leaves it as it is.
    """
    import hashlib
    import sqlite3

    from explorer.storage import SCHEMA_VERSION, SQLiteStore

    shipped = [p for p in tracked_files() if p.suffix == ".db"]
    assert len(shipped) >= 2, shipped  # the testing recording and the example recording
    for path in shipped:
        uri = f"{path.resolve().as_uri()}?immutable=1"
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'")
            assert int(version.fetchone()[0]) == SCHEMA_VERSION, path
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete", path
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        with SQLiteStore(path, read_only=True) as store:
            assert store.count_trials() > 0
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before, path
        assert not list(path.parent.glob(f"{path.name}-*")), path
