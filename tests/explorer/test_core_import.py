"""The core library must import and work with no notebook package installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

UI_PACKAGES = ("ipywidgets", "plotly", "jupyterlab", "anywidget", "IPython", "traitlets")


def test_explorer_imports_and_builds_a_workload_with_ui_packages_absent():
    # A meta-path finder that refuses the UI packages makes them as absent as an uninstalled one.
    script = textwrap.dedent(
        f"""
        import sys
        BLOCKED = {UI_PACKAGES!r}
        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"No module named {{name!r}}")
        sys.meta_path.insert(0, Absent())
        import explorer, explorer.session, explorer.measure, explorer.storage
        import explorer.search, explorer.space, explorer.tuner, explorer.cli, explorer.report
        w = explorer.get_workload("matmul", M=8, N=8, K=8)
        assert w.mod() is not None
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_the_command_line_s_help_does_not_load_tvm():
    """``explorer --help`` and each command's ``--help`` answer without importing TVM (two
    seconds of a two-second answer when the argument parser imported the workload catalog)."""
    script = textwrap.dedent(
        """
        import contextlib, io, sys
        from explorer.__main__ import run
        for argv in (["--help"], ["tune", "--help"], ["model", "tune", "--help"],
                     ["nas", "--help"], ["fleet", "--help"], ["measure", "--help"]):
            sys.argv = ["explorer", *argv]
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    run()
                except SystemExit as e:
                    assert e.code == 0, (argv, e.code)
            assert "usage: explorer" in out.getvalue(), argv
            assert "tvm" not in sys.modules, argv
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
