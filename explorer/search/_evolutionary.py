"""MetaSchedule's evolutionary search (Ansor's successor) driven step by step through ask/tell.

The algorithm is TVM's own: a ``tvm.s_tir.meta_schedule`` ``EvolutionarySearch`` with its
``XGBModel`` and an in-memory MetaSchedule database. Only the measuring is ours: every candidate
goes through the ``Tuner``'s measurer and into our store, so it obeys budgets, cancellation and
resumption and shows in the same dashboards as every other strategy.

Per MetaSchedule round this reproduces what ``TaskSchedulerNode::Tune``/``JoinRunningTask`` do
(``src/s_tir/meta_schedule/task_scheduler/task_scheduler.cc``)::

    candidates = strategy.generate_measure_candidates()      # None: the search gave up
    ... build and run them ...                               # here: ask -> Tuner -> tell
    strategy.notify_runner_results(candidates, results)
    AddToDatabase:    database.commit_tuning_record(...)     # failures stored as [1e10]
    UpdateCostModel:  cost_model.update(ctx, kept, results)  # build failures left out

A round holds ``num_trials_per_iter`` candidates; the Tuner may take them a few at a time, and the
round is closed (steps above) once all of them are told.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.core import (
    TIMING_GATE,
    Candidate,
    MeasureResult,
    TrialRecord,
    interrupts_held,
    trace_key,
)
from explorer.errors import ExplorerError, SearchError
from explorer.search._base import AUTO, Capabilities, SearchStrategy, check_scaled, scaled
from explorer.search._feature_cache import cached_per_store_feature
from explorer.search._rounds import carried_slots, population_for
from explorer.search._start import StartPlan, first_candidates, is_hand_start, plan_start
from explorer.search._trace_matcher import TraceMatcher, replay
from explorer.search._transfer import by_workload, check_transfer_from, transfer_records
from explorer.space import KnobSpace, Point
from explorer.types import MeasureStatus

log = logging.getLogger(__name__)

PREDICTION_NAME = "metaschedule-xgb"
"""The key under which MetaSchedule's XGB prediction is stored with each trial."""

# MetaSchedule's AddToDatabase stores a failed candidate with this latency (add_to_database.cc).
FAILED_RUN_SECS = 1e10
# Bigger than any budget; the Tuner, not MetaSchedule, decides when to stop.
_UNBOUNDED_TRIALS = 1 << 30
# Build failures never reach MetaSchedule's cost model (update_cost_model.cc prunes them).
_BUILD_FAILURES = (MeasureStatus.BUILD_ERROR, MeasureStatus.INVALID)


class EvolutionarySearch(SearchStrategy):
    """TVM MetaSchedule's ``EvolutionarySearch`` + ``XGBModel``, measured by our Tuner.

    The hyper-parameters are MetaSchedule's, with its defaults, except the three ``"auto"`` ones,
    which scale its round size, warm-up and population to the run's budget in MetaSchedule's
    proportions.

    Args:
        population_size: traces per generation. ``"auto"``: 8 per candidate of a round
            (MetaSchedule's 512 for its rounds of 64), at least 64 and at most 512. The
            evolution's cost grows with the population, and a budget cut into small rounds runs
            it once per round: with 512 at every round of 16, a 64-trial run evolved four times
            what ``tune_tir`` evolves for its one round of 64, and the search ran at a third of
            its throughput.
        init_measured_ratio: share of the initial population taken from the best measured ones.
        init_min_unmeasured: fewest fresh random traces an initial population may have.
        max_fail_count: failed initial samplings before MetaSchedule gives up.
        genetic_num_iters: generations per round.
        genetic_mutate_prob: probability of mutating a selected trace.
        genetic_max_fail_count: retries to mutate one trace.
        eps_greedy: share of each round drawn from fresh random traces.
        num_trials_per_iter: candidates per MetaSchedule round; the cost model is retrained once
            a whole round is measured (MetaSchedule's ``tune_tir`` uses 64). ``"auto"``: a
            quarter of the run's trial budget, between 4 and 64; for a run told earlier trials
            (a model tune's later chunk), a quarter of the budget and those, at most the
            budget.
        num_warmup_samples: measurements before the XGB model's predictions replace random ones
            (MetaSchedule: 100). ``"auto"``: a quarter of the budget, between 4 and 100. With
            MetaSchedule's own values a run of 64 trials never uses its model; the run's
            settings record the numbers used.
        num_threads: threads for MetaSchedule's sampling and XGBoost. TVM splits work between
            threads dynamically, so proposals are reproducible under a seed only with 1.
        max_empty_rounds: consecutive rounds of MetaSchedule without a new candidate after which
            a round of the design space's random points, the cost model's best first, is
            measured instead (``num_random_rounds_`` counts them, ``num_empty_rounds_`` the
            rounds without one); ``ask`` gives up when that finds nothing new either.
        transfer_from: ``None`` or ``"auto"``: before the first round, the XGB model learns
            from the record store's trials of *other* workloads on the same target
            (``explorer.search._transfer``), as ``tune_relax`` shares one model between tasks.
            Each workload's latencies are its own group (MetaSchedule normalises labels per
            workload), the warm-up counts them, so the first round is already ranked by the
            model, and the model then retrains on everything after every round (TVM's
            adaptive training would wait until the data grew by a fifth).
        start: a schedule to start from (``session.candidate()``, a record's candidate or a
            ``Point``). It is measured first as the run's reference, then its nearest knob-space
            point; that point's measurement goes into MetaSchedule's database before the first
            round, so the initial population (``init_measured_ratio`` of it comes from the best
            measured traces) is seeded with it and evolves from it.

    Within a recording (a space ``within`` recorded points), the search starts from a random
    sample of the recording and evolves measured traces by tile-size and unroll mutations only:
    the knob space, so a recording, keeps each sketch's compute locations (docs/replay.md).

    Determinism: the TuneContext's ``rand_state`` comes from the run's generator. XGBModel draws
    its pre-warm-up predictions from NumPy's *global* generator; it is seeded from ours for the
    duration of each call and restored afterwards, so a seed fixes the proposals (with
    ``num_threads=1``).

    Example:
        >>> Tuner(measurer=m, store=s).run(w, t, "evolutionary", max_trials=64)  # doctest: +SKIP
    """

    name = "evolutionary"
    # MetaSchedule's own XGBModel, driven through TVM's API: the one model it runs with.
    capabilities = Capabilities(start=True, cost_models=(PREDICTION_NAME,), transfer=True)

    def __init__(
        self,
        *,
        population_size: int | str = AUTO,
        init_measured_ratio: float = 0.2,
        init_min_unmeasured: int = 50,
        max_fail_count: int = 5,
        genetic_num_iters: int = 4,
        genetic_mutate_prob: float = 0.85,
        genetic_max_fail_count: int = 10,
        eps_greedy: float = 0.05,
        num_trials_per_iter: int | str = AUTO,
        num_warmup_samples: int | str = AUTO,
        num_threads: int = 1,
        max_empty_rounds: int = 5,
        transfer_from: str | None = None,
        start: Candidate | Point | None = None,
    ):
        check_scaled("EvolutionarySearch", "population_size", population_size)
        check_transfer_from("EvolutionarySearch", transfer_from)
        check_scaled("EvolutionarySearch", "num_trials_per_iter", num_trials_per_iter)
        check_scaled("EvolutionarySearch", "num_warmup_samples", num_warmup_samples)
        self.population_size = population_size
        self.init_measured_ratio = init_measured_ratio
        self.init_min_unmeasured = init_min_unmeasured
        self.max_fail_count = max_fail_count
        self.genetic_num_iters = genetic_num_iters
        self.genetic_mutate_prob = genetic_mutate_prob
        self.genetic_max_fail_count = genetic_max_fail_count
        self.eps_greedy = eps_greedy
        self.num_trials_per_iter = num_trials_per_iter
        self.num_warmup_samples = num_warmup_samples
        self.num_threads = num_threads
        self.max_empty_rounds = max_empty_rounds
        self.transfer_from = transfer_from
        self.start = start

    # -- lifecycle ----------------------------------------------------------------------------
    def _start(self, history: list[TrialRecord]) -> list[TrialRecord]:
        ms = _tvm.ms
        _tvm.ensure_cpu_intrinsics()
        per_iter = self._round_size(len(history))
        warmup = self._scaled("num_warmup_samples", default=100)
        population = population_for(self.population_size, per_iter)
        self.resolved_["population_size"] = population
        space = self.space
        workload = space.workload
        self.knob_space_ = KnobSpace(space)
        self.matcher_ = TraceMatcher(self.knob_space_)
        self._mod = workload.mod()
        pooled = self.knob_space_.pool is not None
        self.context_ = self._tune_context(population, pooled)
        self.database_ = ms.database.MemoryDatabase()
        self.cost_model_ = ms.cost_model.XGBModel(
            extractor=cached_per_store_feature(),
            num_warmup_samples=warmup,
            num_tuning_cores=self.num_threads,
            adaptive_training=self.transfer_from is None,
        )
        if self.transfer_from == "auto":
            self._learn_transfer()
        # Step 1. The sketches are the DesignSpace's, so every strategy searches the same space;
        # each listed as often as its share of valid random draws asks (``sampling_copies``).
        copies = (1,) * space.num_sketches if pooled else space.sampling_copies
        sketches = [
            self._sketch_schedule(k) for k in range(space.num_sketches) for _ in range(copies[k])
        ]
        self._token = self.database_.commit_workload(self._mod)
        self._args_info = ms.arg_info.ArgInfo.from_prim_func(self._mod["main"])
        self._per_iter = per_iter
        self.context_.pre_tuning(
            _UNBOUNDED_TRIALS,
            per_iter + carried_slots(len(history), per_iter, population, self.eps_greedy),
            sketches,
            self.database_,
            self.cost_model_,
        )
        self._seen: set[str] = set()  # trace keys proposed or told
        self._seen_points: set[Point] = set()  # their knob points: a point has several traces
        self._predicted: dict[str, float] = {}
        self._round: dict[str, Any] = {}  # key -> MS candidate, this round (asked or pending)
        self._pending: list[tuple[str, Candidate]] = []  # generated, not yet asked
        self._results: dict[str, tuple[Any, bool]] = {}  # key -> (RunnerResult, built)
        self._exhausted = False
        self.num_rounds_ = self.num_random_rounds_ = self.num_empty_rounds_ = 0
        # Step 2. A start is measured before the first round, so that round's population
        # draws on it.
        self.start_plan_: StartPlan | None = plan_start(self.start, self.knob_space_, history)
        self._first = first_candidates(self.start_plan_, history)
        if pooled and not self._first and not history:
            self._first = self._pool_sample(per_iter)
        elif not pooled and not self._first:
            self._first = self._sketches_unmeasured(history)
        # Step 3. Resuming: what was measured before goes into MetaSchedule's database and cost
        # model first (reset tells it), exactly as tune_tir does when it reopens a database.
        return history

    def _tune_context(self, population: int, pooled: bool) -> Any:
        """MetaSchedule's tune context for this space, its evolutionary search set as this
        strategy is."""
        ms = _tvm.ms
        # Within a pool (a recording of knob-space points), MetaSchedule's fresh random traces
        # and its compute-location and parallel mutations are schedules the pool cannot hold
        # (the knob space keeps each sketch's compute locations): the evolution starts from
        # measured traces only, a random sample of the pool first, and keeps to tile-size and
        # unroll mutations. The run's settings record the two ratios it ran with.
        measured_ratio, min_unmeasured = self.init_measured_ratio, self.init_min_unmeasured
        if pooled:
            measured_ratio, min_unmeasured = 1.0, 0
            self.resolved_.update(init_measured_ratio=1.0, init_min_unmeasured=0)
        tvm_target = self.space.target.to_tvm()
        return ms.TuneContext(
            mod=self._mod,
            target=tvm_target,
            space_generator=_space_generator(self.space.postprocs, tvm_target.kind.name, pooled),
            search_strategy=ms.search_strategy.EvolutionarySearch(
                population_size=population,
                init_measured_ratio=measured_ratio,
                init_min_unmeasured=min_unmeasured,
                max_fail_count=self.max_fail_count,
                genetic_num_iters=self.genetic_num_iters,
                genetic_mutate_prob=self.genetic_mutate_prob,
                genetic_max_fail_count=self.genetic_max_fail_count,
                eps_greedy=self.eps_greedy,
            ),
            task_name=self.space.workload.family,
            rand_state=int(self.rng.integers(1, 2**31 - 1)),
            num_threads=self.num_threads,
        )

    def _round_size(self, told: int) -> int:
        """``num_trials_per_iter`` for this run. ``"auto"`` scales it to the trials the search
        knows of: the run's budget and, for a run told ``told`` earlier trials (a model tune's
        later chunk), those too, at most the budget. Small rounds let a model that starts from
        nothing learn between them; one that starts from hundreds of trials learns little
        from four more, and each round costs one of MetaSchedule's evolutions and one
        retraining of its model."""
        per_iter = self._scaled("num_trials_per_iter", default=64)
        budget = self.trial_budget_
        if told and budget and self.num_trials_per_iter == AUTO:
            per_iter = max(per_iter, min(budget, scaled(AUTO, budget + told, default=64)))
            self.resolved_["num_trials_per_iter"] = per_iter
        return per_iter

    def _sketch_schedule(self, sketch: int) -> Any:
        """Sketch ``sketch`` of the DesignSpace as a schedule (MetaSchedule's design space)."""
        sch = _tvm.Schedule(self._mod)
        self.space.sketch_trace(sketch).apply_to_schedule(sch, remove_postproc=True)
        return sch

    # -- ask/tell -----------------------------------------------------------------------------
    def ask(self, n: int) -> list[Candidate]:
        if n <= 0 or self._exhausted:
            return []
        if self._first:
            out, self._first = self._first[:n], self._first[n:]
            for c in out:
                self._see(c)
            return out
        if not self._pending:
            self._close_round()
            self._new_round()
        batch, self._pending = self._pending[:n], self._pending[n:]
        return [c for _, c in batch]

    def tell(self, records: Sequence[TrialRecord]) -> None:
        foreign = []
        for r in records:
            key = self._see(r.candidate)
            if key in self._round and key not in self._results:
                self._results[key] = _runner_result(r.result)
            elif is_hand_start(r.candidate):
                # A hand-made reference has no sampling instructions for MetaSchedule to
                # mutate; its nearest point (measured next) is what seeds the population.
                continue
            else:
                foreign.append(r)
        if foreign:
            self._learn_foreign(foreign)
        if not self._pending and self._round and len(self._results) == len(self._round):
            self._close_round()

    def predictions(self, candidates: Sequence[Candidate]) -> list[dict[str, float]]:
        out = []
        for c in candidates:
            score = self._predicted.get(trace_key(c.trace))
            out.append({} if score is None else {PREDICTION_NAME: score})
        return out

    # -- MetaSchedule round -------------------------------------------------------------------
    def _new_round(self) -> None:
        # After a random round, one more of MetaSchedule's may already say it has nothing new.
        for _ in range(1 if self.num_random_rounds_ else self.max_empty_rounds):
            # Not while a kernel is timed in another thread (the notebook): it uses every core.
            # Held: the evolution runs our postprocessor in TVM's threads (see there).
            with _numpy_global_seed(self.rng), TIMING_GATE.work(), interrupts_held():
                generated = self.context_.generate_measure_candidates()
            if generated is None:  # MetaSchedule's own "search finished"
                break
            fresh = self._round_of(self._unseen(generated))
            if not fresh:
                self.num_empty_rounds_ += 1
                continue
            for _, _, cand in fresh:
                self._see(cand)
            with _numpy_global_seed(self.rng), TIMING_GATE.work():
                scores = self.cost_model_.predict(self.context_, [mc for _, mc, _ in fresh])
            for (key, mc, cand), score in zip(fresh, scores, strict=True):
                self._round[key] = mc
                self._predicted[key] = float(score)
                self._pending.append((key, cand))
            self.num_rounds_ += 1
            return
        # MetaSchedule's evolution counts as measured only what it proposed in this session.
        # Carried over from earlier runs (a model tune's chunk), its population converged on
        # their schedules: BERT's largest matmul after 194 trials got 0 new of 4, five rounds
        # in a row, and the model tune stopped at 1500 of 2000 trials. Random points go on.
        self._exhausted = not self._random_round()

    def _unseen(self, generated: Sequence[Any]) -> list[tuple[str, Any, Candidate]]:
        """MetaSchedule's candidates not proposed or told before, as ``(key, candidate of
        MetaSchedule's, Candidate)``, in its order, one per knob point."""
        out: list[tuple[str, Any, Candidate]] = []
        keys: set[str] = set()
        points: set[Point] = set()
        for mc in generated:
            cand = Candidate(
                workload=self.space.workload,
                target=self.space.target,
                trace=_tvm.trace_to_json(mc.sch.trace),
                decisions=self.matcher_.describe(mc.sch.trace),
            )
            if not self._allowed(cand):  # a space within a recording: only what it holds
                continue
            # MetaSchedule deduplicates within a session only; after a resume it may offer
            # what was measured before, which the ask/tell contract forbids (by its knob
            # point too: one point has several traces).
            key, point = trace_key(cand.trace), self.knob_space_.point_of_candidate(cand)
            if key in self._seen or key in keys or point in self._seen_points or point in points:
                continue
            keys.add(key)
            if point is not None:
                points.add(point)
            out.append((key, mc, cand))
        return out

    def _round_of(self, fresh: list[Any]) -> list[Any]:
        """The round MetaSchedule would have proposed had it known the schedules told before
        the session (``carried_slots``): of an enlarged round's unmeasured candidates, its
        ``per_iter`` best first, then its random share, taken from the end, where
        MetaSchedule's eps-greedy puts the random ones."""
        if len(fresh) <= self._per_iter:
            return fresh
        randoms = int(self._per_iter * self.eps_greedy)
        bests = fresh[: self._per_iter - randoms]
        return bests + (fresh[-randoms:] if randoms else [])

    def _see(self, cand: Candidate) -> str:
        """Mark ``cand`` proposed or told, by its trace and its knob point; its trace's key."""
        key = trace_key(cand.trace)
        self._seen.add(key)
        if (point := self.knob_space_.point_of_candidate(cand)) is not None:
            self._seen_points.add(point)
        return key

    def _was_seen(self, cand: Candidate) -> bool:
        point = self.knob_space_.point_of_candidate(cand)
        return trace_key(cand.trace) in self._seen or point in self._seen_points

    def _random_round(self) -> bool:
        """Queue the ``num_trials_per_iter`` best of ``population_size`` random points of the
        design space not proposed before, by the cost model; whether there was any."""
        drawn: list[Candidate] = []
        for _ in range(int(self.resolved_["population_size"])):
            try:
                drawn.append(self.space.sample(self.rng).candidate)
            except SearchError:
                continue
        # Read as MetaSchedule's traces are (a drawn trace, replayed, may name another point).
        unique: dict[object, Candidate] = {}  # by point (by trace where it has none)
        for cand in self._predicted_points(drawn):
            if not self._was_seen(cand) and self._allowed(cand):
                point = self.knob_space_.point_of_candidate(cand)
                unique.setdefault(trace_key(cand.trace) if point is None else point, cand)
        fresh = sorted(unique.values(), key=lambda c: -self._predicted[trace_key(c.trace)])
        for cand in fresh[: int(self.resolved_["num_trials_per_iter"])]:
            self._pending.append((self._see(cand), cand))  # told as foreign: learned
        if fresh:
            self.num_random_rounds_ += 1
            log.info("EvolutionarySearch: MetaSchedule offered only measured schedules; "
                     "random round %d", self.num_random_rounds_)  # fmt: skip
        return bool(fresh)

    def _pool_sample(self, n: int) -> list[Candidate]:
        """``n`` distinct random points of the pool: the first round's measured traces."""
        ks = self.knob_space_
        assert ks.pool is not None
        picks = self.rng.choice(len(ks.pool), size=min(n, len(ks.pool)), replace=False)
        made = (ks.materialize(ks.pool[int(i)]) for i in picks)
        return [c for c in made if c is not None]

    def _sketches_unmeasured(self, history: Sequence[TrialRecord]) -> list[Candidate]:
        """One random schedule of each sketch no trial of ``history`` measured, in a random
        order: the first trials. MetaSchedule's evolution keeps a trace's sketch and first
        ranks by a model that knows nothing, so at a small budget a search stayed with the
        sketches its first draws measured: in 150-trial ResNet-18 tunes every 3x3 task that
        measured a packed sketch reached 161-231 GFLOPS, every other one 44-163."""
        done = {_sketch_of(r.candidate) for r in history}
        drawn: list[Candidate] = []
        for sketch in self.rng.permutation(self.space.num_sketches):
            if int(sketch) in done:
                continue
            try:
                drawn.append(self.space.sample(self.rng, sketch=int(sketch)).candidate)
            except SearchError:  # no valid draw of it: its share of the evolution stays
                continue
        return self._predicted_points(drawn)

    def _predicted_points(self, drawn: Sequence[Candidate]) -> list[Candidate]:
        """The design space's points ``drawn`` that replay here, as MetaSchedule's proposals
        are: described, and their cost model's scores kept."""
        out: list[Candidate] = []
        drawn_mcs: list[Any] = []
        for cand in drawn:
            sch = replay(self._mod, cand.trace)
            if sch is not None:
                out.append(replace(cand, decisions=self.matcher_.describe(sch.trace)))
                drawn_mcs.append(_tvm.ms.MeasureCandidate(sch, self._args_info))
        if out:
            with _numpy_global_seed(self.rng), TIMING_GATE.work():
                scores = self.cost_model_.predict(self.context_, drawn_mcs)
            for cand, score in zip(out, scores, strict=True):
                self._predicted[trace_key(cand.trace)] = float(score)
        return out

    def _allowed(self, candidate: Candidate) -> bool:
        if self.knob_space_.pool is None:
            return True
        point = self.knob_space_.point_of_candidate(candidate)
        return point is not None and self.knob_space_.allows(point)

    def _close_round(self) -> None:
        """Steps MetaSchedule's task scheduler runs once a round is measured."""
        if not self._round:
            return
        keys = [k for k in self._round if k in self._results]
        cands = [self._round[k] for k in keys]
        results = [self._results[k] for k in keys]
        self._round, self._results = {}, {}
        if not cands:
            return
        self.context_.notify_runner_results(cands, [rr for rr, _ in results])
        self._commit_and_update(cands, results)

    def _learn_foreign(self, records: Sequence[TrialRecord]) -> None:
        """Trials MetaSchedule did not propose in this session (history, or a stale round)."""
        cands, results = _as_measured(self._mod, self._args_info, records)
        if cands:
            self._commit_and_update(cands, results)

    def _learn_transfer(self) -> None:
        """Other workloads' trials into the XGB model, each under its own workload (group),
        and the model trained once on all of them."""
        records = transfer_records("EvolutionarySearch", self.record_store, self.space)
        groups = []
        for group in by_workload(records).values():
            workload = group[0].candidate.workload
            try:
                mod = workload.mod()
            except (ExplorerError, ValueError, RuntimeError) as e:  # a workload this TVM lost
                log.info("EvolutionarySearch: no transfer from %s: %s", workload, e)
                continue
            args_info = _tvm.ms.arg_info.ArgInfo.from_prim_func(mod["main"])
            cands, results = _as_measured(mod, args_info, group)
            kept = [(mc, rr) for mc, (rr, built) in zip(cands, results, strict=True) if built]
            if kept:
                context = _tvm.ms.TuneContext(mod=mod, target=self.context_.target, num_threads=1)
                groups.append((context, kept))
        model = self.cost_model_
        # XGBModel retrains on all its data at every update: with twenty workloads that was
        # twenty trainings (20 of a 34 s start, AMD EPYC). Its own adaptive-training threshold,
        # set out of reach, holds the training back until the last workload's update.
        model.adaptive_training, model.last_train_size = True, 1 << 62
        for i, (context, kept) in enumerate(groups):
            if i == len(groups) - 1:
                model.adaptive_training, model.last_train_size = False, 0
            with _numpy_global_seed(self.rng), TIMING_GATE.work():
                model.update(context, [mc for mc, _ in kept], [rr for _, rr in kept])
        model.adaptive_training, model.last_train_size = False, model.data_size
        learned = sum(len(kept) for _, kept in groups)
        self.resolved_["transfer_trials"] = learned
        log.info("EvolutionarySearch: learned from %d trials of other workloads", learned)

    def _commit_and_update(
        self, cands: Sequence[Any], results: Sequence[tuple[Any, bool]]
    ) -> None:
        ms = _tvm.ms
        target = self.context_.target
        for mc, (rr, _) in zip(cands, results, strict=True):
            run_secs = list(rr.run_secs) if rr.run_secs else [FAILED_RUN_SECS]
            self.database_.commit_tuning_record(
                ms.database.TuningRecord(mc.sch.trace, self._token, run_secs, target, mc.args_info)
            )
        kept = [(mc, rr) for mc, (rr, built) in zip(cands, results, strict=True) if built]
        if kept:
            with TIMING_GATE.work():
                self.cost_model_.update(
                    self.context_, [mc for mc, _ in kept], [rr for _, rr in kept]
                )


def _space_generator(postprocs: list[Any], kind: str, pooled: bool) -> Any:
    """MetaSchedule's own space generator with the design space's postprocessors; within a
    pool, without the mutators whose schedules a pool of knob-space points cannot hold."""
    ms = _tvm.ms
    probs = ms.mutator.Mutator.create(kind)
    if pooled:
        outside = (ms.mutator.MutateComputeLocation, ms.mutator.MutateParallel)
        probs = {m: p for m, p in probs.items() if not isinstance(m, outside)}
    return ms.space_generator.PostOrderApply(postprocs=postprocs, mutator_probs=probs)


def _runner_result(result: MeasureResult) -> tuple[Any, bool]:
    """Our result as MetaSchedule's ``RunnerResult``, and whether its cost model learns from it.

    Build failures are left out as MetaSchedule does; so are inconclusive (unchecked) timings,
    which are neither a success nor a failure. All are stored in its database as
    failed, so none becomes a parent of the next population.
    """
    ok = result.is_ok and result.run_secs and math.fsum(result.run_secs) > 0
    rr = _tvm.ms.runner.RunnerResult(
        run_secs=[float(x) for x in result.run_secs] if ok else None,
        error_msg=None if ok else (result.error_msg or result.status.value),
    )
    return rr, result.status not in _BUILD_FAILURES and not result.status.is_inconclusive


def _as_measured(
    mod: Any, args_info: Any, records: Sequence[TrialRecord]
) -> tuple[list[Any], list[tuple[Any, bool]]]:
    """The records whose traces replay on ``mod``, as MetaSchedule's candidates and results
    (``_runner_result``: with whether its cost model learns from each)."""
    cands, results = [], []
    for r in records:
        sch = replay(mod, r.candidate.trace)
        if sch is not None:
            cands.append(_tvm.ms.MeasureCandidate(sch, args_info))
            results.append(_runner_result(r.result))
    return cands, results


def _sketch_of(candidate: Candidate) -> int | None:
    """The sketch ``candidate.decisions`` names (``TraceMatcher.describe``), if any."""
    decisions = candidate.decisions
    return decisions.get("sketch") if isinstance(decisions, dict) else None


@contextlib.contextmanager
def _numpy_global_seed(rng: np.random.Generator) -> Iterator[None]:
    """Seed NumPy's global generator from ``rng`` for one call into TVM, then restore it.

    TVM's ``XGBModel.predict`` uses ``np.random.uniform`` until it has warmed up; this keeps
    proposals reproducible without leaving the global state changed.
    """
    state = np.random.get_state()
    np.random.seed(int(rng.integers(0, 2**32 - 1)))
    try:
        yield
    finally:
        np.random.set_state(state)
