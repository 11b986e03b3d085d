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
