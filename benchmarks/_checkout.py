"""Every benchmark times this checkout's ``explorer``: imported before anything that imports
the package, this puts the checkout's root first on ``sys.path``.

Without it a benchmark run from a clone (a frozen copy of a commit, so that editing the working
tree cannot change a run under way) imported the package the virtual environment was installed
from, in editable mode from another checkout, and its numbers came from that checkout's code, not
the commit its log names. The measuring workers import the same package as their caller
(``explorer.core._forkserver``).
"""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if sys.path[:1] != [ROOT]:
    sys.path.insert(0, ROOT)
