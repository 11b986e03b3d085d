"""``python -m explorer`` (and the ``explorer`` command: ``explorer.cli.console``)."""

import os
import sys

try:
    from explorer.cli import console
except KeyboardInterrupt:  # Ctrl-C while the command line itself loads (a busy machine)
    print("interrupted before anything was stored", file=sys.stderr)
    sys.stderr.flush()
    os._exit(130)  # explorer.cli.EXIT_INTERRUPTED, which did not finish loading

sys.exit(console())
