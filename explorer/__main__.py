"""``python -m explorer`` and the ``explorer`` command (``run``)."""

import os
import sys


def run() -> None:
    """The process's entry: everything the command line imports is imported here, where a
    Ctrl-C pressed while it loads (a busy machine) is caught; ``explorer/__init__.py``, which
    Python imports before this, imports nothing."""
    try:
        from explorer.cli import console
    except KeyboardInterrupt:
        print("interrupted before anything was stored", file=sys.stderr)
        sys.stderr.flush()
        os._exit(130)  # explorer.cli.EXIT_INTERRUPTED, which did not finish loading
    sys.exit(console())


if __name__ == "__main__":
    run()
