"""``explorer`` as a terminal starts it, for the tests that press Ctrl-C.

A test suite run as a background job of a non-interactive shell starts with SIGINT ignored;
every child inherits that, and a Python process that inherits an ignored SIGINT keeps ignoring
it (as it should: ``nohup``), so a Ctrl-C'd command would never end. ``EXPLORER`` puts Ctrl-C's
default action back first. The disposition survives exec; a ``preexec_fn`` would fork a
process that may hold JAX's threads.
"""

from __future__ import annotations

import sys

EXPLORER = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, '-m', 'explorer', *sys.argv[1:]])",
]
"""The argv prefix: append the command's arguments."""
