"""Where a model tune's wall time goes, chunk by chunk, from its database alone (read-only).

Each chunk is a run: started_at, its rows' created_at (one stamp per stored batch), ended_at.
Phases: before the baseline is stored (start-up, replaying earlier chunks' trials, the
baseline's build and timing), searching (baseline stored -> last trial batch stored), the
confirmation (-> its batch stored), the end (-> ended_at) and the gaps between chunks (the
task scheduler, reading the database).
The unscheduled program's own timed repeats are summed apart (before the search, and in the
confirmations).
usage: python 2026-12-06-chunk-split.py records.db
"""

import json
import sqlite3
import sys

con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
runs = con.execute("SELECT id, started_at, ended_at FROM runs ORDER BY started_at").fetchall()
tot = dict(before=0.0, search=0.0, confirm=0.0, end=0.0, gap=0.0)
first_start, last_end, prev_end = runs[0][1], runs[-1][2], None
n_trials = 0
base_before = base_confirm = 0.0
for run_id, start, end in runs:
    rows = con.execute(
        "SELECT is_remeasure, decisions_json, created_at, run_secs_json FROM trials"
        " WHERE run_id = ? ORDER BY id",
        (run_id,),
    ).fetchall()
    trials = [r for r in rows if not r[0]]
    n_trials += len(trials)
    base_rows = [r for r in rows if r[0] and "baseline" in (r[1] or "")]
    base = [r[2] for r in base_rows]
    t0 = base[0] if base else start
    t_last = trials[-1][2] if trials else t0
    after = [r[2] for r in rows if r[2] > t_last]
    t_conf = max(after) if after else t_last
    for i, r in enumerate(base_rows):
        secs = sum(json.loads(r[3] or "[]"))
        if i == 0:
            base_before += secs
        else:
            base_confirm += secs
    tot["before"] += t0 - start
    tot["search"] += t_last - t0
    tot["confirm"] += t_conf - t_last
    tot["end"] += end - t_conf
    if prev_end is not None:
        tot["gap"] += start - prev_end
    prev_end = end
wall = last_end - first_start
print(f"{len(runs)} chunks, {n_trials} trials, first start to last end {wall:.0f} s")
for k, v in tot.items():
    print(f"  {k:8s} {v:7.1f} s  {100 * v / wall:5.1f} %")
print(f"  the unscheduled program's timed repeats: {base_before:.1f} s before the searches,")
share = 100 * (base_before + base_confirm) / wall
print(f"  {base_confirm:.1f} s in the confirmations ({share:.1f} % of the tune)")
