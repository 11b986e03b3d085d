"""Import a shipped network into a fresh database and print how long it took (the A/B of
2026-12-07: run with each tree first on PYTHONPATH, interleaved).

    TVM_NUM_THREADS=2 python 2026-12-07-zen3-import-own-reference.py resnet18
"""

import resource
import sys
import tempfile
import time
from pathlib import Path

import onnx

from explorer.measure import LocalMeasurer
from explorer.model import NETWORKS, import_model
from explorer.storage import get_store

if __name__ == "__main__":
    folder = Path(tempfile.mkdtemp())
    path = folder / "n.onnx"
    onnx.save(NETWORKS[sys.argv[1]](), path)
    start = time.monotonic()
    with get_store(folder / "db.db") as store, LocalMeasurer() as measurer:
        model = import_model(path, store, measurer=measurer)
    wall = time.monotonic() - start
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime
    print(f"{sys.argv[1]} tasks={len(model.tasks)} wall={wall:.1f}s cpu={cpu:.1f}s", flush=True)
