"""The exception hierarchy.

Failures of a schedule *under measurement* are data (``MeasureStatus``); these exceptions are
for misuse: bad arguments, bad files, unknown names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class ExplorerError(Exception):
    """Root of every error the explorer raises on purpose."""


class WorkloadError(ExplorerError, ValueError):
    """A workload cannot be built: unknown family, bad shape, malformed expression.

    ``position`` is the 0-based character offset in an expression when the error points at one.
    """

    def __init__(self, message: str, *, position: int | None = None, text: str | None = None):
        self.position = position
        self.text = text
        if position is not None and text is not None:
            message = f"{message}\n  {text}\n  {' ' * position}^"
        super().__init__(message)


class PrimitiveError(ExplorerError, ValueError):
    """A schedule primitive was refused. The session it was applied to is unchanged.

    Attributes name the primitive, the argument at fault (or ``None`` when the step as a whole is
    illegal), the constraint in plain language and the value received.
    """

    def __init__(
        self,
        primitive: str,
        arg: str | None,
        reason: str,
        *,
        value: Any = None,
        detail: str | None = None,
    ):
        self.primitive = primitive
        self.arg = arg
        self.reason = reason
        self.value = value
        self.detail = detail  # TVM's own message, kept verbatim for the curious
        if arg is None:
            text = f"{primitive}(): {reason}"
        elif value is None and reason.startswith("is "):  # "split: factors is required (...)"
            text = f"{primitive}: {arg} {reason}"
        else:
            text = f"{primitive}({arg}={value!r}): {reason}"
        super().__init__(text)


class TraceError(ExplorerError, ValueError):
    """A trace (a file, a record, a notebook value) is malformed or would not replay as written.

    ``instruction`` is the index of the instruction at fault, when one is; ``detail`` keeps
    TVM's own message, when TVM gave one.
    """

    def __init__(
        self,
        reason: str,
        *,
        instruction: int | None = None,
        kind: str | None = None,
        detail: str | None = None,
        misfit: tuple[Any, Any] | None = None,
    ):
        self.reason = reason
        self.instruction = instruction
        self.detail = detail
        self.misfit = misfit  # (the file's decision, TVM's) when a decision did not fit
        where = "" if instruction is None else f"instruction {instruction}"
        if where and kind:
            where += f" ({kind})"
        super().__init__(f"{where}: {reason}" if where else reason)


class TargetError(ExplorerError, ValueError):
    """A target description is invalid or names hardware that is not present."""


class DeviceMissingError(TargetError):
    """The target names hardware this machine does not have (``Target.cuda()`` without a
    GPU): the machine's lack, not the command's mistake, so the command line exits 3."""

    environment_problem = True


class StoreError(ExplorerError):
    """The record database cannot be opened or written: corrupt, foreign, or too new a schema."""


class ModelError(ExplorerError, ValueError):
    """A model file cannot be imported: not ONNX, an operator without a lowering, a dynamic
    shape without its size, too large for the machine. The message names what and where."""


class RaceStopped(ModelError):
    """A model's race was asked to stop before it ended: nothing of it was stored."""


class SearchError(ExplorerError):
    """A search cannot start or continue (empty design space, bad budget)."""


class SettingError(SearchError, ValueError):
    """A search setting has an impossible value (``max_trials=0``, ``seed=-1``); raised before
    any run is created."""


class SettingTypeError(SettingError, TypeError):
    """A search setting has the wrong type (``max_trials=2.5``, ``seed='x'``, ``run_id=1.5``);
    raised before any run is created."""


class CapabilityError(SettingError, TypeError):
    """A strategy was given what it cannot take: a start point, or a cost model it does not run
    with (``explorer.search.capabilities``). The message names the strategy and what it takes;
    raised before any run is created."""


class RunInUseError(SearchError):
    """A run is owned by another live process (one owner per run): it cannot be resumed or
    continued from here until that process ends."""


class UnknownPluginError(ExplorerError, KeyError):
    """An unknown name was asked of a registry; the message lists the valid names."""

    def __init__(self, kind: str, name: str, valid: Iterable[str]):
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown {kind} {name!r}; valid names: {', '.join(self.valid)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class FleetError(ExplorerError):
    """A tracker or device server cannot be reached or started (``explorer.fleet``)."""

    environment_problem = True  # the machine's or the network's state, not the command's


class FleetNotReady(FleetError):
    """A fleet cannot take a search: its tracker does not answer, or no device of the key is
    registered (``explorer.fleet.devices_target``); nothing was stored."""
