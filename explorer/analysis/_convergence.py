"""Convergence of searches: best-so-far per run, and the median and spread across runs.

A best-so-far curve is a step function, so a run is kept as its improvement points only (a few
dozen, whatever the run's length); the median and spread across the runs of one strategy are
evaluated on a common grid of at most ``num_grid`` points. Nothing here grows with the number of
trials shipped to a browser.

Re-measurements (a trace the run had already measured, see ``explorer.analysis._table``) are not
trials of the search: they do not advance the trials axis, do not count against a budget and do
not move the curve. The curve shows each schedule's timing when the search first measured it,
which is what the search acted on; the ``Tuner``'s final confirmation (the best candidates re-timed
and their repeats pooled) can only make a best slower or faster after the search is over, and a
best-so-far line drawn through it would stop being monotone. ``RunCurve.num_remeasured`` says how
many re-measurements a run has; ``TuneResult.best_secs`` holds the confirmed best.

The run's baseline (the unscheduled program, measured before the search) and its start (the
user's own schedule, when given) are references, not steps of the curve: each run keeps their
first timing (``RunCurve.baseline_secs``, ``start_secs``), and ``ConvergenceInfo.baseline`` /
``start`` summarise them as the horizontal lines a plot draws.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from explorer.analysis._table import TrialTable
from explorer.core import RecordStore, RunInfo
from explorer.replay import REPLAYED_FROM
from explorer.target import Target
from explorer.workloads import Workload

Metric = Literal["gflops", "latency_ms"]
METRIC_LABELS: dict[str, str] = {"gflops": "GFLOPS", "latency_ms": "latency (ms)"}


@dataclass(frozen=True, slots=True)
class RunCurve:
    """One run's best-so-far in core units, reduced to the trials that improved it.

    Re-measurements are left out (see the module docstring): ``trials`` counts the run's trials
    without them, and only trials can improve the curve.

    Attributes:
        run: the run.
        num_trials: trials of the run, re-measurements not counted.
        last_elapsed_secs: when the run's last trial was stored, from the run's start.
        seqs: the improving trials' positions in the run (0-based ``seq``, as stored).
        trials: the improving trials' positions on the trials axis (1-based: how many trials
            had been measured, re-measurements not counted).
        elapsed_secs: when each improving trial was stored.
        best_secs: the best median latency after each improving trial (decreasing).
        num_remeasured: the run's re-measurements (its baseline included).
        baseline_secs: the unscheduled program's first timing in the run (``None``: the run
            has no baseline, or it gave no timing).
        start_secs: the start's first timing (``None``: no start, or no timing).
    """

    run: RunInfo
    num_trials: int
    last_elapsed_secs: float
    seqs: tuple[int, ...]
    elapsed_secs: tuple[float, ...]
    best_secs: tuple[float, ...]
    trials: tuple[int, ...]
    num_remeasured: int
    baseline_secs: float | None = None
    start_secs: float | None = None

    def best_within(self, num_trials: int) -> float:
        """The best latency among the run's first ``num_trials`` trials (``inf``: none worked);
        re-measurements do not count."""
        k = int(np.searchsorted(np.asarray(self.trials), num_trials, side="right"))
        return self.best_secs[k - 1] if k else math.inf


@dataclass(frozen=True, slots=True)
class RunSeries:
    """One run's improvement points in display units (what a plot draws as a step line)."""

    run_id: int
    seqs: tuple[int, ...]
    trials: tuple[int, ...]  # how many trials had been measured (re-measurements not counted)
    elapsed_secs: tuple[float, ...]
    values: tuple[float, ...]
    num_trials: int
    last_elapsed_secs: float
    num_remeasured: int
    baseline: float | None = None  # the run's baseline in display units
    start: float | None = None  # the run's start in display units


@dataclass(frozen=True, slots=True)
class Spread:
    """Runs summarised on a common grid, every statistic a best-so-far curve itself.

    Each run votes at every grid point: before its first success with the worst value (nothing
    found yet), after its last trial with its final best (a best stays found). So the median,
    the quartiles, ``lo`` and ``hi`` (minimum and maximum across runs) never get worse along
    the grid, which they did when runs that had ended dropped out. Each is a value some run
    reached (the lower median of an even number of runs, say), NaN while it is still "nothing
    found". ``num_runs``: the runs still searching at each point. Like the
    runs, a step function: only the grid points where something changes are kept (plus the
    last one), so draw it with horizontal-then-vertical steps.
    """

    x: tuple[float, ...]
    median: tuple[float, ...]
    q25: tuple[float, ...]
    q75: tuple[float, ...]
    lo: tuple[float, ...]
    hi: tuple[float, ...]
    num_runs: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConvergenceGroup:
    """The runs of one strategy on one target."""

    label: str
    strategy: str
    target_key: str
    runs: tuple[RunSeries, ...]
    by_trials: Spread
    by_secs: Spread


@dataclass(frozen=True, slots=True)
class ConvergenceInfo:
    """What a convergence plot draws.

    Attributes:
        metric: ``"gflops"`` (higher is better) or ``"latency_ms"`` (lower is better).
        metric_label: the axis title for ``metric``.
        groups: one per (strategy, target), in order of first run.
        baseline: the unscheduled program (median over the runs' baselines), in display units:
            the horizontal line every search has to beat. ``None`` when no run has one, or
            the runs tune more than one workload or target (no single program to draw).
        start: likewise, the runs' start (the user's schedule), when they have one.
    """

    metric: Metric
    metric_label: str
    groups: tuple[ConvergenceGroup, ...]
    baseline: float | None = None
    start: float | None = None

    @property
    def num_runs(self) -> int:
        return sum(len(g.runs) for g in self.groups)

    @property
    def num_trials(self) -> int:
        """Trials of all runs, re-measurements not counted."""
        return sum(r.num_trials for g in self.groups for r in g.runs)

    @property
    def num_remeasured(self) -> int:
        return sum(r.num_remeasured for g in self.groups for r in g.runs)

    @property
    def num_points(self) -> int:
        """Points a plot of this info ships: run steps plus grid points, both axes."""
        runs = sum(len(r.seqs) + 1 for g in self.groups for r in g.runs)
        grid = sum(len(g.by_trials.x) + len(g.by_secs.x) for g in self.groups)
        return 2 * runs + 3 * grid


@dataclass(frozen=True, slots=True)
class ComparisonGroup:
    """Each run's best within the budget, for one strategy on one target.

    ``values`` is NaN for a run with no successful trial within the budget (counted in
    ``num_without_success``).
    """

    label: str
    strategy: str
    target_key: str
    run_ids: tuple[int, ...]
    values: tuple[float, ...]
    median: float
    num_without_success: int


@dataclass(frozen=True, slots=True)
class StrategyComparisonInfo:
    """Strategies compared at an equal budget: the first ``budget`` trials of every run
    (re-measurements neither count against the budget nor improve a run's best).

    ``num_short_runs`` runs had fewer trials than the budget and are left out.
    """

    metric: Metric
    metric_label: str
    budget: int
    groups: tuple[ComparisonGroup, ...]
    num_short_runs: int
    num_remeasured: int = 0  # re-measurements of the compared runs (none counted)


def run_curve(source: RecordStore | TrialTable, run: RunInfo) -> RunCurve:
    """A run's improvement points, without re-measurements.

    Args:
        source: a store (the run's ``trial_rows`` are read: no trace is decoded), or a
            ``TrialTable`` holding the run's trials (a dashboard's, already in memory).
        run: the run.
    """
    if isinstance(source, TrialTable):
        table = source
        rows = np.flatnonzero(table.run_ids == run.id)
    else:
        table = TrialTable.from_rows(source.trial_rows(run_id=run.id))
        rows = np.arange(len(table))
    rows = rows[np.argsort(table.seqs[rows], kind="stable")]
    again = table.is_remeasure[rows]
    trials = rows[~again]
    refs = {
        "baseline_secs": _first_timing(table, rows[table.is_baseline[rows]]),
        "start_secs": _first_timing(table, rows[table.is_start[rows]]),
    }
    if len(trials) == 0:
        return RunCurve(run, 0, 0.0, (), (), (), (), int(np.count_nonzero(again)), **refs)
    latency = np.where(table.is_ok[trials], table.latency_secs[trials], np.inf)
    best = np.minimum.accumulate(latency)
    prev = np.concatenate([[np.inf], best[:-1]])
    idx = np.flatnonzero(np.isfinite(best) & (best < prev))  # an improvement is a finite drop
    elapsed = table.created_at[trials] - run.started_at
    return RunCurve(
        run=run,
        num_trials=len(trials),
        last_elapsed_secs=float(elapsed[-1]),
        seqs=tuple(int(s) for s in table.seqs[trials[idx]]),
        elapsed_secs=tuple(float(e) for e in elapsed[idx]),
        best_secs=tuple(float(b) for b in best[idx]),
        trials=tuple(int(i) + 1 for i in idx),
        num_remeasured=int(np.count_nonzero(again)),
        **refs,
    )


def _first_timing(table: TrialTable, rows: np.ndarray) -> float | None:
    """The first of ``rows``' latencies (``None``: no row, or it gave no timing)."""
    if len(rows) == 0 or not table.is_ok[rows[0]]:
        return None
    return float(table.latency_secs[rows[0]])


def run_curves(
    store: RecordStore,
    workload: Workload | None = None,
    target: Target | None = None,
    strategies: Iterable[str] | None = None,
) -> list[RunCurve]:
    """The improvement points of every matching run, oldest run first."""
    wanted = None if strategies is None else set(strategies)
    runs = store.runs(workload=workload, target=target)
    return [run_curve(store, r) for r in runs if wanted is None or r.strategy in wanted]


def convergence_info(
    source: RecordStore | Sequence[RunCurve],
    workload: Workload | None = None,
    target: Target | None = None,
    strategies: Iterable[str] | None = None,
    *,
    metric: Metric = "gflops",
    num_grid: int = 200,
) -> ConvergenceInfo:
    """Best-so-far vs trials and vs wall-clock seconds, per run and summarised per strategy.

    Args:
        source: a store (its matching runs are read), or curves already read with
            ``run_curves`` (then the filters must be left out).
        workload, target, strategies: which runs; ``None`` means all.
        metric: ``"gflops"`` or ``"latency_ms"``.
        num_grid: grid points of the median/spread curves per axis.

    Returns:
        One group per (strategy, target). Every run votes in the summary all along: with the
        worst value before its first success and with its final best after its last trial, so
        the median and the spread are best-so-far curves too (see ``Spread``).

    Example:
        >>> from explorer.storage import get_store
        >>> convergence_info(get_store(":memory:")).groups
        ()
    """
    curves = _curves(source, workload, target, strategies)
    _check_metric(metric)
    if num_grid < 2:
        raise ValueError(f"num_grid must be at least 2 (got {num_grid})")
    groups = []
    for (strategy, target_key), members in _grouped(curves).items():
        series = tuple(_series(c, metric) for c in members)
        groups.append(
            ConvergenceGroup(
                label=_label(strategy, members[0].run, curves),
                strategy=strategy,
                target_key=target_key,
                runs=series,
                by_trials=_spread_by_trials(series, num_grid, metric),
                by_secs=_spread_by_secs(series, num_grid, metric),
            )
        )
    return ConvergenceInfo(
        metric,
        METRIC_LABELS[metric],
        tuple(groups),
        baseline=_reference(curves, "baseline_secs", metric),
        start=_reference(curves, "start_secs", metric),
    )


def strategy_comparison_info(
    source: RecordStore | Sequence[RunCurve],
    workload: Workload | None = None,
    target: Target | None = None,
    strategies: Iterable[str] | None = None,
    *,
    budget: int | None = None,
    metric: Metric = "gflops",
) -> StrategyComparisonInfo:
    """Each run's best within the same budget, grouped per strategy (for bars or boxes).

    Args:
        source, workload, target, strategies: as for ``convergence_info``.
        budget: trials counted per run; ``None`` takes the shortest run's length, so every run
            is judged on the same number of measurements. Runs shorter than an explicit budget
            are left out (counted in ``num_short_runs``).
        metric: ``"gflops"`` or ``"latency_ms"``.

    Example:
        >>> from explorer.storage import get_store
        >>> strategy_comparison_info(get_store(":memory:")).budget  # no runs: no budget
        0
    """
    _check_metric(metric)
    curves = [c for c in _curves(source, workload, target, strategies) if c.num_trials > 0]
    if budget is None:
        budget = min((c.num_trials for c in curves), default=0)
    elif budget < 1:
        raise ValueError(f"budget must be at least 1 trial (got {budget})")
    kept = [c for c in curves if c.num_trials >= budget] if budget else []
    groups = []
    for (strategy, target_key), members in _grouped(kept).items():
        values = [_display(c.best_within(budget), c.run, metric) for c in members]
        finite = [v for v in values if math.isfinite(v)]
        groups.append(
            ComparisonGroup(
                label=_label(strategy, members[0].run, kept),
                strategy=strategy,
                target_key=target_key,
                run_ids=tuple(c.run.id for c in members),
                values=tuple(values),
                median=float(np.median(finite)) if finite else math.nan,
                num_without_success=len(values) - len(finite),
            )
        )
    return StrategyComparisonInfo(
        metric,
        METRIC_LABELS[metric],
        budget,
        tuple(groups),
        len(curves) - len(kept),
        sum(c.num_remeasured for c in kept),
    )


# -- helpers ----------------------------------------------------------------------------------
def _check_metric(metric: str) -> None:
    if metric not in METRIC_LABELS:
        raise ValueError(f"metric must be one of {sorted(METRIC_LABELS)} (got {metric!r})")


def _curves(
    source: RecordStore | Sequence[RunCurve],
    workload: Workload | None,
    target: Target | None,
    strategies: Iterable[str] | None,
) -> list[RunCurve]:
    if isinstance(source, RecordStore):
        return run_curves(source, workload, target, strategies)
    if workload is not None or target is not None or strategies is not None:
        raise TypeError("filters apply to a store; select the curves before passing them")
    return list(source)


def _grouped(curves: Sequence[RunCurve]) -> dict[tuple[str, str], list[RunCurve]]:
    groups: dict[tuple[str, str], list[RunCurve]] = {}
    for c in curves:
        groups.setdefault((shown_strategy(c.run), c.run.target.key()), []).append(c)
    return groups


def shown_strategy(run: RunInfo) -> str:
    """The run's strategy as every plot and table names it: ``"random (replayed)"`` for a run
    answered from a recording (``explorer.replay``), never mixed with measured runs."""
    return f"{run.strategy} (replayed)" if run.environment.get(REPLAYED_FROM) else run.strategy


def _label(strategy: str, run: RunInfo, curves: Sequence[RunCurve]) -> str:
    # The target only matters to the reader when the runs span several.
    targets = {c.run.target.key(): c.run.target.name for c in curves}
    if len(targets) <= 1:
        return strategy
    # The name reads better, but two targets may share one (runs stored before names said the
    # core count, or a device that names itself like another): the key is unique.
    names = list(targets.values())
    name = run.target.name
    return f"{strategy} @ {name if name and names.count(name) == 1 else run.target.key()}"


def _display(secs: float, run: RunInfo, metric: Metric) -> float:
    if not math.isfinite(secs) or secs <= 0:
        return math.nan
    if metric == "latency_ms":
        return secs * 1e3
    return run.workload.flops() / secs / 1e9


def _reference(curves: Sequence[RunCurve], name: str, metric: Metric) -> float | None:
    """The median of the runs' ``name`` (baseline or start) in display units, when the runs
    tune one workload on one target and some have it."""
    if len({(c.run.workload.key(), c.run.target.key()) for c in curves}) != 1:
        return None
    values = [_display(v, c.run, metric) for c in curves if (v := getattr(c, name)) is not None]
    values = [v for v in values if math.isfinite(v)]
    return float(np.median(values)) if values else None


def _optional_display(secs: float | None, run: RunInfo, metric: Metric) -> float | None:
    return None if secs is None else _display(secs, run, metric)


def _series(curve: RunCurve, metric: Metric) -> RunSeries:
    return RunSeries(
        run_id=curve.run.id,
        seqs=curve.seqs,
        trials=curve.trials,
        elapsed_secs=curve.elapsed_secs,
        values=tuple(_display(b, curve.run, metric) for b in curve.best_secs),
        num_trials=curve.num_trials,
        last_elapsed_secs=curve.last_elapsed_secs,
        num_remeasured=curve.num_remeasured,
        baseline=_optional_display(curve.baseline_secs, curve.run, metric),
        start=_optional_display(curve.start_secs, curve.run, metric),
    )


def _spread_by_trials(series: Sequence[RunSeries], num_grid: int, metric: Metric) -> Spread:
    end = max((s.num_trials for s in series), default=0)
    if end < 1:
        return _summarise(np.zeros(0), np.zeros((0, 0)), np.zeros((0, 0), bool), metric)
    grid = np.unique(np.linspace(1, end, num_grid).round())
    rows = [_step_values(s.trials, s.values, grid) for s in series]
    alive = [grid <= s.num_trials for s in series]
    return _summarise(grid, np.asarray(rows), np.asarray(alive), metric)


def _spread_by_secs(series: Sequence[RunSeries], num_grid: int, metric: Metric) -> Spread:
    end = max((s.last_elapsed_secs for s in series), default=0.0)
    if not series or not any(s.seqs for s in series):
        return _summarise(np.zeros(0), np.zeros((0, 0)), np.zeros((0, 0), bool), metric)
    grid = np.linspace(0.0, end, num_grid) if end > 0 else np.zeros(1)
    rows = [_step_values(s.elapsed_secs, s.values, grid) for s in series]
    alive = [grid <= s.last_elapsed_secs for s in series]
    return _summarise(grid, np.asarray(rows), np.asarray(alive), metric)


def _step_values(xs: Sequence[float], values: Sequence[float], grid: np.ndarray) -> np.ndarray:
    """The step function through (xs, values) at ``grid``, its last value carried on; NaN
    before the first step."""
    k = np.searchsorted(np.asarray(xs, dtype=np.float64), grid, side="right") - 1
    vals = np.asarray(values, dtype=np.float64)
    return np.where(k >= 0, vals[np.clip(k, 0, None)] if len(vals) else np.nan, np.nan)


def _summarise(grid: np.ndarray, rows: np.ndarray, alive: np.ndarray, metric: Metric) -> Spread:
    if rows.size == 0:
        empty: tuple[float, ...] = ()
        return Spread(empty, empty, empty, empty, empty, empty, ())
    # Quantiles of throughputs (higher = better), "nothing found yet" being 0: every run's row
    # is then non-decreasing, and so is every quantile across them. Latencies go through their
    # reciprocal and back (a monotone map keeps that).
    high = metric == "gflops"
    with np.errstate(divide="ignore"):
        better = np.where(np.isnan(rows), 0.0, rows if high else 1.0 / rows)
        # "lower": a value some run reached, never the average of two (of a run that found
        # nothing and one that did, say)
        q = np.percentile(better, [0, 25, 50, 75, 100], axis=0, method="lower")
        q = np.where(q > 0, q if high else 1.0 / q, np.nan)  # still nothing found: no value
    if not high:
        q = q[::-1]  # the slowest latency is the lowest throughput
    counts = np.count_nonzero(alive, axis=0)
    # The summaries are step functions too: a grid point equal to the one before it adds
    # nothing to a step line, so only the changes (and the last point, for the extent) are kept.
    cols = np.vstack([q, counts])
    same = (cols[:, 1:] == cols[:, :-1]) | (np.isnan(cols[:, 1:]) & np.isnan(cols[:, :-1]))
    keep = np.concatenate([[True], ~same.all(axis=0)])
    keep[-1] = True

    def t(a: np.ndarray) -> tuple[float, ...]:
        return tuple(float(v) for v in a[keep])

    return Spread(
        t(grid), t(q[2]), t(q[1]), t(q[3]), t(q[0]), t(q[4]), tuple(int(c) for c in counts[keep])
    )
