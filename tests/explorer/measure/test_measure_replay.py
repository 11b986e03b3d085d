"""ReplayMeasurer, confirm_best and the registry: no TVM builds involved."""

from __future__ import annotations

import json

import pytest
from _measure_cases import unscheduled

from explorer.errors import UnknownPluginError
from explorer.measure import (
    MEASURERS,
    Candidate,
    LocalMeasurer,
    MeasureConfig,
    Measurer,
    MeasureResult,
    RemoteMeasurer,
    ReplayMeasurer,
    confirm_best,
    make_measurer,
    trace_key,
)
from explorer.types import MeasureStatus


def ok(*secs: float) -> MeasureResult:
    return MeasureResult(MeasureStatus.OK, run_secs=secs, flops=100)


def cand(mm, target, n: int) -> Candidate:
    # Distinct (fake) traces are enough: the replay never builds them.
    return Candidate(mm, target, [[["GetSBlock", [], [f"C{n}", "main"], ["b0"]]], []])


def test_mapping_lookup_and_unknown_is_invalid(mm, target):
    known, unknown = cand(mm, target, 1), cand(mm, target, 2)
    m = ReplayMeasurer({json.dumps(known.trace, indent=2): ok(1e-3)})  # any formatting
    r_known, r_unknown = m.measure([known, unknown])
    assert r_known == ok(1e-3)
    assert r_unknown.status is MeasureStatus.INVALID
    assert "no recorded result" in r_unknown.error_msg
    assert m.num_measured == 2 and len(m) == 1
    assert m.lookup_trace(known.trace) == ok(1e-3)


def test_callable_lookup(mm, target):
    seen = []

    def lookup(c: Candidate) -> MeasureResult | None:
        seen.append(c)
        return ok(2e-3) if c.trace[0][0][2][0] == "C1" else None

    m = ReplayMeasurer(lookup)
    results = m.measure([cand(mm, target, 1), cand(mm, target, 3)])
    assert [r.status for r in results] == [MeasureStatus.OK, MeasureStatus.INVALID]
    assert len(seen) == 2


def test_from_pairs_and_trace_key(mm, target):
    c = cand(mm, target, 1)
    m = ReplayMeasurer.from_pairs([(c, ok(3e-3))])
    assert m.measure([c]) == [ok(3e-3)]
    assert trace_key(c.trace) == trace_key(json.dumps(c.trace))


def test_bad_arguments_raise():
    with pytest.raises(TypeError):
        ReplayMeasurer(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ReplayMeasurer({"[]": "not a result"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        ReplayMeasurer(lambda c: "nope").measure([None])  # type: ignore[list-item]


def test_confirm_best_reranks_the_top_k(mm, target):
    cands = [cand(mm, target, n) for n in range(5)]
    first = [ok(5e-3), ok(1e-3), MeasureResult(MeasureStatus.RUN_ERROR, error_msg="x"),
             ok(2e-3), ok(3e-3)]  # fmt: skip
    # On re-measurement the apparent winner (1 ms) turns out slower than the runner-up.
    again = {1: ok(9e-3, 9e-3), 3: ok(2e-3, 2e-3), 4: ok(3e-3)}
    m = ReplayMeasurer(lambda c: again[int(c.trace[0][0][2][0][1:])])
    ranked = confirm_best(m, cands, first, top_k=3, rounds=2)
    assert [c.trace[0][0][2][0] for c, _ in ranked] == ["C3", "C4", "C1"]


def test_confirm_best_pools_with_the_default_remeasure(mm, target):
    class Plain(Measurer):  # only measure(): Measurer.remeasure measures again and pools
        def __init__(self, *results: MeasureResult) -> None:
            self.results = list(results)

        def measure(self, candidates, *, best_secs=None, reference=False):
            return [self.results.pop(0) for _ in candidates]

    c = cand(mm, target, 1)
    ((_, pooled),) = confirm_best(Plain(ok(2e-3), ok(3e-3)), [c], [ok(1e-3)], top_k=1, rounds=2)
    assert pooled.run_secs == (1e-3, 2e-3, 3e-3)
    # An earlier failure is not pooled (the new timings are the result); a failure while
    # re-measuring ends that candidate's rounds as the result.
    failed = MeasureResult(MeasureStatus.RUN_ERROR, error_msg="crashed")
    assert Plain(ok(2e-3)).remeasure([c], rounds=1, previous=[failed]) == [ok(2e-3)]
    assert Plain(failed, ok(3e-3)).remeasure([c], rounds=2, previous=[ok(1e-3)]) == [failed]
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        Plain().remeasure([c], rounds=0)
    with pytest.raises(ValueError, match="one result per candidate"):
        Plain().remeasure([c], previous=[])


def test_confirm_best_with_the_local_measurer(mm, target):
    config = MeasureConfig(repeat=2, min_repeat_secs=0)
    with LocalMeasurer(config, num_build_workers=1) as m:
        c = unscheduled(mm, target)
        first = m.measure([c])
        ((best, r),) = confirm_best(m, [c], first, top_k=1, rounds=2)
    assert best is c and r.is_ok and len(r.run_secs) == 6


def test_registry():
    assert MEASURERS == {
        "local": LocalMeasurer,
        "remote": RemoteMeasurer,
        "replay": ReplayMeasurer,
    }
    m = make_measurer("local", config=MeasureConfig(repeat=2), num_build_workers=1)
    assert isinstance(m, LocalMeasurer) and m.config.repeat == 2
    assert m.worker_pids() == {"build": [], "run": []}  # constructing starts nothing
    m.close()
    assert make_measurer(m) is m
    with pytest.raises(TypeError, match="given with a ready"):
        make_measurer(m, seed=1)
    with pytest.raises(UnknownPluginError, match="local, remote, replay") as info:
        make_measurer("nope")
    assert isinstance(info.value, KeyError)
    with pytest.raises(TypeError, match="unknown argument.*bogus"):
        make_measurer("local", bogus=1)
    r = make_measurer("replay", records_or_lookup={})
    assert isinstance(r, ReplayMeasurer)


def test_hook_family_registration_nests_and_is_undone():
    from explorer.testing import hooks
    from explorer.workloads import FAMILIES

    assert FAMILIES["hook"] is hooks.HOOK  # this package's autouse fixture
    with hooks.registered():
        pass
    assert FAMILIES["hook"] is hooks.HOOK  # still inside the outer registration
