"""What a resume rebuilds and checks from a stored run: its strategy (``strategy_of``) and
that the arguments given are the run's own (``check_same_run``), kept apart so ``tuner.py``
stays about the loop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from explorer._tune_budget import RunBudget
from explorer.core import RunInfo, TrialRecord
from explorer.errors import SearchError
from explorer.measure import Candidate
from explorer.search import (
    STRATEGIES,
    SearchStrategy,
    is_object_setting,
    make_strategy,
    start_trial,
)
from explorer.target import Target
from explorer.workloads import Workload

PRIOR_RUNS = "prior_runs"
"""The settings key of a run's ``prior_runs`` (see ``Tuner.run``)."""


def prior_ids_of(run: RunInfo) -> list[int]:
    """The runs ``run`` was carried over from (``Tuner.run``'s ``prior_runs``)."""
    return [int(r) for r in run.settings.get(PRIOR_RUNS) or []]


def strategy_of(run: RunInfo, trials: Sequence[TrialRecord] = ()) -> SearchStrategy:
    """The strategy of a stored run, rebuilt from its settings (its hyper-parameters).

    Raises:
        SearchError: the run's strategy is not a registered one, or its stored settings do not
            build it (pass the instance to ``Tuner.resume`` then).
    """
    if run.strategy not in STRATEGIES:
        raise SearchError(
            f"run {run.id} used strategy {run.strategy!r}, which is not a registered strategy "
            f"({', '.join(sorted(STRATEGIES))}); it cannot be resumed by name"
        )
    accepted = set(STRATEGIES.parameters(run.strategy))
    params = {k: v for k, v in run.settings.items() if k in accepted and k not in RunBudget.KEYS}
    objects = sorted(k for k, v in params.items() if is_object_setting(v))
    if objects:
        raise SearchError(
            f"run {run.id} was given {' and '.join(objects)} as Python objects, which its "
            "record cannot rebuild; pass the strategy itself to Tuner.resume"
        )
    start = params.get("start")
    if isinstance(start, Mapping) and not {"sketch", "point"} <= set(start):
        # A hand-made start is stored as the run's reference trial, not in the settings: the
        # strategy gets it back exactly as the user gave it (a bare candidate).
        reference = start_trial(trials)
        if reference is not None:
            params["start"] = Candidate(run.workload, run.target, reference.candidate.trace)
    try:
        return make_strategy(run.strategy, **params)
    except (TypeError, ValueError) as exc:
        raise SearchError(
            f"run {run.id}: its stored settings do not rebuild strategy {run.strategy!r} ({exc})"
        ) from None


def check_same_run(
    run: RunInfo,
    workload: Workload,
    target: Target,
    strategy: SearchStrategy,
    max_trials: int,
    max_secs: float | None,
    seed: int,
    prior_runs: Sequence[int],
) -> None:
    """That a resume's arguments are ``run``'s own (``SearchError`` naming the first that is
    not): a run resumes under its own terms."""
    if run.workload != workload or run.target.key() != target.key():
        raise SearchError(
            f"run {run.id} tuned {run.workload.key()} on {run.target.key()}, not "
            f"{workload.key()} on {target.key()}; it cannot be resumed with these"
        )
    if strategy.name and run.strategy != strategy.name:
        raise SearchError(f"run {run.id} used strategy {run.strategy!r}, not {strategy.name!r}")
    budget = RunBudget.of(run)
    given = {"max_trials": max_trials, "max_secs": max_secs, "seed": seed}
    for name, value in given.items():
        if value != getattr(budget, name):
            raise SearchError(
                f"run {run.id} has {name}={getattr(budget, name)!r}, not {value!r}; a run "
                "resumes with its own settings (start a new run for others)"
            )
    carried = prior_ids_of(run)
    if list(prior_runs) != carried:
        raise SearchError(
            f"run {run.id} was carried over from runs {carried or 'none'}, not "
            f"{list(prior_runs) or 'none'}: resume it with its own prior runs"
        )
