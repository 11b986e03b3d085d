"""The fleet: its overhead against local measurement, and the targets it lets us compare.

Run: ``python benchmarks/bench_fleet.py [--trials 48] [--tune-trials 32]``

Part 1, overhead. The same candidates (matmul 256x256x256, random points of MetaSchedule's
design space, as ``bench_measure.py``) measured by ``LocalMeasurer`` and by ``RemoteMeasurer``
through a tracker and one device server on this machine, both with 2 threads and the default
``MeasureConfig``. The two alternate batch by batch, so load hits both alike. Reported: trials
per minute of each and their ratio (fleet / local), and the best kernel each found (the same
candidates: the two timings of one kernel should agree).

Part 2, targets. Three device keys on this one machine, each a different target: ``native``
(this CPU, 2 threads), ``one-core`` (1 thread pinned to core 1) and ``avx2`` (code for
``x86-64-v3``, AVX2 without AVX-512, 2 threads). Each key's peak is measured on its device
(``device_peak``, again in every run), matmul 512 is tuned for each through the fleet
(evolutionary, ``--tune-trials`` trials, seed 0), then every target's best is measured on
every target (``measure_transfer``, 3 interleaved rounds). Reported: each best against its
device's peak (``targets.csv``), the table of slowdowns and a heatmap
(``bench_results/fleet/transfer.html``).

Results go to ``bench_results/fleet/`` (CSV and HTML).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
from bench_measure import _design_space, _sample

from explorer.fleet import ServerSpec, measure_transfer, start_fleet, stop_fleet
from explorer.measure import Candidate, LocalMeasurer, MeasureConfig, RemoteMeasurer
from explorer.plots import make_transfer_figure
from explorer.search import make_strategy
from explorer.storage import get_store
from explorer.target import Target
from explorer.tuner import Tuner
from explorer.workloads import get_workload

BATCH = 16
PORT = 9870


def _candidates(workload, target: Target, count: int) -> list[Candidate]:
    ctx, spaces = _design_space(workload, target)
    out: list[Candidate] = []
    seed = 1
    while len(out) < count:
        cand = _sample(workload, target, ctx, spaces, seed)
        seed += 1
        if cand is not None:
            out.append(cand)
    return out


def overhead(trials: int, state: Path) -> list[dict]:
    workload = get_workload("matmul", M=256, N=256, K=256)
    fleet = start_fleet([ServerSpec("overhead", threads=2)], state=state, port=PORT)
    try:
        remote = RemoteMeasurer(fleet.tracker, "overhead", MeasureConfig(num_threads=2))
        target = remote.device_target()
        local = LocalMeasurer(MeasureConfig(num_threads=2))
        cands = _candidates(workload, target, trials)
        stats = {name: {"secs": 0.0, "results": []} for name in ("local", "fleet")}
        with local, remote:
            local.start_workers(num_threads=2)
            for start in range(0, trials, BATCH):
                batch = cands[start : start + BATCH]
                for name, measurer in (("local", local), ("fleet", remote)):
                    t0 = time.perf_counter()
                    stats[name]["results"] += measurer.measure(batch)
                    stats[name]["secs"] += time.perf_counter() - t0
    finally:
        stop_fleet(state)
    rows = []
    for name, s in stats.items():
        ok = [r for r in s["results"] if r.is_ok]
        rows.append(
            {
                "measurer": name,
                "trials": len(s["results"]),
                "ok": len(ok),
                "secs": s["secs"],
                "trials_per_min": 60 * len(s["results"]) / s["secs"],
                "best_us": min((r.median_secs for r in ok), default=math.inf) * 1e6,
                "devices": ",".join(sorted({r.device or "this process" for r in ok})),
            }
        )
    return rows


def targets(tune_trials: int, state: Path, db: str) -> tuple[list[dict], object]:
    specs = [
        ServerSpec("native", threads=2),
        ServerSpec("one-core", threads=1, cores=(1,)),
        ServerSpec("avx2", threads=2, mcpu="x86-64-v3"),
    ]
    workload = get_workload("matmul", M=512, N=512, K=512)
    fleet = start_fleet(specs, state=state, port=PORT + 10)
    store = get_store(db)
    rows = []
    pairs = []
    try:
        for spec in specs:
            measurer = RemoteMeasurer(fleet.tracker, spec.key)
            target = measurer.device_target()
            peak = measurer.device_peak(remeasure=True)  # measured on the device, in this run
            t0 = time.perf_counter()
            result = Tuner(measurer=measurer, store=store, batch_size=BATCH).run(
                workload, target, make_strategy("evolutionary"), max_trials=tune_trials, seed=0
            )
            rows.append(
                {
                    "key": spec.key,
                    "target": target.key(),
                    "trials": result.num_trials,
                    "secs": time.perf_counter() - t0,
                    "best_gflops": result.best_gflops,
                    "peak_gflops": peak.gflops_f32,
                    "bandwidth_gbs": peak.bandwidth_gbs,
                    "best_over_peak": (result.best_gflops or 0.0) / peak.gflops_f32,
                }
            )
            print(f"tuned {spec.key} ({target.key()}): {rows[-1]}", flush=True)
            pairs.append((target, measurer))
        info = measure_transfer(store, workload, pairs, rounds=3)
    finally:
        for _, m in pairs:
            m.close()
        stop_fleet(state)
    return rows, info


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=48, help="candidates for the overhead")
    parser.add_argument("--tune-trials", type=int, default=32, help="trials per target")
    parser.add_argument("--out", default="bench_results/fleet")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    load = os.getloadavg()[0]

    rows = overhead(args.trials, work / "fleet.json")
    with open(out / "overhead.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    tuned, info = targets(args.tune_trials, work / "fleet.json", str(work / "records.db"))
    with open(out / "targets.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(tuned[0]))
        writer.writeheader()
        writer.writerows(tuned)
    with open(out / "transfer.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["tuned_for", "measured_on", "median_secs", "slowdown", "device"])
        for c in info.cells:
            slow = info.slowdown(c.tuned_for, c.measured_on)
            writer.writerow([c.tuned_for, c.measured_on, c.secs, slow, c.result.device])
    make_transfer_figure(info).write_html(out / "transfer.html")

    print(f"\n== fleet overhead (matmul 256, 2 threads; load average at start {load:.1f})")
    for r in rows:
        print(
            f"{r['measurer']:<6} {r['trials']:>3} trials in {r['secs']:6.1f} s = "
            f"{r['trials_per_min']:6.1f} trials/min, best {r['best_us']:.1f} us ({r['devices']})"
        )
    local, fleet = rows
    ratio = fleet["trials_per_min"] / local["trials_per_min"]
    print(f"fleet / local trials per minute = {ratio:.2f}")
    print(f"fleet best / local best (same candidates) = {fleet['best_us'] / local['best_us']:.3f}")
    print(f"\n== targets (matmul 512, evolutionary, {args.tune_trials} trials each)")
    for r in tuned:
        print(
            f"{r['key']:<9} {r['target']:<22} best {r['best_gflops'] or 0:7.1f} GFLOPS, device "
            f"peak {r['peak_gflops']:6.1f} GFLOPS ({r['best_over_peak']:.2f} of it), memory "
            f"{r['bandwidth_gbs']:.1f} GB/s"
        )
    print("\nslowdown of the row target's best on the column target (over its own best):")
    print(" " * 24 + "".join(f"{k[:20]:>22}" for k in info.targets))
    for a, row in zip(info.targets, info.matrix(), strict=True):
        print(f"{a[:22]:<24}" + "".join(f"{v:>21.2f}x" for v in row))
    print(f"\nwritten to {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
