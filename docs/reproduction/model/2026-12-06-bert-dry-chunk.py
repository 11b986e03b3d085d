"""One more chunk of 16 trials for one task of a model tune, on a copy of its database.

Run: ``TVM_NUM_THREADS=2 python 2026-12-06-bert-dry-chunk.py TASK SEED`` with a copy of the
2000-trial BERT tune's database at /tmp/dry/records.db (``bench_model.py --networks bert_layer
--trials 2000 --seed 0 --out /tmp/bert_2000``). The chunk carries over the task's earlier runs,
as ``explorer.model.tune_model`` does; it prints their trials and what the new chunk measured.
"""

import sys
import time

from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.search import make_strategy
from explorer.storage import get_store, summarize_run
from explorer.tuner import Tuner

task_name, seed = sys.argv[1], int(sys.argv[2])
with get_store("/tmp/dry/records.db") as st, LocalMeasurer(MeasureConfig()) as m:
    model = st.models()[0]
    task = next(t for t in model.tasks if t.name == task_name)
    earlier = [r for r, t, _ in st.model_runs(model.id) if t == task_name]
    done = [summarize_run(r, st.trial_rows(run_id=r)).num_trials for r in earlier]
    print(task_name, "earlier runs", len(earlier), done)
    t0 = time.time()
    res = Tuner(measurer=m, store=st, batch_size=8).run(
        task.workload,
        model.target,
        make_strategy("evolutionary"),
        max_trials=16,
        seed=seed,
        prior_runs=earlier,
    )
    print(
        "new chunk:",
        res.num_trials,
        "trials",
        res.why_stopped,
        f"{time.time() - t0:.1f}s",
        "best GFLOPS",
        res.best_gflops,
    )
