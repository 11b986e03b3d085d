"""Warm a record database up for transfer learning: random schedules of the catalog's presets,
measured with the usual protocol and stored as ordinary runs (TenSet's recipe, at the scale of
one machine and a few minutes).

A model-guided strategy given ``transfer_from="auto"`` (``explorer tune --transfer``) then
learns from these trials before it measures anything of its own workload.

The database is the only state: each run goes to the preset with the fewest trials on the
target so far (the catalog's order breaks ties), told the preset's earlier runs so that it
measures schedules they did not: an interrupted or finished pretraining started again goes on
where it stopped. Runs are ordinary ``random`` runs: ``explorer runs`` lists them, and a
stopped one is kept with every trial it measured.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from explorer._tune_budget import check_int
from explorer.core import RecordStore
from explorer.errors import ExplorerError
from explorer.measure import Measurer
from explorer.target import Target
from explorer.tuner import TuneProgress, Tuner
from explorer.workloads import get_workload, presets

TRIALS_PER_RUN = 16
"""Trials of one preset before the next one's turn: enough for one preset's run to reach
several sketches, few enough that a short pretraining still covers many presets."""


@dataclass(frozen=True)
class PretrainProgress:
    """Where a pretraining stands, told after every measured batch.

    Attributes:
        elapsed_secs: since it started.
        budget_secs: its time budget.
        preset: the preset being measured now.
        run_id: that preset's run.
        trials: trials this pretraining has stored so far, in all its runs.
    """

    elapsed_secs: float
    budget_secs: float
    preset: str
    run_id: int | None
    trials: int


@dataclass(frozen=True)
class PretrainResult:
    """What a pretraining stored.

    Attributes:
        runs: the runs it made, in order, each as (preset, run id, trials stored).
        trials: trials it stored in all.
        why_stopped: ``"time budget reached"``, ``"stopped"`` (``should_stop``), or that every
            preset has its trials (or, for a preset with a small space, all its schedules
            measured).
        covered: trials the database now holds of each preset on the target.
    """

    runs: tuple[tuple[str, int, int], ...]
    trials: int
    why_stopped: str
    covered: dict[str, int]


def pretrain_presets(only: Sequence[str] = (), skip: Sequence[str] = ()) -> list[str]:
    """The catalog's presets to pretrain on, in catalog order: ``only`` these (default: all),
    without ``skip`` (held out, for instance, to test transfer on them).

    Raises:
        ExplorerError: a name that is no preset, or nothing left.
    """
    known = list(presets())
    unknown = sorted({*only, *skip} - set(known))
    if unknown:
        raise ExplorerError(
            f"no preset named {', '.join(unknown)} (see `explorer workloads`; presets are "
            f"{', '.join(known)})"
        )
    chosen = [p for p in known if (not only or p in only) and p not in skip]
    if not chosen:
        raise ExplorerError("no preset left to pretrain on (every one is skipped)")
    return chosen


def coverage(store: RecordStore, target: Target, names: Sequence[str]) -> dict[str, int]:
    """Trials (re-measurements aside) the store holds of each preset on ``target``."""
    out = {}
    for name in names:
        rows = store.trial_rows(workload=get_workload(name), target=target)
        out[name] = sum(not r.is_remeasure for r in rows)
    return out


def pretrain(
    store: RecordStore,
    measurer: Measurer,
    target: Target,
    *,
    seconds: float,
    names: Sequence[str] | None = None,
    per_preset: int | None = None,
    trials_per_run: int = TRIALS_PER_RUN,
    seed: int = 0,
    on_progress: Callable[[PretrainProgress], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> PretrainResult:
    """Measure random schedules of presets until ``seconds`` pass (or every preset has
    ``per_preset`` trials), the least covered preset first.

    Args:
        store, measurer, target: where trials go, what measures them, for which target.
        seconds: the time budget (a run stops at the deadline with its trials; a batch being
            measured then, or a run's first measurement of its unscheduled program, finishes).
        names: the presets (``pretrain_presets``); default: all of them. An unknown name is
            refused (``ExplorerError``).
        per_preset: stop once every preset holds this many trials on the target.
        trials_per_run: trials of one preset's run before the next preset's turn.
        seed: added to each run's seed (the preset's trial count), for another draw.

    A ``KeyboardInterrupt`` ends the current run as ``interrupted`` (kept, with its trials) and
    propagates; everything measured is stored.
    """
    names = _checked(seconds, names, per_preset, trials_per_run)
    start = time.monotonic()
    runs: list[tuple[str, int, int]] = []
    tuner = Tuner(measurer=measurer, store=store, confirm_top=0)
    why = "time budget reached"
    exhausted: set[str] = set()  # presets whose every schedule a run has measured
    while True:
        left = seconds - (time.monotonic() - start)
        if should_stop():
            why = "stopped"
            break
        if left <= 0:
            break
        covered = coverage(store, target, names)
        name, why_none = _least_covered(names, covered, exhausted, per_preset)
        if name is None:
            why = why_none
            break
        trials = trials_per_run if per_preset is None else per_preset - covered[name]
        done_before = sum(t for _, _, t in runs)

        def progress(p: TuneProgress, name: str = name, before: int = done_before) -> None:
            elapsed, done = time.monotonic() - start, before + p.num_trials
            if on_progress is not None:
                on_progress(PretrainProgress(elapsed, seconds, name, tuner.run_id, done))

        workload = get_workload(name)
        result = tuner.run(
            workload,
            target,
            "random",
            max_trials=min(trials, trials_per_run),
            max_secs=left,
            seed=seed + covered[name],
            on_progress=progress,
            should_stop=should_stop,
            # what earlier runs measured is not proposed again
            prior_runs=[r.id for r in store.runs(workload=workload, target=target)],
        )
        runs.append((name, result.run.id, result.num_trials))
        if result.stopped_because == "exhausted":  # a small space: every point measured
            exhausted.add(name)
        elif result.stopped_because == "cancelled":
            why = "stopped"
            break
        elif result.stopped_because == "time":
            break
    return PretrainResult(
        tuple(runs), sum(t for _, _, t in runs), why, coverage(store, target, names)
    )


def _checked(
    seconds: float, names: Sequence[str] | None, per_preset: int | None, trials_per_run: int
) -> list[str]:
    """``pretrain``'s arguments checked; the presets, in the catalog's order."""
    if not (isinstance(seconds, int | float) and seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"pretrain: seconds must be > 0 and finite (got {seconds!r})")
    check_int("pretrain trials_per_run", trials_per_run, minimum=1)
    if per_preset is not None:
        check_int("pretrain per_preset", per_preset, minimum=1)
    if names is not None and not list(names):
        raise ExplorerError("pretrain: no preset given (names=None pretrains on every one)")
    return pretrain_presets(only=list(names or ()))


def _least_covered(
    names: Sequence[str], covered: dict[str, int], exhausted: set[str], per_preset: int | None
) -> tuple[str | None, str]:
    """The least covered preset still wanting trials (the first in the catalog on ties), or
    ``None`` and why none is left."""
    wanting = [
        n for n in names if n not in exhausted and (per_preset is None or covered[n] < per_preset)
    ]
    if wanting:
        return min(wanting, key=lambda n: covered[n]), ""
    why = f"every preset has {per_preset} trials" if per_preset else ""
    if exhausted:
        why += " or all its schedules measured" if why else "every schedule measured"
    return None, why
