"""Strategies declare what they take (a start point, cost models); make_strategy, the command
line and the UI read the declaration, and it matches what the constructors accept.

That a start-capable strategy really starts from a given schedule, and that each declared cost
model names the predictions a run with it stores, is checked on every registered strategy by
the contract kit (explorer.testing.contracts, tests/explorer/search/test_contract.py).
"""

from __future__ import annotations

import inspect

import pytest

from explorer import cli
from explorer.cost_models import COST_MODELS
from explorer.errors import CapabilityError, ExplorerError, UnknownPluginError
from explorer.search import (
    STRATEGIES,
    Capabilities,
    RandomSearch,
    SearchStrategy,
    capabilities,
    check_capabilities,
    make_strategy,
)
from explorer.storage import get_store

DECLARED = {
    "random": Capabilities(start=False),
    "autotvm": Capabilities(start=True, cost_models=("xgb-rank", "xgb-reg"), transfer=True),
    "evolutionary": Capabilities(start=True, cost_models=("metaschedule-xgb",), transfer=True),
    "droplet": Capabilities(start=True),
    "evolutionary+droplet": Capabilities(
        start=True, cost_models=("metaschedule-xgb",), transfer=True
    ),
    "static": Capabilities(start=False, cost_models=("static",)),
    "value": Capabilities(start=True, cost_models=("value",), transfer=True),
}


def test_every_strategy_declares_its_capabilities():
    assert {name: capabilities(name) for name in STRATEGIES} == DECLARED
    for name, cls in STRATEGIES.items():
        caps = capabilities(name)
        assert "capabilities" in vars(cls), f"{name} must declare its own"
        assert capabilities(cls) is capabilities(make_strategy(name)) is caps
        assert set(caps.cost_models) <= set(COST_MODELS)
        assert caps.default_cost_model == (caps.cost_models[0] if caps.cost_models else None)
        assert caps.takes_cost_model == bool(caps.cost_models)
        # the declaration matches the constructor: start= exactly where it is declared
        assert ("start" in STRATEGIES.parameters(name)) == caps.start, name
        assert ("transfer_from" in STRATEGIES.parameters(name)) == caps.transfer, name
    with pytest.raises(UnknownPluginError, match="valid names: autotvm, droplet"):
        capabilities("no-such-strategy")


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_each_cost_model_is_taken_or_refused_in_one_sentence(name):
    caps = capabilities(name)
    for model in COST_MODELS:
        if model in caps.cost_models:
            strategy = make_strategy(name, cost_model=model)
            for arg, value in type(strategy).cost_model_arguments(model).items():
                assert getattr(strategy, arg) == value  # stored verbatim, in its settings
            continue
        with pytest.raises(CapabilityError) as info:
            make_strategy(name, cost_model=model)
        text = str(info.value)
        assert text.startswith(f"strategy {name!r} ") and "\n" not in text
        if caps.cost_models:
            assert f"runs with the cost model {' or '.join(caps.cost_models)}" in text
        else:
            assert "uses no cost model" in text and "autotvm (xgb-rank, xgb-reg)" in text
    with pytest.raises(UnknownPluginError, match="valid names: metaschedule-xgb"):
        make_strategy(name, cost_model="no-such-model")


def test_a_capability_error_is_a_setting_error_and_a_type_error():
    with pytest.raises(CapabilityError) as info:
        check_capabilities("random", start=True)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ExplorerError)
    assert str(info.value) == (
        "strategy 'random' cannot start from a given schedule; "
        "these can: autotvm, evolutionary, droplet, evolutionary+droplet, value"
    )
    check_capabilities("droplet", start=True)  # fine: nothing raised
    check_capabilities("autotvm", cost_model="xgb-reg")


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_transfer_learning_is_taken_or_refused_in_one_sentence(name):
    if capabilities(name).transfer:
        assert make_strategy(name, transfer_from="auto").settings()["transfer_from"] == "auto"
        with pytest.raises(ValueError, match="transfer_from must be None or 'auto'"):
            make_strategy(name, transfer_from="everything")
        return
    with pytest.raises(CapabilityError) as info:
        make_strategy(name, transfer_from="auto")
    assert str(info.value) == (
        f"strategy {name!r} cannot learn from other workloads' trials; "
        "these can: autotvm, evolutionary, evolutionary+droplet, value"
    )


def test_cost_model_selects_the_constructor_argument_and_never_contradicts_one():
    assert make_strategy("autotvm", cost_model="xgb-reg").loss == "reg"
    assert make_strategy("autotvm", cost_model="xgb-reg").settings()["loss"] == "reg"
    assert make_strategy("autotvm", cost_model="xgb-rank", loss="rank").loss == "rank"
    with pytest.raises(TypeError, match="cost_model='xgb-reg' means loss='reg', but loss='rank'"):
        make_strategy("autotvm", cost_model="xgb-reg", loss="rank")
    with pytest.raises(TypeError, match="given with a ready RandomSearch instance"):
        make_strategy(RandomSearch(), cost_model="xgb-rank")


def test_a_start_is_declared_one_way_only():
    with pytest.raises(TypeError, match=r"declare capabilities = Capabilities\(start=True\)"):

        class Legacy(RandomSearch):
            accepts_start = True

    assert inspect.isabstract(SearchStrategy)


def test_the_command_line_runs_the_chosen_cost_model(tmp_path, capsys):
    db = tmp_path / "records.db"
    argv = ["tune", "matmul", "-p", "M=8", "-p", "N=8", "-p", "K=8", "--strategy", "autotvm"]
    argv += ["--cost-model", "xgb-reg", "--trials", "2", "--batch", "2", "-q", "--db", str(db)]
    assert cli.main(argv) == 0, capsys.readouterr().err
    (run,) = get_store(db).runs()
    assert run.strategy == "autotvm" and run.settings["loss"] == "reg"
