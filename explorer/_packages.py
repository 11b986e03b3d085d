"""``explorer`` and ``widgets``: the project's two top-level packages, installed side by side.

Both names are short and common, so another installed package may shadow one of them (a
``widgets`` folder in the notebook's directory, another distribution's ``explorer``). Python
then imports the wrong one and fails later with a confusing error; these checks say so first.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

_HOME = Path(__file__).resolve().parent.parent  # the folder that holds both packages


def foreign_widgets() -> str | None:
    """Why ``import widgets`` would not load this project's ``widgets`` (``None``: it would)."""
    ours = _HOME / "widgets"
    try:
        spec = importlib.util.find_spec("widgets")
    except (ImportError, ValueError) as exc:
        return f"`import widgets` fails ({exc}); Schedule Explorer's widgets are in {ours}"
    if spec is None or spec.origin is None:
        return f"no `widgets` package can be imported; Schedule Explorer's widgets are in {ours}"
    found = Path(spec.origin).resolve().parent
    if found != ours:
        return (
            f"`import widgets` would load {found}, not Schedule Explorer's widgets ({ours}): "
            "another package named `widgets` comes first on the import path; rename or "
            "uninstall it"
        )
    return None


def shadowed_in(folder: Path) -> str | None:
    """Why a kernel started in ``folder`` (which Python puts first on its import path) would
    import another ``explorer`` or ``widgets`` than this project's (``None``: it would not)."""
    for name in ("explorer", "widgets"):
        for path in (folder / name, folder / f"{name}.py"):
            if path.exists() and path.resolve() != _HOME / name:
                return (
                    f"{path} would shadow Schedule Explorer's `{name}` package in notebooks "
                    f"opened in {folder} (a kernel imports from its own folder first); rename it"
                )
    return None
