"""Per row of a bench_transfer.py copy (one held-out workload's database): how many of its
trials fell in the packed sketches, and the best search-time GFLOPS found in the packed and in
MetaSchedule's own sketches. A trace outside the knob space (mutated by MetaSchedule) counts as
not packed.

    python docs/reproduction/transfer/sketch_share.py batch_matmul_8x128 \
        /tmp/tr/transfer_batch_matmul_8x128.db
"""

import collections
import json
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from explorer.space import DesignSpace
from explorer.target import Target
from explorer.workloads import get_workload

name, db = sys.argv[1], sys.argv[2]
w = get_workload(name)
space = DesignSpace.of(w, Target.local_cpu())
first_packed = space.num_metaschedule_sketches
print(f"{name}: {space.num_sketches} sketches, packed from {first_packed}")
c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
wk = w.key()
runs = c.execute(
    "select id, strategy, settings_json from runs where workload_key=?", (wk,)
).fetchall()
rows = collections.defaultdict(lambda: [0, 0])  # label -> [packed, all]
best = collections.defaultdict(float)  # packed? -> best gflops
for rid, strat, settings in runs:
    s = json.loads(settings)
    label = strat + ("+T" if s.get("transfer_from") else "") + f"@{s.get('max_trials')}"
    for dec, gf in c.execute(
        "select decisions_json, gflops from trials where run_id=? and is_remeasure=0", (rid,)
    ):
        if not dec:
            continue
        d = json.loads(dec)
        if not isinstance(d, dict) or d.get("sketch") is None:
            rows[label][1] += 1  # outside the knob space (a mutated trace): counted, not packed
            continue
        packed = d["sketch"] >= first_packed
        rows[label][0] += packed
        rows[label][1] += 1
        best[packed] = max(best[packed], gf or 0)
for label in sorted(rows):
    p, n = rows[label]
    print(
        f"  {label:32s} {p:4d} of {n:4d} trials in packed sketches ({100 * p / max(n, 1):.0f} %)"
    )
print(f"  best search-time GFLOPS: packed {best[True]:.1f}, MetaSchedule's own {best[False]:.1f}")
