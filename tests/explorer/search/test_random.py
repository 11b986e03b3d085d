"""The random baseline beyond the shared contract: uniform over points, runs dry, registry."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from explorer.errors import UnknownPluginError
from explorer.search import RandomSearch, make_strategy
from explorer.space import DesignSpace, KnobSpace
from explorer.workloads import get_workload


def test_a_tiny_space_runs_dry_after_every_buildable_point(cpu_target):
    space = DesignSpace.of(get_workload("matmul", M=2, N=2, K=2), cpu_target)
    s = RandomSearch(max_misses=20)
    s.reset(space, rng=np.random.default_rng(0))
    got = []
    while batch := s.ask(64):
        got += batch
    points = {tuple(c.decisions["point"]) + (c.decisions["sketch"],) for c in got}
    assert len(points) == len(got)
    assert len(got) + s.num_invalid_ == KnobSpace(space).size()
    assert s.ask(4) == []


def test_draws_are_uniform_over_points_not_over_sketches(cpu_target):
    """Each sketch is drawn in proportion to its number of points, and within a knob every
    value shows up: no tiling is favoured the way TVM's sampler favours some. MetaSchedule's
    three sketches have as many points each; a packed one (its 16 columns one or two panels, so
    little left to tile there) has 40 to 80 times fewer, and is drawn that much less."""
    space = DesignSpace.of(get_workload("matmul", M=16, N=16, K=16), cpu_target)
    s = RandomSearch()
    s.reset(space, rng=np.random.default_rng(1))
    got = s.ask(300)
    sketches = Counter(c.decisions["sketch"] for c in got)
    ms, n = space.num_metaschedule_sketches, space.num_sketches
    knobs = KnobSpace(space)
    sizes = [knobs.size(k) for k in range(n)]
    assert ms == 3 and sizes[:ms] == [sizes[0]] * ms
    assert n > ms and all(size * 25 < sizes[0] for size in sizes[ms:])
    assert min(sketches[k] for k in range(ms)) > 60
    packed_share = sum(sizes[ms:]) / sum(sizes)
    assert sum(sketches[k] for k in range(ms, n)) <= 300 * packed_share * 3 + 3
    unroll = Counter(c.decisions["point"][-1] for c in got)
    assert len(unroll) == knobs.dims(0)[-1]


def test_registry_refuses_unknown_names_and_kwargs():
    with pytest.raises(UnknownPluginError, match="random"):
        make_strategy("no-such-strategy")
    with pytest.raises(TypeError, match="max_misses"):
        make_strategy("random", bogus=1)
    with pytest.raises(ValueError, match="max_misses"):
        RandomSearch(max_misses=0)
    s = RandomSearch()
    assert make_strategy(s) is s
