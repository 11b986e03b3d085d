"""What a run may spend: ``RunBudget`` (stored with every run, so a resumed run continues under
its own terms) and the checks of ``Tuner.run``'s budget, made before anything is built or
stored (kept apart so ``tuner.py`` stays about the loop)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.core import RunInfo
from explorer.errors import SearchError, SettingError, SettingTypeError
from explorer.types import MAX_SECS, MAX_TRIALS, TOO_LONG, TOO_MANY_TRIALS


@dataclass(frozen=True)
class RunBudget:
    """What a run's settings fix besides its strategy: the budget, the seed and the batch size.

    Stored with every run (``settings()``), so a resumed run continues under its own terms.
    """

    max_trials: int
    max_secs: float | None
    seed: int
    batch_size: int

    KEYS = ("max_trials", "max_secs", "seed", "batch_size")

    def settings(self) -> dict[str, int | float | None]:
        return {key: getattr(self, key) for key in self.KEYS}

    @classmethod
    def of(cls, run: RunInfo) -> RunBudget:
        """The budget stored with ``run``; ``SearchError`` for a run no Tuner made."""
        missing = [k for k in ("max_trials", "seed", "batch_size") if k not in run.settings]
        if missing:
            raise SearchError(
                f"run {run.id} ({run.strategy}) was not made by a search: its settings have no "
                f"{', '.join(missing)}; it cannot be resumed"
            )
        s = run.settings
        max_secs = s.get("max_secs")
        return cls(
            int(s["max_trials"]),
            None if max_secs is None else float(max_secs),
            int(s["seed"]),
            int(s["batch_size"]),
        )


def check_int(name: str, value: object, *, minimum: int) -> None:
    """A whole number (a NumPy integer too, never a bool or 2.5) of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise SettingTypeError(f"{name} must be a whole number (got {value!r})")
    if value < minimum:
        raise SettingError(f"{name} must be at least {minimum} (got {value})")


_REAL = (int, float, np.integer, np.floating)


def check_budget(max_trials: object, max_secs: object, seed: object) -> None:
    """``Tuner.run``'s budget and seed, checked before anything is built or stored."""
    check_int("max_trials", max_trials, minimum=1)
    if isinstance(max_trials, (int, np.integer)) and max_trials > MAX_TRIALS:
        raise SettingError(
            f"max_trials must be at most {MAX_TRIALS} (got {max_trials}){TOO_MANY_TRIALS}"
        )
    check_int("seed", seed, minimum=0)
    if max_secs is None:
        return
    if isinstance(max_secs, bool) or not isinstance(max_secs, _REAL):
        raise SettingTypeError(f"max_secs must be a number of seconds or None (got {max_secs!r})")
    if not max_secs >= 0:  # nan too
        raise SettingError(f"max_secs must be a number >= 0 (got {max_secs})")
    if max_secs > MAX_SECS:
        raise SettingError(f"max_secs must be at most {MAX_SECS:.0f} (got {max_secs}){TOO_LONG}")
