"""explorer._registry.Registry: one way to check arguments for strategies, cost models and
measurers (the three registries are also tested where they live)."""

from __future__ import annotations

import functools
import re

import pytest

from explorer._registry import Registry
from explorer.cost_models import COST_MODELS
from explorer.errors import UnknownPluginError
from explorer.measure import MEASURERS
from explorer.search import STRATEGIES


class Shape:
    def __init__(self, *, sides: int = 3, color: str = "red") -> None:
        self.sides, self.color = sides, color


class Square(Shape):
    pass


SHAPES: Registry[type[Shape] | functools.partial[Shape], Shape] = Registry(
    "shape", Shape, {"triangle": Shape, "square": functools.partial(Square, sides=4)}
)


def test_a_registry_is_a_read_only_mapping_of_its_factories():
    assert list(SHAPES) == ["triangle", "square"] and len(SHAPES) == 2
    assert SHAPES["triangle"] is Shape and "square" in SHAPES
    assert dict(SHAPES) == {"triangle": Shape, "square": SHAPES["square"]}
    assert SHAPES.get("circle") is None
    with pytest.raises(TypeError):
        SHAPES["circle"] = Shape  # type: ignore[index]
    assert SHAPES.maker == "make_shape" and "triangle" in repr(SHAPES)


def test_make_checks_arguments_the_same_way_for_every_kind():
    assert SHAPES.make("triangle", color="blue").color == "blue"
    assert SHAPES.make("square").sides == 4
    square = SHAPES.make("square")
    assert SHAPES.make(square) is square
    assert SHAPES.parameters("triangle") == ("sides", "color")
    assert SHAPES.parameters("square") == ("color",)  # sides is fixed by the name
    with pytest.raises(UnknownPluginError, match="unknown shape 'circle'; valid names: square, t"):
        SHAPES.make("circle")
    with pytest.raises(TypeError, match=r"make_shape\('triangle'\): unknown argument\(s\) edges;"):
        SHAPES.make("triangle", edges=3)
    with pytest.raises(TypeError, match=r"sides \(fixed by the name\); valid: color"):
        SHAPES.make("square", sides=5)
    with pytest.raises(TypeError, match=r"make_shape: arguments \['color'\] given with a ready"):
        SHAPES.make(square, color="blue")
    with pytest.raises(TypeError, match="make_shape takes a name or a Shape .got int"):
        SHAPES.make(3)  # type: ignore[arg-type]


def test_a_factory_that_makes_the_wrong_kind_is_refused():
    odd = Registry("shape", Shape, {"text": lambda: "a str"})
    with pytest.raises(TypeError, match=r"make_shape\('text'\) made a str, not a Shape"):
        odd.make("text")


@pytest.mark.parametrize(
    ("registry", "kind", "maker"),
    [
        (STRATEGIES, "strategy", "make_strategy"),
        (COST_MODELS, "cost model", "make_cost_model"),
        (MEASURERS, "measurer", "make_measurer"),
    ],
)
def test_the_three_plugin_registries(registry, kind, maker):
    assert isinstance(registry, Registry) and registry.kind == kind and registry.maker == maker
    with pytest.raises(UnknownPluginError, match=f"unknown {kind} 'nope'; valid names: "):
        registry.make("nope")
    name = next(iter(registry))
    with pytest.raises(
        TypeError, match=re.escape(f"{maker}({name!r}): unknown argument(s) bogus;")
    ):
        registry.make(name, bogus=1)
