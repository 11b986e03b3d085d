"""``explorer`` / ``python -m explorer``: the command line.

Exit codes: 0 success; 1 the work ran but failed (a measurement that did not succeed, a run with
no successful trial); 2 bad usage or bad input (unknown workload, bad shape, unreadable file,
conflicting options: nothing is stored); 3 a problem of the environment, not of the command (the
database is locked or read-only, the disk is full, permission denied): the same command may work
once it is fixed; 130 interrupted by Ctrl-C and 143 by SIGTERM (stored trials are kept, the run
is ``interrupted``; ``explorer tune --resume RUN`` continues it). Every error is one
``error: ...`` line on stderr, never a traceback (set ``EXPLORER_DEBUG=1`` to see one). A closed
output pipe (``explorer runs | head -1``) ends quietly.
"""

from __future__ import annotations

from explorer.cli._args import (
    EXIT_CODES,
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
)
from explorer.cli._main import console, main

# The exit codes are part of the command's interface (scripts and tests read them here).
__all__ = [
    "EXIT_CODES",
    "EXIT_ENVIRONMENT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "console",
    "main",
]
