"""Which sketches a model tune measured on each convolution task, and the best of each.

``python docs/reproduction/model/2026-12-04-sketches.py DB [DB ...]``: for the first model of
each database (``bench_model.py``'s ``records.db``), every convolution task's measurements
grouped by the sketch their schedule instantiates (``Candidate.decisions["sketch"]``: 0 to 2
MetaSchedule's, 3 and 4 the packed ones; ``None`` the unscheduled baseline or a trace
MetaSchedule's mutators moved out of every sketch), with how many measurements (re-timings
included) and the best GFLOPS among them.
"""

from __future__ import annotations

import collections
import sys

from explorer.space import DesignSpace
from explorer.storage import get_store
from explorer.types import MeasureStatus


def main(dbs: list[str]) -> None:
    for db in dbs:
        print(f"== {db}")
        with get_store(db, read_only=True) as store:
            model = store.models()[0]
            runs = store.model_runs(model.id)
            for task in model.tasks:
                if not task.name.startswith("fused_conv2d"):
                    continue
                space = DesignSpace.of(task.workload, model.target)
                best: dict[object, float] = collections.defaultdict(float)
                count: collections.Counter = collections.Counter()
                for run_id, name, _ in runs:
                    if name != task.name:
                        continue
                    for t in store.trials(run_id=run_id):
                        if t.status is not MeasureStatus.OK or not t.result.fastest_secs:
                            continue
                        decisions = t.candidate.decisions
                        sketch = decisions.get("sketch") if isinstance(decisions, dict) else "?"
                        count[sketch] += 1
                        best[sketch] = max(best[sketch], task.flops / t.result.fastest_secs / 1e9)
                packed = space.num_sketches - space.num_metaschedule_sketches
                groups = ", ".join(
                    f"{k}: {count[k]} x, best {best[k]:.0f}" for k in sorted(count, key=str)
                )
                print(f"  {task.name:30s} ({space.num_metaschedule_sketches}+{packed}) {groups}")


if __name__ == "__main__":
    main(sys.argv[1:])
