"""The random baseline: respects n, never repeats, reproducible, runs dry on tiny spaces."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.errors import UnknownPluginError
from explorer.measure._base import MeasureResult
from explorer.search import RandomSearch, make_strategy
from explorer.space import DesignSpace, decisions_key
from explorer.storage._base import TrialRecord
from explorer.types import MeasureStatus
from explorer.workloads import get_workload


def _record(candidate, i):
    return TrialRecord(
        i, 1, i, candidate, MeasureResult(MeasureStatus.RUN_ERROR, error_msg="x"), {}, 0.0
    )


@pytest.fixture(scope="module")
def space(cpu_target):
    return DesignSpace.of(get_workload("matmul", M=64, N=64, K=64), cpu_target)


def test_ask_respects_n_and_never_repeats(space):
    s = RandomSearch()
    s.reset(space, rng=np.random.default_rng(0))
    seen = set()
    for _ in range(3):
        batch = s.ask(5)
        assert len(batch) == 5
        keys = {decisions_key(c.decisions) for c in batch}
        assert len(keys) == 5 and not keys & seen
        seen |= keys


def test_same_seed_same_proposals(space):
    runs = []
    for _ in range(2):
        s = RandomSearch()
        s.reset(space, rng=np.random.default_rng(42))
        runs.append([c.decisions for c in s.ask(6)])
    assert runs[0] == runs[1]


def test_history_is_not_proposed_again(space):
    first = RandomSearch()
    first.reset(space, rng=np.random.default_rng(5))
    old = first.ask(6)
    resumed = RandomSearch()
    resumed.reset(
        space, rng=np.random.default_rng(5), history=[_record(c, i) for i, c in enumerate(old)]
    )
    new = resumed.ask(6)
    assert not {decisions_key(c.decisions) for c in new} & {
        decisions_key(c.decisions) for c in old
    }


def test_a_tiny_space_runs_dry(cpu_target):
    space = DesignSpace.of(get_workload("matmul", M=2, N=2, K=2), cpu_target)
    s = RandomSearch(max_misses=50)
    s.reset(space, rng=np.random.default_rng(0))
    got = []
    while batch := s.ask(16):
        got += batch
    assert 1 <= len(got) < 200
    assert s.ask(4) == []


def test_registry_refuses_unknown_names_and_kwargs():
    with pytest.raises(UnknownPluginError, match="random"):
        make_strategy("no-such-strategy")
    with pytest.raises(TypeError, match="max_misses"):
        make_strategy("random", bogus=1)
    s = RandomSearch()
    assert make_strategy(s) is s
    assert make_strategy("random", max_misses=3).settings() == {"max_misses": 3}
