"""Fixtures of the analysis tests: a real in-memory store, real knob-space candidates."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pytest

from explorer.measure import Candidate, MeasureResult
from explorer.space import DesignSpace, KnobSpace
from explorer.storage import NewTrial, RecordStore, RunInfo, TrialRecord, get_store
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import Workload, get_workload


@pytest.fixture(scope="session")
def workload() -> Workload:
    return get_workload("matmul", M=64, N=64, K=64)


@pytest.fixture(scope="session")
def target() -> Target:
    return Target.local_cpu()


@pytest.fixture(scope="session")
def space(workload: Workload, target: Target) -> KnobSpace:
    return KnobSpace(DesignSpace.of(workload, target))


@pytest.fixture(scope="session")
def candidates(space: KnobSpace) -> list[Candidate]:
    """60 distinct buildable points of the space (decisions in KnobSpace's dict form), all in
    sketches with sketch 0's knobs (MetaSchedule's own; the packed ones tile differently)."""

    def layout(sketch: int) -> list:
        return [d.knob.attrs for d in space.domains[sketch]]

    rng = np.random.default_rng(0)
    out: dict[str, Candidate] = {}
    while len(out) < 60:
        point = space.random_point(rng)
        cand = space.materialize(point)
        if cand is not None and layout(point.sketch) == layout(0):
            out.setdefault(point.key(), cand)
    return list(out.values())


@pytest.fixture
def store() -> Iterator[RecordStore]:
    s = get_store(":memory:")
    yield s
    s.close()


def result(latency_ms: float | None, workload: Workload) -> MeasureResult:
    if latency_ms is None:
        return MeasureResult(MeasureStatus.BUILD_ERROR, error_msg="it broke")
    secs = latency_ms / 1e3
    return MeasureResult(MeasureStatus.OK, (secs, secs), flops=workload.flops())


@pytest.fixture
def add_run(
    store: RecordStore, candidates: list[Candidate]
) -> Callable[..., tuple[RunInfo, list[TrialRecord]]]:
    """``add_run(strategy, latencies_ms, predicted=None, workload=, target=, decisions=,
    traces=)``: one finished run whose trials have these latencies (``None`` = a build error).

    Trial ``i`` measures candidate ``traces[i]`` (default: ``i``). A run measures each schedule
    once, so past the last candidate the traces are tagged to stay distinct (the analyses never
    replay them); repeat an index in ``traces`` to store a re-measurement.
    """

    def add(
        strategy: str,
        latencies_ms: Sequence[float | None],
        *,
        predicted: Sequence[dict[str, float]] | None = None,
        workload: Workload | None = None,
        target: Target | None = None,
        decisions: Callable[[Candidate], object] | None = None,
        batch: int = 4,
        traces: Sequence[int] | None = None,
    ) -> tuple[RunInfo, list[TrialRecord]]:
        picks = list(range(len(latencies_ms))) if traces is None else list(traces)
        cands = [candidates[i % len(candidates)] for i in picks]
        w = workload or cands[0].workload
        t = target or cands[0].target
        run = store.create_run(w, t, strategy)
        trials = [
            NewTrial(
                Candidate(
                    w,
                    t,
                    c.trace if p < len(candidates) else [*c.trace, ["distinct", p]],
                    c.decisions if decisions is None else decisions(c),
                ),
                result(lat, w),
                predicted[i] if predicted is not None else {},
            )
            for i, (p, c, lat) in enumerate(zip(picks, cands, latencies_ms, strict=True))
        ]
        records: list[TrialRecord] = []
        for start in range(0, len(trials), batch):
            records += store.add_trials(run.id, trials[start : start + batch])
        store.finish_run(run.id)
        return store.get_run(run.id), records

    return add
