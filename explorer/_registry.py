"""One registry for every plug-in kind: strategies, cost models and measurers.

A ``Registry`` maps names to factories (a class, or a ``functools.partial`` of one that fixes
some arguments) and builds instances with ``make``, which checks its arguments the same way for
every kind: an unknown name raises ``UnknownPluginError`` listing the valid ones, an argument the
factory does not take (or one the name already fixes) raises ``TypeError``, and so do arguments
given with a ready instance, which is otherwise returned unchanged. Nothing is silently dropped.

The registry is a read-only mapping: ``STRATEGIES["random"]`` is the factory as registered.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeGuard, TypeVar

from explorer.errors import UnknownPluginError

T = TypeVar("T")
"""What the factories make (``SearchStrategy``, ``CostModel``, ``Measurer``)."""
F = TypeVar("F", bound=Callable[..., Any])
"""How the factories are typed (``type[SearchStrategy]``, ``Callable[..., CostModel]``)."""


class Registry(Mapping[str, F], Generic[F, T]):
    """Names to factories of one plug-in kind, and ``make`` to build one.

    Args:
        kind: what the plug-ins are, in words (``"cost model"``); error messages and the
            factory function's name (``make_cost_model``) use it.
        base: the class every instance must be (``CostModel``; an abstract class, which is why
            it is typed ``type``, not ``type[T]``: ``T`` comes from the annotation).
        factories: name -> a class, or a ``functools.partial`` of one (its keywords are fixed
            by the name: ``"xgb-reg"`` is ``partial(XGBCostModel, loss="reg")``).

    Example:
        >>> from explorer.measure import MEASURERS
        >>> sorted(MEASURERS)
        ['local', 'remote', 'replay']
        >>> type(MEASURERS.make("replay", records_or_lookup={})).__name__
        'ReplayMeasurer'
        >>> MEASURERS.make("replay", bogus=1)
        Traceback (most recent call last):
          ...
        TypeError: make_measurer('replay'): unknown argument(s) bogus; valid: records_or_lookup
        >>> MEASURERS.make("fleet")
        Traceback (most recent call last):
          ...
        explorer.errors.UnknownPluginError: unknown measurer 'fleet'; valid names: local, ...
    """

    def __init__(self, kind: str, base: type, factories: Mapping[str, F]) -> None:
        self.kind = kind
        self.base = base
        self._factories = dict(factories)

    @property
    def maker(self) -> str:
        """The name of the ``make_*`` function that wraps ``make`` (for messages)."""
        return "make_" + self.kind.replace(" ", "_")

    # -- Mapping --------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> F:
        return self._factories[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._factories)})"

    # -- building -------------------------------------------------------------------------------
    def factory(self, name: str) -> F:
        """The factory registered as ``name``.

        Raises:
            UnknownPluginError: ``name`` is not registered (the message lists the valid names).
        """
        if not isinstance(name, str):
            raise TypeError(
                f"{self.maker} takes a name or a {self.base.__name__} (got {type(name).__name__})"
            )
        try:
            return self._factories[name]
        except KeyError:
            raise UnknownPluginError(self.kind, name, self._factories) from None

    def parameters(self, name: str) -> tuple[str, ...]:
        """The keyword arguments ``make(name, ...)`` accepts, in declaration order (those the
        name fixes left out)."""
        factory = self.factory(name)
        fixed = _fixed(factory)
        params = inspect.signature(factory).parameters.values()
        return tuple(
            p.name
            for p in params
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in fixed
        )

    def make(self, spec: str | T, /, **kwargs: Any) -> T:
        """An instance from a registered name and keyword arguments, or ``spec`` itself when it
        is already an instance.

        Raises:
            UnknownPluginError: the name is not registered.
            TypeError: an argument the factory does not take or the name fixes, arguments given
                with a ready instance, or a ``spec`` that is neither a name nor an instance.
        """
        if self._is_made(spec):
            if kwargs:
                raise TypeError(
                    f"{self.maker}: arguments {sorted(kwargs)} given with a ready "
                    f"{type(spec).__name__} instance"
                )
            return spec
        if not isinstance(spec, str):
            raise TypeError(
                f"{self.maker} takes a name or a {self.base.__name__} (got {type(spec).__name__})"
            )
        factory = self.factory(spec)
        accepted = self.parameters(spec)
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:
            fixed = " (fixed by the name)" if set(unknown) & _fixed(factory) else ""
            raise TypeError(
                f"{self.maker}({spec!r}): unknown argument(s) {', '.join(unknown)}{fixed}; "
                f"valid: {', '.join(accepted) or '(none)'}"
            )
        made = factory(**kwargs)
        if not self._is_made(made):  # a factory that is not a class of the kind
            raise TypeError(
                f"{self.maker}({spec!r}) made a {type(made).__name__}, not a {self.base.__name__}"
            )
        return made

    def _is_made(self, obj: object) -> TypeGuard[T]:
        return isinstance(obj, self.base)


def _fixed(factory: Callable[..., Any]) -> set[str]:
    """The keywords a ``functools.partial`` fixes (none for a plain class)."""
    return set(factory.keywords) if isinstance(factory, functools.partial) else set()
