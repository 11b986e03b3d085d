"""The "vendor" path: TVM's own ``tune_tir``, streamed into our record store.

``tune_tir`` owns its loop (task scheduler, builder, runner), so it cannot be an ask/tell
strategy. ``run_metaschedule`` runs it unchanged, with two additions: the ``fast_build`` builder
(docs/tvm-notes.md, section 4: the default one re-imports every tensor intrinsic in each fresh
worker)
and a measure callback that stores every candidate, as it is measured, as a trial of one run in
our store. Because MetaSchedule ignores SIGINT, the same callback is how a run is stopped: it
raises, ``tune_tir`` aborts after the current batch, and what was stored stays.

Measurements here come from MetaSchedule's ``LocalRunner``, not from our measurer: this is the
reference to compare our ``evolutionary`` strategy (same algorithm, our measurer) against. That
runner never compares a kernel's output with a reference, so its timings are stored as
``UNCHECKED`` trials, which are never ranked as best until ``check_unchecked`` re-measures them.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from explorer import _tvm
from explorer.core import (
    UNCHECKED_MSG,
    Candidate,
    MeasureResult,
    NewTrial,
    RecordStore,
    RunInfo,
    TrialRecord,
)
from explorer.search._evolutionary import FAILED_RUN_SECS
from explorer.search._trace_matcher import TraceMatcher
from explorer.space import KnobSpace
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload


class _StopTuning(Exception):
    """Raised from the streaming callback to end ``tune_tir`` early."""

    def __init__(self, reason: str):
        super().__init__(f"stop requested ({reason})")
        self.reason = reason


def _make_streamer(
    *,
    store: RecordStore,
    run_id: int,
    workload: Workload,
    target: Target,
    matcher: TraceMatcher,
    should_stop: Callable[[], bool],
    deadline: float | None,
    on_batch: Callable[[list[TrialRecord]], None] | None,
) -> Any:
    # TVM is untyped: its classes are Any to mypy, which refuses subclassing them.
    @_tvm.derived_object
    class StreamToStore(_tvm.ms.measure_callback.PyMeasureCallback):  # type: ignore[misc]  # TVM is untyped: its base class is Any
        """Stores every measured candidate as a trial; raises to stop the tuning."""

        def __init__(self) -> None:
            self.num_trials = 0
            self.stopped_because: str | None = None

        def apply(
            self,
            task_scheduler: Any,
            task_id: int,
            measure_candidates: Sequence[Any],
            builder_results: Sequence[Any],
            runner_results: Sequence[Any],
        ) -> None:
            trials = [
                NewTrial(
                    Candidate(
                        workload=workload,
                        target=target,
                        trace=_tvm.trace_to_json(mc.sch.trace),
                        decisions=matcher.describe(mc.sch.trace),
                    ),
                    _result(br, rr, workload.flops(), target.num_cores),
                )
                for mc, br, rr in zip(
                    measure_candidates, builder_results, runner_results, strict=True
                )
            ]
            batch = store.add_trials(run_id, trials)
            self.num_trials += len(batch)
            if on_batch is not None:
                on_batch(batch)
            if should_stop():
                self.stopped_because = "cancelled"
            elif deadline is not None and time.monotonic() >= deadline:
                self.stopped_because = "time"
            if self.stopped_because is not None:
                raise _StopTuning(self.stopped_because)

    return StreamToStore()


def run_metaschedule(
    workload: Workload,
    target: Target,
    store: RecordStore,
    *,
    max_trials: int,
    num_trials_per_iter: int = 64,
    seed: int = 0,
    max_secs: float | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    on_batch: Callable[[list[TrialRecord]], None] | None = None,
    population_size: int = 512,
    genetic_num_iters: int = 4,
    number: int = 2,
    repeat: int = 3,
    min_repeat_ms: int = 50,
    enable_cpu_cache_flush: bool = False,
    num_tuning_cores: int | None = None,
    shipped: bool = False,
) -> RunInfo:
    """Tune with ``ms.tune_tir`` (evolutionary search + XGB) and store every trial in ``store``.

    The run is stored with strategy ``"metaschedule"``; its trials appear in commit order,
    failures included (MetaSchedule's ``1e10`` latencies become BUILD_ERROR/RUN_ERROR/TIMEOUT
    results without timings). Timed trials are ``UNCHECKED``: ``check_unchecked`` re-measures
    them against NumPy. ``should_stop`` and ``max_secs`` are checked after every
    MetaSchedule batch of ``num_trials_per_iter`` candidates.

    Args:
        workload: what to tune.
        target: where; ``target.num_cores`` is MetaSchedule's ``num-cores``.
        store: where the run and its trials go.
        max_trials: MetaSchedule's ``max_trials_global``.
        num_trials_per_iter: candidates per batch.
        seed: ``tune_tir``'s seed.
        max_secs: stop after the first batch that ends this many seconds after the start.
        should_stop: polled after each batch; ``True`` cancels the run.
        on_batch: called with each stored batch.
        population_size: evolutionary population.
        genetic_num_iters: generations per batch.
        number: runs per repeat (MetaSchedule ``EvaluatorConfig``).
        repeat: repeats, each a stored ``run_secs`` entry.
        min_repeat_ms: least duration of one repeat.
        enable_cpu_cache_flush: flush caches between repeats.
        num_tuning_cores: threads for search and builders (default: the target's cores).
        shipped: run ``tune_tir`` with TVM's own builder, runner and search strategy, exactly
            as it ships (the benchmark's reference for throughput); the arguments above that
            configure them are ignored then. The default builder re-imports every tensor
            intrinsic in each fresh worker, so it is several times slower.

    Returns:
        The finished run (``status`` ``"finished"``, ``"cancelled"`` or ``"failed"``). Even two
        trials of a tiny workload take about 10 s: ``tune_tir`` starts MetaSchedule's builder
        and runner processes.

    """
    _tvm.ensure_cpu_intrinsics()
    cores = num_tuning_cores or target.num_cores
    settings = {
        "max_trials": max_trials,
        "num_trials_per_iter": num_trials_per_iter,
        "seed": seed,
        "max_secs": max_secs,
        "population_size": population_size,
        "genetic_num_iters": genetic_num_iters,
        "number": number,
        "repeat": repeat,
        "min_repeat_ms": min_repeat_ms,
        "enable_cpu_cache_flush": enable_cpu_cache_flush,
        "shipped": shipped,
    }
    run = store.create_run(workload, target, "metaschedule", settings=settings)
    return _tune_into(store, run, settings, cores, should_stop, on_batch)


def _tune_into(
    store: RecordStore,
    run: RunInfo,
    settings: dict[str, Any],
    cores: int,
    should_stop: Callable[[], bool],
    on_batch: Callable[[list[TrialRecord]], None] | None,
) -> RunInfo:
    """``tune_tir`` streaming into ``run``, which ends finished, cancelled, interrupted (then
    the ``KeyboardInterrupt`` goes on) or failed."""
    workload, target, max_secs = run.workload, run.target, settings["max_secs"]
    streamer = _make_streamer(
        store=store,
        run_id=run.id,
        workload=workload,
        target=target,
        matcher=TraceMatcher(KnobSpace.of(workload, target)),
        should_stop=should_stop,
        deadline=None if max_secs is None else time.monotonic() + max_secs,
        on_batch=on_batch,
    )
    status = "failed"
    try:
        _tune_tir(workload, target, settings, cores, streamer)
        status = "finished"
    except KeyboardInterrupt:
        status = "interrupted"  # Ctrl-C or SIGTERM: the run stopped, it did not fail
        raise
    except Exception:
        # TVM re-raises the callback's exception as its own error type; ours left a mark.
        if streamer.stopped_because is None:
            raise
        status = "cancelled" if streamer.stopped_because == "cancelled" else "finished"
    finally:
        run = store.finish_run(run.id, status)
    return run


def _tune_tir(
    workload: Workload, target: Target, settings: dict[str, Any], cores: int, streamer: Any
) -> None:
    """One ``tune_tir`` with the run's ``settings``, every measured batch given to
    ``streamer`` (MetaSchedule's own database stays in memory: ours is the store)."""
    ms = _tvm.ms
    with (
        tempfile.TemporaryDirectory(prefix="explorer-ms-") as work_dir,
        _tvm.metaschedule_logging_guard(),
    ):
        ms.tune_tir(
            mod=workload.mod(),
            target=target.to_tvm(),
            work_dir=work_dir,
            max_trials_global=settings["max_trials"],
            num_trials_per_iter=settings["num_trials_per_iter"],
            database="memory",
            cost_model="xgb",
            measure_callbacks=ms.MeasureCallback.create("default") + [streamer],
            num_tuning_cores=cores,
            seed=settings["seed"],
            **_machinery(settings, cores),
        )


def _machinery(settings: dict[str, Any], cores: int) -> dict[str, Any]:
    """``tune_tir``'s builder, runner and search strategy for the run's ``settings``: none
    when it runs as shipped (its defaults: LocalBuilder, LocalRunner, ...)."""
    if settings["shipped"]:
        return {}
    ms = _tvm.ms
    return {
        "builder": ms.builder.LocalBuilder(f_build=_tvm.fast_build, max_workers=cores),
        "runner": ms.runner.LocalRunner(
            evaluator_config=ms.runner.EvaluatorConfig(
                number=settings["number"],
                repeat=settings["repeat"],
                min_repeat_ms=settings["min_repeat_ms"],
                enable_cpu_cache_flush=settings["enable_cpu_cache_flush"],
            )
        ),
        "strategy": ms.search_strategy.EvolutionarySearch(
            population_size=settings["population_size"],
            genetic_num_iters=settings["genetic_num_iters"],
        ),
    }


def _result(builder_result: Any, runner_result: Any, flops: int, threads: int) -> MeasureResult:
    if builder_result.error_msg:
        return MeasureResult(MeasureStatus.BUILD_ERROR, error_msg=str(builder_result.error_msg))
    if runner_result.error_msg:
        msg = str(runner_result.error_msg)
        status = MeasureStatus.TIMEOUT if "Timeout" in msg else MeasureStatus.RUN_ERROR
        return MeasureResult(status, error_msg=msg)
    run_secs = tuple(float(x) for x in runner_result.run_secs or ())
    if not run_secs or min(run_secs) >= FAILED_RUN_SECS:
        return MeasureResult(MeasureStatus.RUN_ERROR, error_msg="no timing from the runner")
    return MeasureResult(
        MeasureStatus.UNCHECKED,
        run_secs=run_secs,
        error_msg=UNCHECKED_MSG,
        flops=flops,
        num_threads=threads,
    )
