import resource, sys, tempfile, time
from pathlib import Path
import onnx
from explorer.measure import LocalMeasurer
from explorer.model import NETWORKS, import_model
from explorer.storage import get_store
if __name__ == "__main__":
    d = Path(tempfile.mkdtemp()); p = d / "n.onnx"; onnx.save(NETWORKS[sys.argv[1]](), p)
    t = time.monotonic()
    with get_store(d / "db.db") as store:
        with LocalMeasurer() as m:
            model = import_model(p, store, measurer=m)
    wall = time.monotonic() - t
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{sys.argv[1]} tasks={len(model.tasks)} wall={wall:.1f}s cpu={s.ru_utime+s.ru_stime+c.ru_utime+c.ru_stime:.1f}s", flush=True)
