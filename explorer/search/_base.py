"""The ask/tell contract every search strategy implements."""

from __future__ import annotations

import abc
import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from explorer.core import Candidate, RecordStore, TrialRecord
from explorer.search._start import start_setting
from explorer.space import DesignSpace
from explorer.types import JSON


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a strategy can be given besides its hyper-parameters, declared by the class
    (``SearchStrategy.capabilities``) and read by the UI and the command line alike.

    Attributes:
        start: whether it takes ``start=`` (a schedule to start from: ``session.candidate()``,
            a record's candidate or a knob-space ``Point``), measured first as the run's
            reference (``explorer.search._start``).
        cost_models: the ``COST_MODELS`` names it can run with, its default first; ``()`` when
            it uses no cost model. Its stored predictions are named by the one it runs with;
            ``make_strategy(name, cost_model=...)`` picks one (``cost_model_arguments``).
        transfer: whether it takes ``transfer_from="auto"``: its model learns from the record
            store's trials of other workloads on the same target before its first round
            (``explorer.search._transfer``).

    No strategy needs a particular batch size: every one answers ``ask(n)`` for any ``n``
    (hyper-parameters given as ``"auto"`` scale to the trial budget instead).

    Example:
        >>> from explorer.search import capabilities
        >>> capabilities("autotvm")
        Capabilities(start=True, cost_models=('xgb-rank', 'xgb-reg'), transfer=True)
        >>> capabilities("autotvm").default_cost_model
        'xgb-rank'
        >>> capabilities("random").takes_cost_model
        False
    """

    start: bool = False
    cost_models: tuple[str, ...] = ()
    transfer: bool = False

    @property
    def takes_cost_model(self) -> bool:
        """Whether it runs with a cost model at all."""
        return bool(self.cost_models)

    @property
    def default_cost_model(self) -> str | None:
        """The cost model it runs with unless told otherwise (``None``: none)."""
        return self.cost_models[0] if self.cost_models else None


class SearchStrategy(abc.ABC):
    """Proposes candidates in batches and learns from their measurements.

    Contract (the ``Tuner`` relies on it; ``explorer.testing`` checks it):
        * ``reset`` is called once before the first ``ask``, with the space, a seeded generator,
          the trials already stored for this run (empty unless resuming), the record store
          (``None`` outside a Tuner), where strategies that learn across runs find other records,
          and the run's trial budget (``None``: unknown), which hyper-parameters given as
          ``"auto"`` scale to (``scaled``); ``settings()`` then records the values used.
          A strategy must not propose a point it was told about, and must derive all randomness
          from ``rng``, so a fixed seed reproduces the same proposals.
        * ``ask(n)`` returns at most ``n`` new candidates; ``[]`` means the strategy has nothing
          left to propose (space exhausted or converged).
        * ``tell(records)`` receives the stored trials of the last batch, failures included, in the
          order the candidates were asked.
        * Constructor arguments are keyword-only hyper-parameters stored verbatim; ``settings()``
          returns them for the run's record.
        * What it can be given besides its hyper-parameters is declared in ``capabilities``
          (never discovered from its signature): a strategy with ``Capabilities(start=True)``
          takes a keyword ``start`` (a ``Candidate``, e.g. ``session.candidate()``, or a
          knob-space ``Point``) and proposes, before anything else, the user's schedule marked
          as the run's reference and its nearest point (``explorer.search._start``), which it
          then starts from; one with ``cost_models`` names its predictions by the model it runs
          with, chosen through ``cost_model_arguments``.
    """

    name: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    """What the strategy takes besides its hyper-parameters (the UI and the CLI read this)."""
    on_working: Callable[[str], None] | None = None
    """Set by whoever shows progress (the command line's bar): told, in a few words, what an
    ``ask`` that takes long is doing before it measures anything (``static`` scores about a
    thousand candidates with its model first: minutes on 2 cores). Never required."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "accepts_start" in cls.__dict__:  # the older spelling: one declaration only
            raise TypeError(
                f"{cls.__name__}: declare capabilities = Capabilities(start=True) instead of "
                "accepts_start"
            )

    @classmethod
    def cost_model_arguments(cls, cost_model: str) -> dict[str, JSON]:
        """The constructor arguments that make the strategy run with ``cost_model``, one of
        ``capabilities.cost_models`` (default: none, for a strategy with one model).

        ``make_strategy(name, cost_model=...)`` checks the name against the declaration first.
        """
        return {}

    def reset(
        self,
        space: DesignSpace,
        *,
        rng: np.random.Generator,
        history: Sequence[TrialRecord] = (),
        store: RecordStore | None = None,
        budget: int | None = None,
    ) -> None:
        self.space = space
        self.rng = rng
        self.record_store = store
        self.trial_budget_ = budget
        self.resolved_: dict[str, JSON] = {}
        self.tell(self._start(list(history)))

    def _working(self, what: str) -> None:
        if self.on_working is not None:
            self.on_working(what)

    def _start(self, history: list[TrialRecord]) -> Sequence[TrialRecord]:
        """Build the per-run state; ``reset`` calls it once ``space``, ``rng`` and
        ``record_store`` are set, then tells the strategy what it returns (the history, reordered
        or filtered where a strategy needs to; default: unchanged)."""
        return history

    @abc.abstractmethod
    def ask(self, n: int) -> list[Candidate]:
        """Up to ``n`` candidates not proposed before; ``[]`` when exhausted."""

    def tell(self, records: Sequence[TrialRecord]) -> None:  # noqa: B027  (optional hook)
        """Learn from measured trials (default: nothing)."""

    def predictions(self, candidates: Sequence[Candidate]) -> list[dict[str, float]]:
        """What the strategy's cost model(s) predicted for candidates it just proposed, by model
        name, so every prediction is stored beside the measurement (default: none)."""
        return [{} for _ in candidates]

    def settings(self) -> dict[str, JSON]:
        """The constructor's hyper-parameters, read back from same-named attributes: every
        one of them, a value JSON cannot hold (a cost model object, a list of workloads) as
        ``{"object": "<its type>"}`` (``is_object_setting``), which a run resumed by name then
        refuses to rebuild.

        Raises:
            TypeError: a hyper-parameter has no same-named attribute (the strategy breaks the
                contract above).
        """
        params = inspect.signature(type(self).__init__).parameters
        out: dict[str, JSON] = {}
        for name in params:
            if name in ("self", "start"):
                continue
            if not hasattr(self, name):
                raise TypeError(
                    f"{type(self).__name__}: hyper-parameter {name!r} is not kept as the "
                    f"attribute self.{name}, so its runs could not record it"
                )
            value = getattr(self, name)
            out[name] = value if _is_jsonable(value) else {"object": type(value).__name__}
        if self.capabilities.start and hasattr(self, "start"):
            # A schedule is not a setting; the run's trial marked "start" holds it.
            out["start"] = start_setting(self.start)
        # What an "auto" setting came to for this run: a resumed run rebuilt from its settings
        # uses exactly these values.
        out.update(getattr(self, "resolved_", {}))
        return out

    def _scaled(
        self,
        name: str,
        *,
        default: int,
        share: float = 0.25,
        minimum: int = 4,
        budget: int | None = None,
    ) -> int:
        """The hyper-parameter ``name`` for this run (``scaled`` of its value and the run's
        budget, or ``budget`` when given: a phase's share), recorded in ``settings()``; call it
        from ``_start``."""
        budget = self.trial_budget_ if budget is None else budget
        value = scaled(getattr(self, name), budget, default=default, share=share, minimum=minimum)
        self.resolved_[name] = value
        return value


AUTO = "auto"
"""A hyper-parameter's value meaning "scaled to the run's trial budget" (``scaled``)."""


def scaled(
    value: int | str,
    budget: int | None,
    *,
    default: int,
    share: float = 0.25,
    minimum: int = 4,
) -> int:
    """``value``, or for ``"auto"``: ``share`` of the trial ``budget``, at least ``minimum`` and
    at most ``default`` (the paper's value, also used when the budget is unknown).

    The papers' batch sizes (AutoTVM's plan of 64, MetaSchedule's rounds of 64 and warm-up of
    100) assume thousands of trials; inside a budget of 16 or 64 their model would never be
    fitted, and the search would draw random points only.

    Example:
        >>> [scaled("auto", budget, default=64) for budget in (16, 64, 999, None)]
        [4, 16, 64, 64]
    """
    if value != AUTO:
        return int(value)
    if budget is None:
        return default
    return max(minimum, min(default, int(budget * share)))


def check_scaled(owner: str, name: str, value: object) -> None:
    """Refuse a hyper-parameter that is neither a whole number >= 1 nor ``"auto"``."""
    ok = value == AUTO or (
        isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 1
    )
    if not ok:
        raise ValueError(f"{owner}: {name} must be a whole number >= 1 or 'auto' (got {value!r})")


def is_object_setting(value: object) -> bool:
    """Whether a stored setting stands for a Python object its run was given (``settings``)."""
    return isinstance(value, dict) and set(value) == {"object"}


def _is_jsonable(value: Any) -> bool:
    """Whether ``value`` can be stored as a run setting (items of containers included: a list
    of ``Workload``s is a hyper-parameter but not a setting)."""
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return False
    return True
