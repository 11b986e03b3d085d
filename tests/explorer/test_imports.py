"""Every ``explorer`` module imports on its own (the docstring examples run through
`make test`'s ``pytest --doctest-modules explorer widgets``)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import explorer

# Every module of the package; ``python -m explorer`` (``__main__``) runs the command line.
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(explorer.__path__, "explorer.")
    if not info.name.endswith(".__main__")
)


def test_every_module_imports_on_its_own_without_work_at_import():
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
