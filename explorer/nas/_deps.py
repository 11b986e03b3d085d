"""The optional dependencies of ``explorer.nas`` (the ``nas`` extra), imported when first used:
``explorer`` and the network descriptions work without them."""

from __future__ import annotations

import importlib
from types import ModuleType

from explorer.errors import ExplorerError

INSTALL_HINT = "pip install 'schedule-explorer[nas]'"


class MissingExtraError(ExplorerError, ImportError):
    """An optional package of the ``nas`` extra is not installed (the message says how to)."""

    environment_problem = True  # the installation's fault, not the command's (exit 3)


def require(module: str, what: str) -> ModuleType:
    """``module`` imported, or ``MissingExtraError`` in one sentence naming the install command.

    Example:
        >>> require("no_such_module_here", "the Fisher Potential")
        Traceback (most recent call last):
          ...
        explorer.nas._deps.MissingExtraError: the Fisher Potential needs no_such_module_here, ...
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise MissingExtraError(
            f"{what} needs {top}, which is not installed: {INSTALL_HINT}"
        ) from None
