"""What a network's tasks add up to: each task's best schedule as the race builds it.

``python docs/reproduction/model/2026-12-04-task-sums.py DB [DB ...]``: for the first model of
each database (``bench_model.py``'s ``records.db``), every task's fastest repeat of its best
schedule (``best_schedules``; its untuned time where the race keeps the default) times its
weight, summed, and the protocols those trials were timed under. Set beside the race's time of
the whole network, it shows how well the tasks' own timings predict it.
"""

from __future__ import annotations

import sys

from explorer.model import best_schedules, untuned_kept
from explorer.storage import get_store

for db in sys.argv[1:]:
    with get_store(db, read_only=True) as store:
        model = store.models()[0]
        chosen = dict(best_schedules(model, store))
    total = 0.0
    for task in model.tasks:
        trial = chosen.get(task.name)
        kept = trial is None or untuned_kept(task, trial)
        secs = task.untuned_secs if kept or trial is None else trial.result.fastest_secs
        total += (secs or 0.0) * task.weight
    flushes = sorted({t.result.cache_flush.value for t in chosen.values()})
    print(f"{db}: sum of tasks' best x weight {total * 1e3:.3f} ms, protocols {flushes}")
