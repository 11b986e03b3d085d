"""The ``SearchStrategy`` contract, checked offline against the shipped recording."""

from __future__ import annotations

import inspect
import itertools
import json
from collections.abc import Callable
from typing import Any, ClassVar, cast

import numpy as np
import pytest

from explorer.measure import Candidate, MeasureResult, ReplayMeasurer, trace_key
from explorer.search import SearchStrategy, is_start
from explorer.session import ScheduleSession
from explorer.space import DesignSpace, KnobSpace, nearest_point
from explorer.storage import RecordStore, TrialRecord, get_store
from explorer.target import Target
from explorer.testing import recordings
from explorer.tuner import Tuner, TuneResult
from explorer.types import MeasureStatus
from explorer.workloads import Workload


class SearchStrategyContract:
    """What the ``Tuner`` and the dashboards rely on from every strategy.

    Subclasses implement ``make_strategy`` (a fresh, unreset instance each call) and may set:

    * ``exhausts``: the strategy enumerates a tiny space completely when the budget allows
      (``False`` for strategies that stop by design: a converged descent, a fixed top-k);
    * ``stochastic``: different seeds give different proposals (``False`` for deterministic
      strategies).

    A strategy that declares ``capabilities.start`` must take ``start=`` and propose a hand-made
    schedule first (marked as the run's reference), then its nearest knob-space point; the run's
    answer is never slower than the start. One that declares ``capabilities.cost_models`` must
    store predictions named by the model it runs with (within ``prediction_trials``), and one
    that declares none must store none.

    Searches run against ``ReplayMeasurer``s over ``explorer.testing.recordings``: the tiny
    ``reduce_sum`` workload (every point recorded) and the 64^3 matmul (240 recorded points,
    anything else answers ``INVALID``, which is itself part of the contract: failures are data).
    """

    exhausts: ClassVar[bool] = True
    stochastic: ClassVar[bool] = True
    batch_size: ClassVar[int] = 4
    prediction_trials: ClassVar[int] = 16
    """Trials within which a strategy declaring a cost model stores a prediction from it."""

    def make_strategy(self) -> SearchStrategy:
        raise NotImplementedError("subclasses return a fresh strategy instance")

    # -- fixtures -----------------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def recording(cls, tmp_path_factory: pytest.TempPathFactory) -> RecordStore:
        return recordings.open_recording(tmp_path_factory.mktemp("recording"))

    @pytest.fixture(scope="class")
    @classmethod
    def target(cls, recording: RecordStore) -> Target:
        # The recording's own target: trace keys must match what the strategy proposes.
        return recordings.recorded_trials(recording, recordings.TINY)[0].candidate.target

    @pytest.fixture(scope="class")
    @classmethod
    def tiny_replay(cls, recording: RecordStore) -> ReplayMeasurer:
        return recordings.replay_measurer(recording, recordings.TINY)

    @pytest.fixture(scope="class")
    @classmethod
    def small_replay(cls, recording: RecordStore) -> ReplayMeasurer:
        return recordings.replay_measurer(recording, recordings.SMALL)

    def _tune(
        self,
        measurer: ReplayMeasurer | Callable[[Candidate], MeasureResult | None],
        workload: Workload,
        target: Target,
        *,
        max_trials: int,
        seed: int = 0,
        store: RecordStore | None = None,
        **kwargs: object,
    ) -> tuple[TuneResult, list[TrialRecord]]:
        if not isinstance(measurer, ReplayMeasurer):
            measurer = ReplayMeasurer(measurer)
        store = store or get_store(":memory:")
        result = Tuner(
            measurer=measurer, store=store, batch_size=self.batch_size, confirm_top=0
        ).run(workload, target, self.make_strategy(), max_trials=max_trials, seed=seed, **kwargs)  # type: ignore[arg-type]  # kwargs are the Tuner's own options, passed through
        # The search's trials: the run's baseline (the unscheduled program) is not one.
        return result, [t for t in store.trials(run_id=result.run.id) if not t.is_remeasure]

    # -- the contract -------------------------------------------------------------------------
    def test_ask_returns_at_most_n_and_never_repeats(
        self, target: Target, tiny_replay: ReplayMeasurer
    ) -> None:
        strategy = self.make_strategy()
        strategy.reset(DesignSpace.of(recordings.TINY, target), rng=np.random.default_rng(0))
        seen: set[str] = set()
        for i, n in enumerate(itertools.islice(itertools.cycle((1, 3, 5)), 12)):
            batch = strategy.ask(n)
            assert len(batch) <= n, f"ask({n}) returned {len(batch)} candidates"
            keys = [trace_key(c.trace) for c in batch]
            assert len(set(keys)) == len(keys), "a batch repeats a candidate"
            assert not seen & set(keys), "a candidate was proposed twice"
            assert all(c.workload == recordings.TINY for c in batch)
            seen |= set(keys)
            results = tiny_replay.measure(batch)
            strategy.tell(
                [
                    TrialRecord(10 * i + j, 1, 10 * i + j, c, r, {}, 0.0)
                    for j, (c, r) in enumerate(zip(batch, results, strict=True))
                ]
            )
            if not batch:
                assert strategy.ask(4) == [], "an exhausted strategy came back to life"
                break

    def test_settings_record_every_hyper_parameter_as_json(self) -> None:
        strategy = self.make_strategy()
        settings = strategy.settings()  # raises when one is not kept as a same-named attribute
        params = set(inspect.signature(type(strategy).__init__).parameters) - {"self", "start"}
        assert params <= set(settings), f"not recorded: {sorted(params - set(settings))}"
        assert json.loads(json.dumps(settings)) == settings

    def test_runs_dry_without_repeating_and_finds_the_recorded_best(
        self, target: Target, tiny_replay: ReplayMeasurer, recording: RecordStore
    ) -> None:
        result, trials = self._tune(tiny_replay, recordings.TINY, target, max_trials=200)
        keys = [trace_key(t.candidate.trace) for t in trials]
        recorded = recordings.recorded_trials(recording, recordings.TINY)
        assert result.stopped_because == "exhausted", "a strategy must run dry on a tiny space"
        assert len(set(keys)) == len(keys) <= len(recorded)
        assert all(t.status is MeasureStatus.OK for t in trials), "proposed an unrecorded point"
        if self.exhausts:
            assert len(trials) == len(recorded)
            best = min(t.median_secs for t in recorded if t.median_secs)
            assert result.best_secs == best

    def test_failed_trials_are_data_and_the_search_goes_on(
        self, target: Target, tiny_replay: ReplayMeasurer
    ) -> None:
        def every_other_fails(cand: Candidate) -> MeasureResult | None:
            # A deterministic half of the points crash (a hash() would change between runs).
            if sum(map(ord, trace_key(cand.trace))) % 2 == 0:
                return MeasureResult(MeasureStatus.RUN_ERROR, error_msg="injected crash")
            return tiny_replay.measure([cand])[0]

        result, trials = self._tune(every_other_fails, recordings.TINY, target, max_trials=12)
        assert any(t.status is MeasureStatus.RUN_ERROR for t in trials)
        assert len({trace_key(t.candidate.trace) for t in trials}) == len(trials)
        if result.stopped_because != "exhausted":
            assert len(trials) == 12, "failures must not end a search early"

    def test_a_seed_reproduces_the_search(
        self, target: Target, small_replay: ReplayMeasurer
    ) -> None:
        def run(seed: int) -> list[str]:
            _, trials = self._tune(small_replay, recordings.SMALL, target, max_trials=8, seed=seed)
            return [trace_key(t.candidate.trace) for t in trials]

        first = run(3)
        assert first == run(3), "the same seed must give the same proposals"
        if self.stochastic:
            assert first != run(4), "a different seed gave the same proposals"

    def test_cancel_between_batches_keeps_what_was_measured(
        self, target: Target, small_replay: ReplayMeasurer
    ) -> None:
        asked: list[int] = []

        def after_one_batch() -> bool:
            asked.append(1)
            return len(asked) > 1

        result, trials = self._tune(
            small_replay, recordings.SMALL, target, max_trials=16, should_stop=after_one_batch
        )
        assert result.stopped_because == "cancelled" and result.run.status == "cancelled"
        assert 1 <= len(trials) <= self.batch_size

    def test_resume_continues_without_measuring_anything_twice(
        self, target: Target, small_replay: ReplayMeasurer
    ) -> None:
        store = get_store(":memory:")
        asked: list[int] = []

        def after_one_batch() -> bool:
            asked.append(1)
            return len(asked) > 1

        first, _ = self._tune(
            small_replay,
            recordings.SMALL,
            target,
            max_trials=12,
            store=store,
            should_stop=after_one_batch,
        )
        assert first.stopped_because == "cancelled"
        resumed, trials = self._tune(
            small_replay,
            recordings.SMALL,
            target,
            max_trials=12,
            store=store,
            resume_run_id=first.run.id,
        )
        keys = [trace_key(t.candidate.trace) for t in trials]
        assert resumed.run.id == first.run.id and first.num_trials < len(trials) <= 12
        assert len(set(keys)) == len(keys), "a resumed search measured a point twice"

    def test_a_start_is_measured_first_and_the_answer_is_never_slower(
        self, target: Target, small_replay: ReplayMeasurer
    ) -> None:
        strategy = self.make_strategy()
        takes_start = "start" in inspect.signature(type(strategy).__init__).parameters
        assert strategy.capabilities.start == takes_start, "capabilities.start must match start="
        if not strategy.capabilities.start:
            return
        session = ScheduleSession(recordings.SMALL, target)
        session.apply("split", loop="i", factors=[None, 8])
        session.apply("split", loop="j", factors=[None, 16])
        session.apply("reorder", loops=["i_0", "j_0", "k", "i_1", "j_1"])
        session.apply("vectorize", loop="j_1")
        session.apply("parallel", loop="i_0")
        mine = trace_key(session.candidate().trace)
        knobs = KnobSpace.of(recordings.SMALL, target)
        nearest = nearest_point(knobs, session.candidate()).point

        for start_secs in (1e-9, 10.0):  # the fastest schedule of all, then the slowest

            def timed(cand: Candidate, secs: float = start_secs) -> MeasureResult | None:
                if trace_key(cand.trace) == mine:  # the hand-made schedule is not recorded
                    return MeasureResult(MeasureStatus.OK, run_secs=(secs,) * 3)
                return small_replay.measure([cand])[0]

            store = get_store(":memory:")
            measurer = ReplayMeasurer(timed)
            given = self.make_strategy()
            cast(Any, given).start = session.candidate()  # hyper-parameters are stored verbatim
            result = Tuner(measurer=measurer, store=store, batch_size=self.batch_size).run(
                recordings.SMALL, target, given, max_trials=12
            )
            trials = [t for t in store.trials(run_id=result.run.id) if not t.is_remeasure]
            assert is_start(trials[0].candidate) and trace_key(trials[0].candidate.trace) == mine
            assert knobs.point_of_candidate(trials[1].candidate) == nearest, (
                "the second proposal must be the start's nearest point"
            )
            assert result.start is not None and result.start.id == trials[0].id
            assert result.best is not None and result.best_secs is not None
            assert result.start_secs is not None and result.best_secs <= result.start_secs
            others = [t for t in trials if trace_key(t.candidate.trace) != mine]
            beaten = start_secs > 1 and any(t.result.is_ok for t in others)
            assert result.best_is_start == (not beaten)

    def test_predictions_are_named_by_the_declared_cost_model(
        self, target: Target, tiny_replay: ReplayMeasurer
    ) -> None:
        """Run with each of ``capabilities.cost_models`` in turn, the strategy stores
        predictions, all named by that model; a strategy that declares none stores none."""
        declared = self.make_strategy().capabilities.cost_models
        for model in declared or (None,):
            strategy = self.make_strategy()
            if model is not None:
                chosen = type(strategy).cost_model_arguments(model)
                for name, value in chosen.items():  # hyper-parameters are stored verbatim
                    setattr(strategy, name, value)
            store = get_store(":memory:")
            result = Tuner(
                measurer=tiny_replay, store=store, batch_size=self.batch_size, confirm_top=0
            ).run(recordings.TINY, target, strategy, max_trials=self.prediction_trials)
            named = {n for t in store.trials(run_id=result.run.id) for n in t.predicted}
            expected = set() if model is None else {model}
            assert named == expected, (
                f"run with cost model {model!r}, predictions named {sorted(named)}: "
                f"capabilities.cost_models ({declared}) do not match what the strategy does"
            )

    def test_a_searched_record_opens_in_a_session(
        self, target: Target, small_replay: ReplayMeasurer
    ) -> None:
        result, trials = self._tune(small_replay, recordings.SMALL, target, max_trials=4)
        record = result.best or trials[0]
        session = ScheduleSession(record.candidate.workload, record.candidate.target)
        session.load_trace(record.candidate.trace)
        reopened = session.candidate()
        assert small_replay.measure([reopened])[0].status is record.status
