"""The ``RecordStore`` contract (Optuna's storage tests): any store passes the same checks."""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from explorer import _tvm
from explorer._process import ProcessIdentity
from explorer.core import (
    ModelInput,
    ModelRace,
    ModelRecord,
    ModelTask,
    RaceEntry,
    TrialRecord,
    TrialRow,
    trace_hash,
)
from explorer.errors import RunInUseError, StoreError
from explorer.measure import Candidate, MeasureResult
from explorer.storage import NewTrial, Rank, RecordStore, RunStatus
from explorer.target import Target
from explorer.types import CacheFlush, MeasureStatus
from explorer.workloads import Workload, get_workload

OK, BUILD_ERROR = MeasureStatus.OK, MeasureStatus.BUILD_ERROR
SPLIT_FACTORS = (4, 8, 16, 32)


@functools.cache
def split_trace(workload: Workload, factor: int) -> Any:
    """A real JSON trace: the first loop of ``C`` split by ``factor``."""
    sch = _tvm.Schedule(workload.mod())
    i = sch.get_loops(sch.get_sblock("C"))[0]
    sch.split(i, [None, factor])
    return _tvm.trace_to_json(sch.trace)


def make_trial(
    workload: Workload,
    target: Target,
    secs: float | tuple[float, ...] | None = 1e-3,
    *,
    status: MeasureStatus = MeasureStatus.OK,
    trace: int = 0,
    decisions: Any = None,
    predicted: dict[str, float] | None = None,
    **fields: Any,
) -> NewTrial:
    """A trial of a real trace; ``trace`` indexes ``SPLIT_FACTORS``; other keywords are
    ``MeasureResult`` fields."""
    run_secs = () if secs is None else secs if isinstance(secs, tuple) else (secs,)
    if status is not MeasureStatus.OK:
        fields.setdefault("error_msg", f"{status.value}: it broke")
    return NewTrial(
        Candidate(workload, target, split_trace(workload, SPLIT_FACTORS[trace]), decisions),
        MeasureResult(status, run_secs, flops=workload.flops(), **fields),
        predicted or {},
    )


class RecordStoreContract:
    """Subclasses implement ``make_store(directory)``: a fresh, empty store (files, if any, go in
    ``directory``); it is closed after each test."""

    def make_store(self, directory: Path) -> RecordStore:
        raise NotImplementedError("subclasses return a fresh, empty store")

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[RecordStore]:
        s = self.make_store(tmp_path)
        yield s
        s.close()

    @pytest.fixture
    def workload(self) -> Workload:
        return get_workload("matmul", M=64, N=64, K=64)

    @pytest.fixture
    def other_workload(self) -> Workload:
        return get_workload("matmul", M=32, N=32, K=64)

    @pytest.fixture
    def target(self) -> Target:
        return Target.local_cpu()

    @pytest.fixture
    def other_target(self) -> Target:
        return Target(kind="llvm", mcpu="generic", num_cores=1, name="generic, 1 core")

    @pytest.fixture(name="make_trial")
    def make_trial_fixture(self) -> Callable[..., NewTrial]:
        return make_trial

    # -- runs ----------------------------------------------------------------------------------
    def test_create_run_round_trips_and_filters(
        self,
        store: RecordStore,
        workload: Workload,
        other_workload: Workload,
        target: Target,
        other_target: Target,
    ) -> None:
        a = store.create_run(workload, target, "random", settings={"seed": 1, "max_trials": 8})
        b = store.create_run(other_workload, target, "manual")
        c = store.create_run(workload, other_target, "random", environment={"note": "x"})
        assert a.status == "running" and a.ended_at is None and a.id < b.id < c.id
        assert a.settings == {"seed": 1, "max_trials": 8}
        assert a.environment["tvm_version"] and c.environment == {"note": "x"}
        assert store.get_run(a.id) == a
        assert store.runs() == [a, b, c]
        assert store.runs(workload=workload) == [a, c]
        assert store.runs(target=target) == [a, b]
        assert store.runs(strategy="random", target=other_target) == [c]
        assert store.runs(strategy="nope") == []

    def test_finish_run_sets_only_end_and_status(
        self, store: RecordStore, workload: Workload, target: Target
    ) -> None:
        run = store.create_run(workload, target, "random")
        done = store.finish_run(run.id, "cancelled")
        assert done.status == "cancelled"
        assert done.ended_at is not None and done.ended_at >= run.started_at
        assert dataclasses.replace(done, ended_at=None, status=RunStatus.RUNNING) == run
        resumed = store.finish_run(run.id)  # a resumed run ends again: only end and status change
        assert resumed.status == "finished"
        assert resumed.ended_at is not None and resumed.ended_at >= done.ended_at
        assert dataclasses.replace(resumed, ended_at=None, status=RunStatus.RUNNING) == run
        with pytest.raises(ValueError, match="must be one of"):
            store.finish_run(store.create_run(workload, target, "x").id, "exploded")
        with pytest.raises(KeyError):
            store.finish_run(999)

    def test_a_run_is_owned_until_it_ends_then_can_be_claimed(
        self, store: RecordStore, workload: Workload, target: Target
    ) -> None:
        run = store.create_run(workload, target, "random")
        assert run.owner == ProcessIdentity.current() and run.status is RunStatus.RUNNING
        with pytest.raises(RunInUseError):  # one owner per run, even within a process
            store.claim_run(run.id)
        store.heartbeat(run.id, active_secs=3.0)
        ended = store.finish_run(run.id, "interrupted")
        assert ended.status is RunStatus.INTERRUPTED and ended.owner is None
        with pytest.raises(RunInUseError):
            store.heartbeat(run.id, active_secs=4.0)  # not the owner any more
        claimed = store.claim_run(run.id)
        assert claimed.status is RunStatus.RUNNING and claimed.owner == ProcessIdentity.current()
        assert claimed.active_secs == 3.0 and claimed.ended_at is None
        assert store.finish_run(run.id).status is RunStatus.FINISHED
        with pytest.raises(KeyError):
            store.claim_run(999)

    def test_re_measurements_are_flagged_and_not_counted(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        run = store.create_run(workload, target, "random")
        first = make_trial(workload, target, 2e-3)
        store.add_trials(run.id, [first])
        (again,) = store.add_trials(
            run.id, [dataclasses.replace(make_trial(workload, target, 1e-3), is_remeasure=True)]
        )
        assert again.is_remeasure and [t.is_remeasure for t in store.trials()] == [False, True]
        assert [r.is_remeasure for r in store.trial_rows(run_id=run.id)] == [False, True]
        assert store.count_trials(run_id=run.id) == 2
        assert store.count_trials(run_id=run.id, remeasures=False) == 1

    def test_unknown_ids_raise_key_error(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        with pytest.raises(KeyError):
            store.get_run(42)
        with pytest.raises(KeyError):
            store.get_trial(42)
        with pytest.raises(KeyError):
            store.add_trials(42, [make_trial(workload, target)])
        with pytest.raises(KeyError):
            store.best_so_far(42)

    # -- models ----------------------------------------------------------------------------------
    def test_models_round_trip_once_per_name(self, store: RecordStore, target: Target) -> None:
        task = get_workload("task")
        model = ModelRecord(
            id=0, name="net", source_sha256="a" * 64,
            inputs=(ModelInput("x", (1, 3, 8, 8), "float32"),),
            tasks=(ModelTask("add", task, 2, task.flops(), 1.5e-6),
                   ModelTask("other", task, 1, task.flops(), None, "build failed")),
            target=target, created_at=1.0e9,
        )  # fmt: skip
        assert store.models() == []
        source = bytes(range(256)) * 3  # any bytes, NUL included
        stored = store.add_model(model, source)
        assert stored.id >= 1 and dataclasses.replace(stored, id=0) == model
        assert store.add_model(model, source) == stored  # the same file again: found
        assert store.models() == [stored] and store.get_model("net") == stored
        assert store.get_model(stored.id) == stored
        assert store.model_source(stored.id) == source
        with pytest.raises(StoreError, match="already stored as 'net'"):
            store.add_model(dataclasses.replace(model, source_sha256="b" * 64), b"other")
        resized = (ModelInput("x", (2, 3, 8, 8), "float32"),)
        with pytest.raises(StoreError, match="already stored from this file with input x=1x3"):
            store.add_model(dataclasses.replace(model, inputs=resized), source)
        assert store.models() == [stored]
        renamed = dataclasses.replace(model, name="net2", source_sha256="b" * 64)
        other = store.add_model(renamed, b"other")
        assert other.id > stored.id and store.models() == [stored, other]
        assert store.model_source(other.id) == b"other"
        with pytest.raises(KeyError, match="no model 'nope'"):
            store.get_model("nope")
        with pytest.raises(KeyError):
            store.model_source(other.id + 1)

    def test_model_runs_and_races_are_kept_per_model(
        self, store: RecordStore, target: Target
    ) -> None:
        task = get_workload("task")
        model = ModelRecord(
            0, "net", "a" * 64, (), (ModelTask("add", task, 1, task.flops(), 1e-6),), target, 1.0
        )
        a, b = (
            store.add_model(model, b"a"),
            store.add_model(dataclasses.replace(model, name="b", source_sha256="b" * 64), b"b"),
        )
        run1, run2 = (store.create_run(task, target, "random") for _ in range(2))
        store.link_model_run(a.id, run1.id, "add", "random/seed0/gradient")
        store.link_model_run(b.id, run2.id, "add", "random/seed1/round-robin")
        assert store.model_runs(a.id) == [(run1.id, "add", "random/seed0/gradient")]
        assert store.model_runs(b.id) == [(run2.id, "add", "random/seed1/round-robin")]
        race = ModelRace(
            0, a.id, "random/seed0/gradient", 64,
            (RaceEntry("tuned", (1e-3, 1.1e-3), 2e-6), RaceEntry("untuned", (), None, "boom")),
            {"cpu": "test"}, 2.0,
        )  # fmt: skip
        stored = store.add_model_race(race)
        assert stored.id >= 1 and dataclasses.replace(stored, id=0) == race
        assert store.model_races(a.id) == [stored] and store.model_races(b.id) == []
        tuned = stored.entry("tuned")
        assert tuned is not None and tuned.fastest_secs == 1e-3 and stored.entry("x") is None

    # -- trials ----------------------------------------------------------------------------------
    def test_add_trials_returns_what_later_queries_return(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        run = store.create_run(workload, target, "random")
        batch = [
            make_trial(workload, target, (3e-3, 1e-3, 2e-3), trace=1, predicted={"xgb": 0.7},
                       decisions={"tile": [8, 8]}, build_secs=0.25, num_threads=2,
                       device="board@10.0.0.7:9091", cache_flush=CacheFlush.ARGUMENTS),
            make_trial(workload, target, None, status=BUILD_ERROR),
        ]  # fmt: skip
        records = store.add_trials(run.id, batch)
        assert [r.seq for r in records] == [0, 1] and [r.run_id for r in records] == [run.id] * 2
        first = records[0]
        assert first.candidate == batch[0].candidate and first.result == batch[0].result
        assert first.median_secs == 2e-3 and first.predicted == {"xgb": 0.7}
        assert first.result.gflops == pytest.approx(workload.flops() / 2e-3 / 1e9)
        assert records[1].status is BUILD_ERROR and records[1].result.error_msg
        assert store.trials(run_id=run.id) == records
        assert [store.get_trial(r.id) for r in records] == records
        # which fleet device measured it (None: this machine), in records and in rows
        assert [r.result.device for r in records] == ["board@10.0.0.7:9091", None]
        assert [r.device for r in store.trial_rows(run_id=run.id)] == [
            r.result.device for r in records
        ]
        # the protocol its samples were timed under
        assert [r.result.cache_flush for r in records] == [CacheFlush.ARGUMENTS, CacheFlush.NONE]

    def test_returned_records_are_immutable_snapshots(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        run = store.create_run(workload, target, "random")
        (record,) = store.add_trials(run.id, [make_trial(workload, target, predicted={"m": 1.0})])
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.seq = 5  # type: ignore[misc]  # a frozen record on purpose: it must be refused
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.result.run_secs = ()  # type: ignore[misc]  # a frozen record on purpose: it must be refused
        # Mutating nested JSON of a returned record changes that copy only.
        record.candidate.trace[0].clear()
        record.predicted["m"] = 99.0  # type: ignore[index]  # a Mapping: mutated on purpose
        again = store.get_trial(record.id)
        assert again.candidate.trace[0] and again.predicted == {"m": 1.0}
        again.candidate.trace.clear()
        assert store.trials(run_id=run.id)[0].candidate.trace

    def test_ids_increase_and_seq_counts_per_run(
        self,
        store: RecordStore,
        workload: Workload,
        other_workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        a = store.create_run(workload, target, "random")
        b = store.create_run(other_workload, target, "random")
        ids = []
        for i in range(5):  # interleaved batches of different sizes
            ids += [r.id for r in store.add_trials(a.id, [make_trial(workload, target)] * (i + 1))]
            ids += [r.id for r in store.add_trials(b.id, [make_trial(other_workload, target)] * 2)]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert [t.seq for t in store.trials(run_id=a.id)] == list(range(15))
        assert [t.seq for t in store.trials(run_id=b.id)] == list(range(10))
        assert [t.id for t in store.trials()] == ids
        assert store.count_trials() == 25 and store.count_trials(run_id=b.id) == 10

    def test_a_batch_is_validated_before_anything_is_stored(
        self,
        store: RecordStore,
        workload: Workload,
        other_workload: Workload,
        target: Target,
        other_target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        run = store.create_run(workload, target, "random")
        good = make_trial(workload, target)
        with pytest.raises(ValueError, match="workload"):
            store.add_trials(run.id, [good, make_trial(other_workload, target)])
        with pytest.raises(ValueError, match="target"):
            store.add_trials(run.id, [good, make_trial(workload, other_target)])
        bad_json = dataclasses.replace(good, predicted={"m": "fast"})  # type: ignore[dict-item]  # not JSON numbers on purpose: it must be refused
        with pytest.raises(ValueError, match="predictions"):
            store.add_trials(run.id, [good, bad_json])
        assert store.count_trials() == 0
        assert store.add_trials(run.id, []) == []

    def test_a_target_with_the_runs_key_is_stored_with_the_runs_target(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        run = store.create_run(workload, target, "random")
        renamed = dataclasses.replace(target, name="same CPU, other label", l3_bytes=1)
        assert renamed.key() == target.key()
        (record,) = store.add_trials(run.id, [make_trial(workload, renamed)])
        assert record.candidate.target == target  # the run's, as every later query returns it
        assert store.get_trial(record.id) == record

    def test_trials_filters_and_limit(
        self,
        store: RecordStore,
        workload: Workload,
        other_workload: Workload,
        target: Target,
        other_target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        r1 = store.create_run(workload, target, "random")
        r2 = store.create_run(other_workload, other_target, "grid")
        store.add_trials(
            r1.id,
            [make_trial(workload, target), make_trial(workload, target, None, status=BUILD_ERROR)],
        )
        store.add_trials(r2.id, [make_trial(other_workload, other_target)] * 3)
        assert len(store.trials()) == 5
        assert len(store.trials(workload=workload)) == 2
        assert len(store.trials(target=other_target)) == 3
        assert len(store.trials(workload=workload, target=other_target)) == 0
        assert [t.status for t in store.trials(status=BUILD_ERROR)] == [BUILD_ERROR]
        assert len(store.trials(status=OK, run_id=r2.id)) == 3
        assert [t.seq for t in store.trials(run_id=r2.id, limit=2)] == [0, 1]
        assert store.trials(limit=0) == []
        with pytest.raises(ValueError):
            store.trials(limit=-1)

    def test_trial_rows_are_the_trials_without_their_traces(
        self,
        store: RecordStore,
        workload: Workload,
        other_workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        r1 = store.create_run(workload, target, "random")
        r2 = store.create_run(other_workload, target, "grid")
        store.add_trials(r1.id, [
            make_trial(workload, target, (3e-3, 1e-3, 2e-3), trace=1, predicted={"xgb": 0.7},
                       decisions={"sketch": 0, "values": [[8, 8], 2]}),
            make_trial(workload, target, None, status=BUILD_ERROR),
        ])  # fmt: skip
        store.add_trials(r2.id, [make_trial(other_workload, target, trace=2)])
        store.add_trials(r1.id, [make_trial(workload, target, 4e-3, trace=1)])  # timed again
        for query in (
            {},
            {"run_id": r1.id},
            {"workload": other_workload},
            {"target": target, "status": OK},
            {"run_id": r1.id, "status": BUILD_ERROR},
        ):
            rows = store.trial_rows(**query)
            assert rows == [TrialRow.from_record(t) for t in store.trials(**query)], query
        first, failed, again = store.trial_rows(run_id=r1.id)
        assert (first.seq, failed.seq, again.seq) == (0, 1, 2)
        assert first.status is OK and first.is_ok and not failed.is_ok
        assert first.median_secs == 2e-3 and first.run_secs == (3e-3, 1e-3, 2e-3)
        assert first.predicted == {"xgb": 0.7} and failed.median_secs is None
        assert first.decisions == {"sketch": 0, "values": [[8, 8], 2]}
        assert failed.decisions is None and failed.predicted == {}
        assert first.created_at == store.get_trial(first.id).created_at
        # The same schedule has the same hash, and it is the trace's, decoded or not.
        assert again.trace_hash == first.trace_hash != failed.trace_hash
        assert first.trace_hash == trace_hash(store.get_trial(first.id).candidate.trace)
        assert 0 <= first.trace_hash < 2**63
        with pytest.raises(dataclasses.FrozenInstanceError):
            first.seq = 5  # type: ignore[misc]  # a frozen record on purpose: it must be refused
        assert store.trial_rows(run_id=999) == []

    def test_best_ranks_successes_only(
        self,
        store: RecordStore,
        workload: Workload,
        other_workload: Workload,
        target: Target,
        other_target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        r1 = store.create_run(workload, target, "random")
        r2 = store.create_run(workload, target, "grid")
        store.add_trials(r1.id, [
            make_trial(workload, target, 5e-3),
            make_trial(workload, target, 1e-6, status=MeasureStatus.WRONG_RESULT),
            make_trial(workload, target, 3e-3),
        ])  # fmt: skip
        store.add_trials(
            r2.id,
            [
                make_trial(workload, target, 4e-3),
                make_trial(workload, target, None, status=BUILD_ERROR),
            ],
        )
        other = store.create_run(other_workload, other_target, "grid")
        store.add_trials(other.id, [make_trial(other_workload, other_target, 1e-9)])
        best = store.best(workload, target, k=10)
        assert [b.median_secs for b in best] == [3e-3, 4e-3, 5e-3]  # across runs, fastest first
        assert [b.median_secs for b in store.best(workload, target)] == [3e-3]
        assert store.best(workload, other_target) == [] and store.best(workload, target, k=0) == []

    def test_unchecked_timings_are_never_best(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        # A timing nobody compared with NumPy (MetaSchedule's) is kept, but ranks nowhere.
        run = store.create_run(workload, target, "metaschedule-import")
        unchecked = make_trial(workload, target, 1e-7, status=MeasureStatus.UNCHECKED)
        store.add_trials(run.id, [unchecked, make_trial(workload, target, 2e-3)])
        assert [b.median_secs for b in store.best(workload, target, k=5)] == [2e-3]
        assert store.best_so_far(run.id).best_secs == (math.inf, 2e-3)
        (row,) = store.trial_rows(run_id=run.id, status=MeasureStatus.UNCHECKED)
        assert row.run_secs == (1e-7,) and not row.is_ok

    def test_rank_counts_correct_timings_only(
        self,
        store: RecordStore,
        workload: Workload,
        other_workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        assert store.rank(workload, target, 1e-3) == Rank(1, 0, None)
        run = store.create_run(workload, target, "random")
        store.add_trials(run.id, [
            make_trial(workload, target, 5e-3),
            make_trial(workload, target, 1e-6, status=MeasureStatus.WRONG_RESULT),
            make_trial(workload, target, 3e-3, trace=1),
            make_trial(workload, target, 9e-6, status=MeasureStatus.UNCHECKED, trace=2),
        ])  # fmt: skip
        again = make_trial(workload, target, 1e-6, trace=1)  # a re-timing is not another one
        store.add_trials(run.id, [dataclasses.replace(again, is_remeasure=True)])
        other = store.create_run(other_workload, target, "random")
        store.add_trials(other.id, [make_trial(other_workload, target, 1e-7)])
        assert store.rank(workload, target, 4e-3) == Rank(2, 2, 3e-3)
        assert store.rank(workload, target, 1e-3) == Rank(1, 2, 3e-3)
        assert store.rank(workload, target, 3e-3) == Rank(1, 2, 3e-3)  # ties rank alike
        assert store.rank(workload, target, None) == Rank(3, 2, 3e-3)  # no timing: last

    def test_measurements_of_one_schedule(
        self,
        store: RecordStore,
        workload: Workload,
        other_workload: Workload,
        target: Target,
        other_target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        run = store.create_run(workload, target, "random")
        a, b, a2 = store.add_trials(run.id, [
            make_trial(workload, target, 5e-3),
            make_trial(workload, target, 4e-3, trace=1),
            make_trial(workload, target, None, status=BUILD_ERROR),  # the same trace as `a`
        ])  # fmt: skip
        elsewhere = store.create_run(workload, other_target, "random")
        store.add_trials(elsewhere.id, [make_trial(workload, other_target, 1e-3)])
        assert store.measurements_of(a.candidate) == [a, a2]  # oldest first, failures too
        assert store.measurements_of(b.candidate) == [b]
        unseen = make_trial(workload, target, trace=3).candidate
        assert store.measurements_of(unseen) == []

    def test_best_so_far_counts_failures_as_inf(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        run = store.create_run(workload, target, "random")
        secs = [None, 4e-3, None, 5e-3, 2e-3, 3e-3]
        store.add_trials(run.id, [
            make_trial(workload, target, s, status=OK if s else BUILD_ERROR) for s in secs[:3]
        ])  # fmt: skip
        store.add_trials(run.id, [make_trial(workload, target, s) for s in secs[3:]])
        curve = store.best_so_far(run.id)
        assert curve.run_id == run.id and curve.seq == tuple(range(6))
        assert curve.best_secs == (math.inf, 4e-3, 4e-3, 4e-3, 2e-3, 2e-3)
        assert all(e >= 0 for e in curve.elapsed_secs)
        assert list(curve.elapsed_secs) == sorted(curve.elapsed_secs)
        empty = store.create_run(workload, target, "random")
        assert store.best_so_far(empty.id).best_secs == ()

    def test_subscribers_see_committed_batches_until_unsubscribed(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
    ) -> None:
        run = store.create_run(workload, target, "random")
        seen: list[list[int]] = []
        counts: list[int] = []

        def on_batch(records: list[TrialRecord]) -> None:
            seen.append([r.id for r in records])
            counts.append(store.count_trials())  # already committed when we are called

        unsubscribe = store.subscribe(on_batch)
        first = store.add_trials(run.id, [make_trial(workload, target)] * 2)
        store.add_trials(run.id, [])  # nothing committed, nothing to announce
        assert seen == [[r.id for r in first]] and counts == [2]
        unsubscribe()
        unsubscribe()  # idempotent
        store.add_trials(run.id, [make_trial(workload, target)])
        assert len(seen) == 1
        with pytest.raises(TypeError):
            store.subscribe("not callable")  # type: ignore[arg-type]  # misuse on purpose: it must be refused

    def test_a_failing_subscriber_is_logged_not_raised(
        self,
        store: RecordStore,
        workload: Workload,
        target: Target,
        make_trial: Callable[..., NewTrial],
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        run = store.create_run(workload, target, "random")
        later: list[int] = []

        def broken(records: list[TrialRecord]) -> None:
            records.clear()  # must not affect the next subscriber's list either
            raise RuntimeError("subscriber bug")

        store.subscribe(broken)
        store.subscribe(lambda records: later.append(len(records)))
        with caplog.at_level(logging.ERROR):
            records = store.add_trials(run.id, [make_trial(workload, target)] * 3)
        assert len(records) == 3 and later == [3]
        assert "subscriber bug" in caplog.text
