"""Every registered strategy passes the shipped SearchStrategyContract (offline, on replays)."""

from __future__ import annotations

from explorer.search import STRATEGIES, make_strategy
from explorer.testing.contracts import SearchStrategyContract


def test_every_registered_strategy_has_a_contract_test():
    tested = {
        cls.strategy
        for cls in globals().values()
        if isinstance(cls, type) and hasattr(cls, "strategy")
    }
    assert tested == set(STRATEGIES)


class TestRandom(SearchStrategyContract):
    strategy = "random"

    def make_strategy(self):
        return make_strategy("random")


class TestAutoTVM(SearchStrategyContract):
    strategy = "autotvm"

    def make_strategy(self):
        return make_strategy("autotvm", plan_size=8, n_iter=100)


class TestEvolutionary(SearchStrategyContract):
    strategy = "evolutionary"

    def make_strategy(self):
        return make_strategy(
            "evolutionary", population_size=64, init_min_unmeasured=16, num_warmup_samples=8
        )


class TestDroplet(SearchStrategyContract):
    strategy = "droplet"
    exhausts = False  # stops once no step size improves the incumbent

    def make_strategy(self):
        return make_strategy("droplet")


class TestEvolutionaryDroplet(SearchStrategyContract):
    strategy = "evolutionary+droplet"
    exhausts = False

    def make_strategy(self):
        return make_strategy(
            "evolutionary+droplet", explore_trials=8, population_size=64, num_warmup_samples=8
        )


class TestStatic(SearchStrategyContract):
    strategy = "static"
    exhausts = False  # proposes its model's top k, then nothing

    def make_strategy(self):
        return make_strategy("static", top_k=8, num_parents=4, num_offspring=12, num_generations=2)


class TestValue(SearchStrategyContract):
    strategy = "value"

    def make_strategy(self):
        return make_strategy("value", min_samples=4)
