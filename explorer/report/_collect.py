"""What a report shows, gathered from a store: plain data, no HTML and no plotting package.

Runs are grouped by workload and target (latencies of different workloads do not compare), like
the dashboards; each group carries the dashboards' infos (``explorer.analysis``) computed over
the chosen runs only, the runs' summaries (``summarize_run``: what ``explorer runs`` and
``explorer tune`` report) and settings, and the best distinct schedules replayed for their
TVMScript and trace.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.analysis import (
    ConvergenceInfo,
    KnobEffectsInfo,
    Metric,
    ModelRaceInfo,
    ModelTimesInfo,
    PredictedVsMeasuredInfo,
    StrategyComparisonInfo,
    TrialTable,
    convergence_info,
    knob_effects_info,
    model_race_info,
    model_times_info,
    predicted_vs_measured_info,
    run_curve,
    shown_strategy,
    strategy_comparison_info,
)
from explorer.code import CodeMix, code_mix, generated_code
from explorer.core import BASELINE_MARK, Candidate, ModelRace, ModelRecord, has_mark
from explorer.errors import ExplorerError
from explorer.model import best_times
from explorer.storage import (
    MANUAL,
    RecordStore,
    RunInfo,
    RunSummary,
    TrialRecord,
    summarize_run,
    trace_hash,
    trial_name,
)
from explorer.target import Target
from explorer.workloads import Workload

log = logging.getLogger(__name__)

MAX_SCHEDULES = 5
"""Best distinct schedules shown per workload by default (each with its TVMScript)."""


class NoRunsError(ExplorerError, ValueError):
    """There is no run to report."""


class UnknownRunError(ExplorerError, KeyError):
    """A run asked for is not in the store."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class BestSchedule:
    """One of a workload's best schedules, as the report shows it.

    Attributes:
        trial_id: The first trial that measured it (a run's ``RunSummary.best_trial_id``).
        name: That trial as screens name it ("trial 5 of run 2").
        run_ids: The chosen runs whose best it is.
        strategies: Those runs' strategies.
        secs: Its reading in its run (``RunSummary.best_secs``: its fastest repeat in the
            run's side-by-side re-timing, its median over all its timings without one).
        gflops: ``secs`` as GFLOPS.
        is_baseline: It is the unscheduled program (nothing beat it).
        script: The TVMScript of the scheduled program (``None`` when it could not be replayed).
        trace_python: The trace as runnable Python (``def apply_trace(sch): ...``).
        trace_json: The trace as stored.
        error: Why it could not be replayed (``None`` when it was).
        mix: The instruction mix of its code, in total and in its hot loop (``explorer.code``;
            ``None`` when it could not be replayed or its target has no assembly).
    """

    trial_id: int
    name: str
    run_ids: tuple[int, ...]
    strategies: tuple[str, ...]
    secs: float
    gflops: float | None
    is_baseline: bool
    script: str | None
    trace_python: str | None
    trace_json: Any
    error: str | None = None
    mix: CodeMix | None = None


@dataclass(frozen=True)
class RunReport:
    """A run, its summary, and how screens name its best trial ("trial 5 of run 2", never the
    database-wide id; ``None`` without a best)."""

    run: RunInfo
    summary: RunSummary
    best_name: str | None = None


@dataclass(frozen=True)
class WorkloadReport:
    """The chosen runs of one workload on one target, with the dashboards' infos over them.

    ``knobs`` is ``None`` when the workload has no knob space (``knobs_note`` says why).
    """

    workload: Workload
    target: Target
    runs: tuple[RunReport, ...]
    convergence: ConvergenceInfo
    comparison: StrategyComparisonInfo
    predicted: PredictedVsMeasuredInfo
    knobs: KnobEffectsInfo | None
    knobs_note: str | None
    best: tuple[BestSchedule, ...]

    @property
    def title(self) -> str:
        return f"{self.workload.key()} on {self.target.name or self.target.key()}"


@dataclass(frozen=True)
class ModelReport:
    """An imported model whose tasks the chosen runs tuned: where its time goes, and its
    races against ONNX Runtime (the latest in a table)."""

    model: ModelRecord
    times: ModelTimesInfo
    races: ModelRaceInfo
    latest: ModelRace | None


@dataclass(frozen=True)
class ReportInfo:
    """Everything a report shows."""

    source: str  # the database, as the user knows it
    created_at: float  # unix seconds
    metric: Metric
    workloads: tuple[WorkloadReport, ...]
    models: tuple[ModelReport, ...] = ()

    @property
    def num_runs(self) -> int:
        return sum(len(w.runs) for w in self.workloads)


def select_runs(
    store: RecordStore, run_ids: Sequence[int] | None = None, *, latest: int | None = None
) -> list[RunInfo]:
    """The runs a report covers, oldest first: ``run_ids``, else the ``latest`` ones, else all.

    Raises:
        UnknownRunError: A run of ``run_ids`` is not in the store.
        ValueError: Both ``run_ids`` and ``latest`` were given, or ``latest`` is below 1.
    """
    if run_ids is not None and latest is not None:
        raise ValueError("give either run ids or a number of latest runs, not both")
    runs = sorted(store.runs(), key=lambda r: r.id)
    if run_ids is None:
        if latest is None:
            return runs
        if latest < 1:
            raise ValueError(f"latest must be at least 1 (got {latest})")
        return runs[-latest:]
    by_id = {r.id: r for r in runs}
    missing = [i for i in dict.fromkeys(run_ids) if i not in by_id]
    if missing:
        shown = ", ".join(map(str, missing))
        raise UnknownRunError(
            f"no run {shown} in {_where(store)} (`explorer runs` lists the runs)"
            if len(missing) == 1
            else f"no runs {shown} in {_where(store)} (`explorer runs` lists the runs)"
        )
    return [by_id[i] for i in sorted(set(run_ids))]


def collect_report(
    store: RecordStore,
    run_ids: Sequence[int] | None = None,
    *,
    latest: int | None = None,
    metric: Metric = "gflops",
    max_schedules: int = MAX_SCHEDULES,
    max_points: int = 2000,
    knobs: bool = True,
) -> ReportInfo:
    """Gather what a report of these runs shows (``select_runs`` picks them).

    Args:
        store: Where the runs are.
        run_ids, latest: Which runs (``select_runs``).
        metric: ``"gflops"`` or ``"latency_ms"`` for the convergence and comparison plots.
        max_schedules: The most best schedules shown per workload (distinct schedules, fastest
            first; each chosen run contributes its own best).
        max_points: Points per cost model in the predicted-vs-measured plot.
        knobs: Whether to compute the knob-effects plot (it builds the workload's knob space).
    """
    runs = select_runs(store, run_ids, latest=latest)
    groups: dict[tuple[str, str], list[RunInfo]] = {}
    for run in runs:
        groups.setdefault((run.workload.key(), run.target.key()), []).append(run)
    workloads = tuple(
        _workload_report(store, group, metric, max_schedules, max_points, knobs)
        for group in groups.values()
    )
    return ReportInfo(_where(store), time.time(), metric, workloads, _models(store, runs))


def _models(store: RecordStore, runs: Sequence[RunInfo]) -> tuple[ModelReport, ...]:
    """The models with a race, or with a run of the report (a tune's chunks)."""
    chosen = {r.id for r in runs}
    out = []
    for model in store.models():
        races = store.model_races(model.id)
        if not races and not any(r in chosen for r, _, _ in store.model_runs(model.id)):
            continue
        times = model_times_info(model, best_times(model, store))
        latest = races[-1] if races else None
        out.append(ModelReport(model, times, model_race_info(model, races), latest))
    return tuple(out)


def _workload_report(
    store: RecordStore,
    runs: list[RunInfo],
    metric: Metric,
    max_schedules: int,
    max_points: int,
    with_knobs: bool,
) -> WorkloadReport:
    workload, target = runs[0].workload, runs[0].target
    table = TrialTable.empty()
    reports = []
    for run in runs:
        rows = store.trial_rows(run_id=run.id)
        table = table.extend(rows)
        summary = summarize_run(run.id, rows)
        best = summary.best_trial_id
        reports.append(RunReport(run, summary, None if best is None else trial_name(rows, best)))
    curves = [run_curve(table, run) for run in runs]
    searches = [c for c in curves if c.run.strategy != MANUAL]
    knobs, note = _knobs(workload, target, table) if with_knobs else (None, None)
    return WorkloadReport(
        workload=workload,
        target=target,
        runs=tuple(reports),
        convergence=convergence_info(curves, metric=metric),
        comparison=strategy_comparison_info(searches, metric=metric),
        predicted=predicted_vs_measured_info(table, max_points=max_points),
        knobs=knobs,
        knobs_note=note,
        best=_best_schedules(store, workload, reports, max_schedules),
    )


def _knobs(
    workload: Workload, target: Target, table: TrialTable
) -> tuple[KnobEffectsInfo | None, str | None]:
    from explorer.space import KnobSpace

    try:
        space = KnobSpace.of(workload, target)
    except Exception as exc:  # noqa: BLE001 - TVM refused the workload: the other plots still work
        log.warning("no knob space for %s: %s", workload.key(), exc)
        return None, f"no knob space: {exc}"
    return knob_effects_info(table, space), None


def _best_schedules(
    store: RecordStore, workload: Workload, runs: Sequence[RunReport], limit: int
) -> tuple[BestSchedule, ...]:
    """The runs' best schedules, one per distinct schedule (runs that found the same one share
    it), fastest first, at most ``limit``."""
    found: dict[int, tuple[TrialRecord, list[RunReport]]] = {}  # trace hash -> first trial, runs
    names = {r.summary.best_trial_id: r.best_name or "" for r in runs}
    for r in runs:
        if r.summary.best_trial_id is None or r.summary.best_secs is None:
            continue
        trial = store.get_trial(r.summary.best_trial_id)
        key = trace_hash(trial.candidate.trace)
        first, best_of = found.setdefault(key, (trial, []))
        best_of.append(r)
        if trial.id < first.id:
            found[key] = (trial, best_of)
    order = sorted(found.values(), key=lambda tb: (_fastest(tb[1]), tb[0].id))
    flops = workload.flops()
    out = []
    for trial, best_of in order[:limit]:
        secs = _fastest(best_of)
        script, trace_py, error = _replay(trial.candidate)
        out.append(
            BestSchedule(
                trial_id=trial.id,
                name=names[trial.id],
                run_ids=tuple(r.run.id for r in best_of),
                strategies=tuple(dict.fromkeys(shown_strategy(r.run) for r in best_of)),
                secs=secs,
                gflops=flops / secs / 1e9 if flops and secs > 0 else None,
                is_baseline=has_mark(trial.candidate.decisions, BASELINE_MARK),
                script=script,
                trace_python=trace_py,
                trace_json=trial.candidate.trace,
                error=error,
                mix=None if error is not None else _mix(trial.candidate),
            )
        )
    return tuple(out)


def _mix(candidate: Candidate) -> CodeMix | None:
    """The instruction mix of a schedule whose trace was checked (``_replay``)."""
    code = generated_code(candidate)
    return code_mix(code.asm) if code.asm is not None else None


def _fastest(runs: Sequence[RunReport]) -> float:
    return min(r.summary.best_secs for r in runs if r.summary.best_secs is not None)


def _replay(candidate: Any) -> tuple[str | None, str | None, str | None]:
    """The TVMScript and Python trace of a stored schedule, as the editor shows them when the
    trial is opened: the trace is checked first (``explorer.session.check_trace``: replayed in
    an isolated process, so no stored trace can take this one down), then replayed here.

    No ``ScheduleSession`` is made: a report may be written from a worker thread, and sessions
    belong to the UI thread.
    """
    from explorer import _tvm
    from explorer.session import check_trace, trace_python

    workload = candidate.workload
    try:
        plain = check_trace(workload, candidate.trace)
        sch = _tvm.Schedule(workload.mod())
        _tvm.apply_trace_json(plain, sch)
        return str(sch.mod.script()), trace_python(sch.trace, workload), None
    except (ExplorerError, RuntimeError, ValueError, TypeError) as exc:  # TVM's, as data
        return None, None, str(exc)


def _where(store: RecordStore) -> str:
    path = getattr(store, "path", None)
    return str(path) if path is not None else type(store).__name__


def settings_text(settings: Mapping[str, Any]) -> str:
    """A run's settings (or environment) as sorted, indented JSON."""
    return json.dumps(dict(settings), indent=2, sort_keys=True, default=str)
