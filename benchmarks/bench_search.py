"""The search benchmark: every strategy against TVM's own ``tune_tir``, in one run, with the
papers' targets.

Every row is one search (workload, strategy, trial budget, seed) stored in one database. Our
strategies run through the same ``Tuner`` and ``LocalMeasurer``; MetaSchedule's ``tune_tir`` runs
as TVM ships it (``tune_tir``) and with our fast builder (``tune_tir_fast``, docs/tvm-notes.md),
its trials streamed into the same database. At the end every row's best few schedules are re-timed
in interleaved rounds with one timer (``_retime``), NumPy's own kernel is timed between those
rounds in a clean subprocess, and the machine's fp32 peak is read from its cache (measured again
when it was kept from a busy machine): every other ratio printed is between numbers measured in
this run.

    python benchmarks/bench_search.py --quick    # one workload, 32 trials, 2 seeds (minutes)
    python benchmarks/bench_search.py --targets  # what `make bench-targets` runs (36-50 min quiet
                                                 # with 3 re-timing rounds; 9: 1-3 min more each)
    python benchmarks/bench_search.py            # the full suite (many hours on 2 cores)

Output: a table and the targets on stdout, ``bench_results/search.csv`` (one row per search,
``best_gflops`` as found and ``confirmed_gflops`` re-timed), ``bench_results/search.db`` (the
database; ``benchmarks/plot_reproduction.py`` draws the reproduction page's plots from it).
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import statistics
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import _checkout  # noqa: F401  (first: this checkout's explorer)
from _retime import TIMED, retime, top_candidates
from _timing import kernel_secs

from explorer.cost_models._metrics import record_latency, spearman
from explorer.machine import NumpyTimer, measured_peak
from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.search import make_strategy
from explorer.search._metaschedule import run_metaschedule
from explorer.storage import get_store
from explorer.target import Target, available_cores
from explorer.tuner import Tuner
from explorer.workloads import get_workload

OUT = Path("bench_results")
FULL_SUITE = (
    "matmul_512",
    "matmul_1024",
    "resnet18_c2",
    "resnet18_c6",
    "resnet18_c12",
    "depthwise_112",
    "batch_matmul_8x128",
    "matmul:M=127,N=255,K=63",  # odd shapes: no perfect tiling fits
)
OURS = ("random", "autotvm", "evolutionary", "droplet", "evolutionary+droplet")
VENDOR = ("tune_tir_fast", "tune_tir")  # MetaSchedule with the fast builder / as shipped
# Trials per minute against tune_tir as shipped (issue "small budgets that win", part 4): 3x on
# matmul 512, 2x on matmul 1024, where a kernel's own calls leave the protocol less room.
# Other workloads are held to the stricter of the two.
THROUGHPUT_GOALS = {get_workload("matmul_512").key(): 3.0, get_workload("matmul_1024").key(): 2.0}
THROUGHPUT_GOAL = 3.0
BATCH = 8
MEASURE = MeasureConfig(repeat=5, min_repeat_secs=0.02)  # every row of ours; warm-up 20 ms


@dataclass(frozen=True)
class RunRow:
    workload: str
    strategy: str
    budget: int
    seed: int
    trials: int
    secs: float
    best_gflops: float  # the row's own pick, on its own timings
    confirmed_gflops: float  # its best few re-timed at the end, interleaved with every row's
    trials_per_min: float
    spearman: float
    run_id: int
    failed: int = 0  # trials without a timing (build or run errors, timeouts, noisy)
    build_secs: float = math.nan  # median compile time of its trials (one builder's seconds)
    kernel_secs: float = math.nan  # mean time its trials' kernel calls took (``kernel_secs``)


def _workload(name: str):
    if ":" not in name:
        return get_workload(name)
    family, _, params = name.partition(":")
    return get_workload(
        family, **{k: int(v) for k, v in (p.split("=") for p in params.split(","))}
    )


def _search(tuner, store, workload, target, strategy, budget, seed) -> RunRow:
    t0 = time.monotonic()
    if strategy in VENDOR:
        run = run_metaschedule(
            workload,
            target,
            store,
            max_trials=budget,
            num_trials_per_iter=min(64, budget),
            seed=seed,
            shipped=strategy == "tune_tir",
        )
        run_id, rho = run.id, math.nan
    else:
        result = tuner.run(workload, target, make_strategy(strategy), max_trials=budget, seed=seed)
        run_id, rho = result.run.id, _spearman(store, result.run.id)
    secs = time.monotonic() - t0
    trials = [t for t in store.trials(run_id=run_id) if not t.is_remeasure][:budget]
    timed = [t.median_secs for t in trials if t.median_secs and t.status in TIMED]
    builds = [t.result.build_secs for t in trials if t.result.build_secs]
    calls = [kernel_secs(t.result, MEASURE) for t in trials if t.median_secs]
    return RunRow(
        workload.key(), strategy, budget, seed, len(trials), secs,
        _gflops(workload, min(timed, default=None)), math.nan,
        60 * len(trials) / max(secs, 1e-9), rho, run_id, len(trials) - len(timed),
        statistics.median(builds) if builds else math.nan,
        statistics.fmean(calls) if calls else math.nan,
    )  # fmt: skip


def _spearman(store, run_id: int) -> float:
    records = [t for t in store.trials(run_id=run_id) if t.predicted and not t.is_remeasure]
    if len(records) < 3:
        return math.nan
    name = next(iter(records[0].predicted))
    pairs = [(r.predicted[name], record_latency(r)) for r in records if name in r.predicted]
    return spearman([p for p, _ in pairs], [lat for _, lat in pairs])


def _gflops(workload, secs: float | None) -> float:
    return workload.flops() / secs / 1e9 if secs and math.isfinite(secs) else 0.0


def plan(args, light: bool = False) -> list[tuple[str, int, int]]:
    """The searches of one workload: (strategy, budget, seed), cheapest first.

    A ``light`` workload gets one seed at the smallest budget and no papers' extra rows: enough
    for every strategy ÷ ``tune_tir_fast``, its best ÷ NumPy and ÷ peak, and the throughput
    ratios (``tune_tir`` as shipped), at a fraction of the time.
    """
    if light:
        n = args.budgets[0]
        return [(s, n, 0) for s in (*OURS, *VENDOR)]
    small = [b for b in args.budgets if b <= 64]
    runs: list[tuple[str, int, int]] = []
    for budget in args.budgets:
        seeds = args.small_seeds if budget in small else args.seeds
        for seed in range(seeds):
            runs += [(s, budget, seed) for s in (*OURS, "tune_tir_fast")]
            if budget == args.budgets[0]:
                runs.append(("tune_tir", budget, seed))  # the throughput reference
    n = args.budgets[0]
    seeds = args.small_seeds if n in small else args.seeds
    runs += [("random", 2 * n, seed) for seed in range(seeds)]  # AutoTVM: vs random@2N
    for seed in range(args.seeds):  # the slow ones (static compiles hundreds of candidates)
        runs.append(("static", 8, seed))  # Tuna: top-1 of 8 measurements
        runs.append(("value", 32, seed))  # value learning: 32 measurements
    if args.long:
        runs.append(("evolutionary+droplet", args.droplet, 0))  # Droplet: 300 vs Ansor's 1000+
        runs.append(("tune_tir_fast", args.long, 0))
    return list(dict.fromkeys(runs))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="one workload, 32 trials, 2 seeds")
    p.add_argument("--targets", action="store_true", help="the runs of `make bench-targets`")
    p.add_argument("--workloads", nargs="*", default=None)
    p.add_argument("--light", nargs="*", default=None, help="workloads run with one seed only")
    p.add_argument("--budgets", nargs="*", type=int, default=None)
    p.add_argument("--seeds", type=int, default=None, help="seeds per budget above 64")
    p.add_argument("--small-seeds", type=int, default=None, help="seeds per budget up to 64")
    p.add_argument("--long", type=int, default=None, help="tune_tir_fast's long budget (0: none)")
    p.add_argument("--droplet", type=int, default=300, help="evolutionary+droplet vs --long")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args()
    if args.quick:
        defaults = (["matmul_512"], [], [32], 2, 2, 0)
    elif args.targets:
        defaults = (["matmul_512", "matmul_1024"], ["matmul_1024"], [64, 256], 1, 3, 1000)
    else:
        defaults = (list(FULL_SUITE), [], [64, 256], 3, 5, 1000)
    names = ("workloads", "light", "budgets", "seeds", "small_seeds", "long")
    for name, value in zip(names, defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)

    args.out.mkdir(exist_ok=True)
    db = args.out / "search.db"
    db.unlink(missing_ok=True)
    store = get_store(db)
    target = Target.local_cpu()
    print(f"target {target} {target.to_tvm_dict()}", flush=True)
    rows: list[RunRow] = []
    numpy: dict[str, NumpyRow] = {}
    with (
        LocalMeasurer(MEASURE) as measurer,
        NumpyTimer() as numpy_timer,
    ):
        tuner = Tuner(measurer=measurer, store=store, batch_size=BATCH, confirm_top=3)
        for name in args.workloads:
            workload = _workload(name)
            mine = []
            for strategy, budget, seed in plan(args, light=name in args.light):
                row = _search(tuner, store, workload, target, strategy, budget, seed)
                mine.append(row)
                print(
                    f"{row.workload[:44]:44s} {strategy:22s} {budget:>5d} seed {seed}: "
                    f"{row.best_gflops:7.1f} GFLOPS, {row.trials} trials "
                    f"({row.failed} failed) in {row.secs:6.1f} s",
                    flush=True,
                )
            rows += _confirm(store, measurer, numpy_timer, workload, mine, numpy)
    peak = measured_peak(target)
    _write(args.out / "search.csv", rows)
    _write(args.out / "targets.csv", _report(rows, numpy, peak, args))


@dataclass(frozen=True)
class NumpyRow:
    gflops: float
    kernel: str


def _confirm(store, measurer, numpy_timer, workload, rows, numpy) -> list[RunRow]:
    """Re-time every row's best few schedules, interleaved, NumPy timed between rounds."""
    baseline = []

    def time_numpy() -> float:
        b = numpy_timer.time(workload)
        baseline.append(b)
        return min(b.run_secs)  # read like our schedules: the fastest repeat

    has_numpy = workload.family in ("matmul", "batch_matmul")
    retimed = retime(
        measurer,
        [(r.run_id, top_candidates(store, r.run_id, r.budget)) for r in rows],
        time_numpy if has_numpy else None,
    )
    if baseline:
        best = min(baseline, key=lambda b: min(b.run_secs))
        numpy[workload.key()] = NumpyRow(_gflops(workload, min(best.run_secs)), best.kernel)
    print(f"  {retimed.describe()}", flush=True)
    out = []
    for r in rows:
        gflops = _gflops(workload, retimed.best_secs.get(r.run_id))
        out.append(replace(r, confirmed_gflops=gflops))
        print(f"  re-timed {r.strategy:22s} {r.budget:>5d} seed {r.seed}: "
              f"{r.best_gflops:7.1f} -> {gflops:7.1f} GFLOPS", flush=True)  # fmt: skip
    return out


def _values(rows, workload, strategy, budget, field="confirmed_gflops") -> list[float]:
    return [
        getattr(r, field)
        for r in rows
        if (r.workload, r.strategy, r.budget) == (workload, strategy, budget)
    ]


def _median(values) -> float:
    values = [v for v in values if math.isfinite(v)]
    return statistics.median(values) if values else math.nan


@dataclass(frozen=True)
class Goal:
    """One of the papers' targets: ``ratio`` (of medians over seeds) must reach ``goal``."""

    workload: str
    name: str
    ratio: float
    goal: float

    def line(self) -> str:
        if not math.isfinite(self.ratio):
            return f"    {self.name}: not measured in this run"
        met = "met" if self.ratio >= self.goal else "NOT met"
        # three places: a 0.997 printed as "1.00" next to "NOT met" reads as a contradiction
        return f"    {self.name}: {self.ratio:.3f} (target >= {self.goal:g}: {met})"


def goals(rows: list[RunRow], numpy: dict, peak_gflops: float, args) -> list[Goal]:
    """Every target of issue 9 (trials per minute: part 4 of "small budgets that win"), per
    workload, from this run's rows."""
    n, long, top = args.budgets[0], args.long, args.budgets[-1]
    out = []
    for w in sorted({r.workload for r in rows}):

        def med(strategy, budget, field="confirmed_gflops", w=w):
            return _median(_values(rows, w, strategy, budget, field))

        def add(name, ratio, goal, w=w):
            out.append(Goal(w, name, ratio, goal))

        for budget in args.budgets:
            for s in OURS:
                ref = med("tune_tir_fast", budget)
                add(f"{s}@{budget} / tune_tir_fast@{budget}", med(s, budget) / ref, 1)
        if long:
            ref = med("tune_tir_fast", long)
            add(f"evolutionary+droplet@{args.droplet} / tune_tir_fast@{long}",
                med("evolutionary+droplet", args.droplet) / ref, 1)  # fmt: skip
        add(f"autotvm@{n} / random@{2 * n}", med("autotvm", n) / med("random", 2 * n), 1)
        add(f"value@32 / tune_tir_fast@{top}", med("value", 32) / med("tune_tir_fast", top), 0.9)
        best = max((r.confirmed_gflops for r in rows if r.workload == w), default=math.nan)
        add("static@8 / best measured", med("static", 8) / best, 0.67)
        if w in numpy:
            ref = numpy[w]
            add(f"best / NumPy ({ref.gflops:.0f} GFLOPS, OpenBLAS {ref.kernel})",
                best / ref.gflops, 1)  # fmt: skip
        add(f"best / measured peak ({best:.0f} of {peak_gflops:.0f} GFLOPS)",
            best / peak_gflops, 0.85)  # fmt: skip
        shipped = med("tune_tir", n, "trials_per_min")
        for s in OURS:
            ceiling = protocol_ceiling(med(s, n, "build_secs"), med(s, n, "kernel_secs")) / shipped
            add(
                f"trials/min {s}@{n} / tune_tir (shipped) [this protocol's ceiling {ceiling:.1f}]",
                med(s, n, "trials_per_min") / shipped,
                THROUGHPUT_GOALS.get(w, THROUGHPUT_GOAL),
            )
    return out


def protocol_ceiling(build_secs: float, kernel_secs: float, cores: int | None = None) -> float:
    """The most trials per minute our timing protocol allows on this machine for the kernels
    a row drew: each trial is compiled (``build_secs`` on one core, the builders share the
    cores) and then timed alone, never beside a compile, its kernel called for ``kernel_secs``
    on average (the check, TVM's untimed call and the repeats; ``_timing.kernel_secs``). It
    ignores loading, messages, the store and every re-timing, so the real rate is lower.

    The kernels' own time is what sets it on large workloads: the random candidates of matmul
    1024 take 20 ms to 2 s a call, so the 20 ms repeats of ``MEASURE`` say nothing there (a
    ceiling from them alone once read 12-16x)."""
    if not math.isfinite(kernel_secs):  # a row without a timed trial: the protocol's minimum
        kernel_secs = MEASURE.warmup_secs + MEASURE.repeat * MEASURE.min_repeat_secs
    return 60 / (kernel_secs + build_secs / (cores or available_cores()))


def _report(rows: list[RunRow], numpy: dict, peak, args) -> list[Goal]:
    head = ("workload", "strategy", "budget", "GFLOPS re-timed: median [range] n", "trials/min")
    print("\n{:44s} {:22s} {:>6s} {:>34s} {:>10s}".format(*head))
    for w, s, b in sorted({(r.workload, r.strategy, r.budget) for r in rows}):
        values = _values(rows, w, s, b)
        spread = f"{_median(values):6.1f} [{min(values):.0f}-{max(values):.0f}] {len(values)}"
        tpm = _median(_values(rows, w, s, b, "trials_per_min"))
        print(f"{w[:44]:44s} {s:22s} {b:>6d} {spread:>34s} {tpm:10.1f}")
    print(f"\nMachine: measured fp32 peak {peak.gflops_f32:.0f} GFLOPS, "
          f"memory bandwidth {peak.bandwidth_gbs:.1f} GB/s")  # fmt: skip
    print("\nTargets (ratios of medians over seeds; every number measured in this run):")
    found = goals(rows, numpy, peak.gflops_f32, args)
    for w in dict.fromkeys(g.workload for g in found):
        print(f"  {w}")
        for g in found:
            if g.workload == w:
                print(g.line())
    return found


def _write(path: Path, rows: list) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
