"""Where a model tune's trials went after a task had reached the machine's peak (read-only).

Per task of the tune: its trials in all, the trials it had when its best first read at least
95 % of the measured fp32 peak (FLOPs of one call / best seconds of one call, the best after
each chunk as the gradient task scheduler reads it), the trials it got after that, and its
best then and at the end. Tasks that never reached 95 % of the peak are left out.
usage: python 2026-12-07-after-the-peak.py records.db TUNE PEAK_GFLOPS
"""

import sys

from explorer.model._tune import task_states
from explorer.storage import get_store

db, tune, peak = sys.argv[1], sys.argv[2], float(sys.argv[3])
with get_store(db, read_only=True) as store:
    (model,) = store.models()
    states = task_states(model, store, tune)
after_peak = 0
for s in sorted(states, key=lambda s: -s.trials):
    cross = next(((t, b) for t, b in s.history if s.task.flops / b / 1e9 >= 0.95 * peak), None)
    if cross is None:
        continue
    after_peak += s.trials - cross[0]
    end = s.history[-1][1]
    print(
        f"{s.task.name:42s} {s.trials:4d} trials, at 95 % of the peak after {cross[0]:4d}:"
        f" {s.trials - cross[0]:4d} more, best {cross[1] * 1e3:.4f} -> {end * 1e3:.4f} ms"
        f" ({s.task.flops / end / 1e9:.0f} GFLOPS)"
    )
total = sum(s.trials for s in states)
print(f"trials after a task reached 95 % of the peak: {after_peak} of {total}")
