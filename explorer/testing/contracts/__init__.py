"""Contract test kits (sklearn's ``check_estimator``, Optuna's storage tests), shipped so a new
strategy, cost model, record store or measurer is checked by the same tests as ours.

Each kit is a pytest class with no ``Test`` prefix (so it is not collected by itself). Subclass
it in a test module, fill in its factory, and every ``test_*`` method runs for your plugin::

    from explorer.testing.contracts import SearchStrategyContract

    class TestMyStrategy(SearchStrategyContract):
        def make_strategy(self):
            return MyStrategy(batch=4)

The kits need pytest (a ``dev`` dependency); ``import explorer`` never imports them.
"""

from __future__ import annotations

from explorer.testing.contracts._cost_model import CostModelContract
from explorer.testing.contracts._measurer import MeasurerContract
from explorer.testing.contracts._search import SearchStrategyContract
from explorer.testing.contracts._store import RecordStoreContract

__all__ = [
    "CostModelContract",
    "MeasurerContract",
    "RecordStoreContract",
    "SearchStrategyContract",
]
