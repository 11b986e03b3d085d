"""A writer process for the concurrency tests: appends batches of trials to a store (an SQLite
file or a PostgreSQL URL).

Usage: python _writer.py DB --runs 1,2 --tag A --batches 40 --size 25 [--go FILE] [--forever]

Every trial's ``decisions`` is ``{"tag", "batch", "index", "size"}`` so the parent can check that
each committed batch is complete. Prints ``ready`` once set up and ``committed <batch>`` after each
commit, flushed, so the parent can synchronise with it.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

from explorer import _tvm
from explorer.core import Candidate, MeasureResult
from explorer.storage import NewTrial, get_store
from explorer.types import MeasureStatus


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--runs", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--size", type=int, default=10)
    parser.add_argument("--go", default=None)
    parser.add_argument("--forever", action="store_true")
    args = parser.parse_args()

    store = get_store(args.db)  # a file or a postgresql:// URL
    runs = [store.get_run(int(r)) for r in args.runs.split(",")]
    traces = {}
    for run in runs:
        sch = _tvm.Schedule(run.workload.mod())
        sch.split(sch.get_loops(sch.get_sblock("C"))[0], [None, 8])
        traces[run.id] = _tvm.trace_to_json(sch.trace)
    print("ready", flush=True)
    if args.go:
        while not Path(args.go).exists():
            time.sleep(0.002)
    batches = itertools.count() if args.forever else range(args.batches)
    for batch in batches:
        run = runs[batch % len(runs)]
        trials = [
            NewTrial(
                Candidate(
                    run.workload,
                    run.target,
                    traces[run.id],
                    {"tag": args.tag, "batch": batch, "index": i, "size": args.size},
                ),
                MeasureResult(MeasureStatus.OK, ((batch * args.size + i + 1) * 1e-6,), flops=1),
                {"model": float(i)},
            )
            for i in range(args.size)
        ]
        store.add_trials(run.id, trials)
        print(f"committed {batch}", flush=True)
    store.close()


if __name__ == "__main__":
    sys.exit(main())
