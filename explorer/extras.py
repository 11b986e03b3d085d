"""Optional packages, imported on first use: ``explorer`` imports and runs without them, and a
feature that needs one says, in one sentence, what to install.

The extras are declared in pyproject.toml (``lab``: ipywidgets, plotly, anywidget; ``nas``:
JAX and scikit-learn); xgboost is a dependency, imported late because it is slow to import.

Example:
    >>> require("no_such_module_here", "the Fisher Potential", "nas")
    Traceback (most recent call last):
      ...
    explorer.extras.MissingExtraError: the Fisher Potential needs no_such_module_here, ...
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType

from explorer.errors import ExplorerError

INSTALL = {
    "lab": "pip install 'schedule-explorer[lab]'  (or run `make lab`, which installs it)",
    "nas": "pip install 'schedule-explorer[nas]'",
    "model": "pip install 'schedule-explorer[model]'  (or run `make lab`, which installs it)",
    "xgboost": "pip install xgboost-cpu  (not together with xgboost)",
}
"""How to install what each extra (or late-imported dependency) brings."""


class MissingExtraError(ExplorerError, ImportError):
    """An optional package is not installed (the message names it and how to install it)."""

    environment_problem = True  # the installation's fault, not the command's (exit 3)


def require(module: str, what: str, extra: str) -> ModuleType:
    """``module`` imported, or ``MissingExtraError``: "{what} needs {package}, which is not
    installed: {how to install ``extra``}".

    Raises:
        KeyError: ``extra`` is not one of ``INSTALL``'s (a programming error).
    """
    install = INSTALL[extra]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = (getattr(exc, "name", None) or module).split(".")[0]
        raise MissingExtraError(f"{what} needs {top}, which is not installed: {install}") from None


def check_installed(modules: Sequence[str], what: str, extra: str) -> None:
    """Raise ``MissingExtraError`` ("{what} needs jax and sklearn, which are not installed:
    ...") unless every one of ``modules`` is installed, without importing them (JAX takes
    seconds): for a feature that refuses to start rather than fail midway.

    Raises:
        KeyError: ``extra`` is not one of ``INSTALL``'s (a programming error).
    """
    install = INSTALL[extra]
    missing = [m for m in modules if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise MissingExtraError(
            f"{what} needs {' and '.join(missing)}, which {verb} not installed: {install}"
        )
