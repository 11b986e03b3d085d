"""The suite keeps its readings out of the user's files: a peak measured under the suite's own
load (or a fleet device's, measured by a notebook) must not become the user's kept peak."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from explorer.machine import CACHE_ENV, cache_path


def test_the_suite_and_every_process_it_starts_keep_the_peak_in_a_folder_of_its_own():
    user_default = Path.home() / ".cache" / "schedule-explorer" / "peak.json"
    # a notebook kernel, a JupyterLab server or a CLI run inherits this environment
    child = subprocess.run(
        [sys.executable, "-c", "from explorer.machine import cache_path; print(cache_path())"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, XDG_CACHE_HOME=""),
    )
    for path in (cache_path(), Path(child.stdout.strip())):
        assert path != user_default, path
        assert path.is_relative_to(tempfile.gettempdir()), path
        assert path.parent.is_dir(), path
    assert os.environ[CACHE_ENV] == str(cache_path())
