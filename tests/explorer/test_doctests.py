"""The docstring examples of every ``explorer`` module run as tests, and every module imports.

An example is documentation that must keep working: each module's ``>>>`` examples run here with
the module's own globals (as ``python -m doctest`` would), with ``ELLIPSIS`` and
``NORMALIZE_WHITESPACE`` on. An example that cannot be made fast is marked ``# doctest: +SKIP``
and says why in its docstring.
"""

from __future__ import annotations

import doctest
import importlib
import io
import json
import pkgutil
import subprocess
import sys

import pytest

import explorer

# Every module of the package; ``python -m explorer`` (``__main__``) runs the command line.
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(explorer.__path__, "explorer.")
    if not info.name.endswith(".__main__")
)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_every_module_imports_on_its_own_and_fast():
    # In a fresh interpreter, each module in turn: an import cycle or a missing optional
    # dependency shows up here even when the suite happened to import things in a kind order.
    # TVM's own import is timed apart (about a second on a quiet machine).
    script = (
        "import importlib, json, sys, time\n"
        "t = time.perf_counter(); import tvm; tvm_secs = time.perf_counter() - t\n"
        "secs = {}\n"
        "for name in sys.argv[1:]:\n"
        "    t = time.perf_counter(); importlib.import_module(name)\n"
        "    secs[name] = time.perf_counter() - t\n"
        "print(json.dumps({'tvm': tvm_secs, 'modules': secs}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, *MODULES],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    times = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(times["modules"]) == set(MODULES)
    slowest = max(times["modules"], key=times["modules"].get)
    # Generous bounds for a busy shared machine: importing the package once TVM is loaded
    # takes about 2 s here; a module that does real work at import time would blow them.
    assert sum(times["modules"].values()) < 30, (slowest, times["modules"][slowest])
    assert times["modules"][slowest] < 15, slowest


def test_the_known_examples_are_collected():
    # The four examples issue 10 found broken, now run (none of them is skipped).
    names = {t.name for name in MODULES for t in _doctests(name)}
    for example in (
        "explorer.tuner.Tuner",
        "explorer.space._knob_space.KnobSpace",
        "explorer.cost_models._value.ValueModel",
        "explorer.search.capabilities",
    ):
        assert example in names, example
    assert len(names) >= 40


def _doctests(name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module, name) if t.examples]


WITH_EXAMPLES = [name for name in MODULES if _doctests(name)]


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples(name):
    tests = _doctests(name)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test, out=out.write)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, out.getvalue()
