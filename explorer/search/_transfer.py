"""Transfer learning: what other workloads' trials teach a model-guided strategy before its
first round (AutoTVM's ``load_history``; TenSet's pre-training on many programs).

A strategy that can learn this way declares ``Capabilities(transfer=True)`` and takes
``transfer_from``: ``None`` (only this run's trials) or ``"auto"`` (first the record store's
trials of *other* workloads on the same target, the store the ``Tuner`` passes to ``reset``).
Its model must read features that mean the same for every workload: MetaSchedule's per-store
program features do, knob decisions do not.

The trials taken: same target (its key), any workload but this one, failures included (they
teach which schedules fail), timings nobody checked left out, each schedule once (its latest
measurement), the most recent ``MAX_TRANSFER_RECORDS``. ``explorer pretrain`` fills a database
with such trials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from explorer.core import RecordStore, TrialRecord, trace_key
from explorer.errors import SearchError
from explorer.space import DesignSpace
from explorer.text import plural
from explorer.types import JSON

TRANSFER_FROM = (None, "auto")
MAX_TRANSFER_RECORDS = 4096  # the most recent ones; extracting features costs ~3 ms each


def check_transfer_from(owner: str, value: object) -> None:
    """Refuse a ``transfer_from`` that is neither ``None`` nor ``"auto"``."""
    if value not in TRANSFER_FROM:
        raise ValueError(f"{owner}: transfer_from must be None or 'auto' (got {value!r})")


def transfer_records(
    owner: str,
    store: RecordStore | None,
    space: DesignSpace,
    *,
    limit: int = MAX_TRANSFER_RECORDS,
) -> list[TrialRecord]:
    """The trials a strategy of ``space`` learns from before its first round.

    Raises:
        SearchError: no record store was given (outside a ``Tuner``, without ``store=``).
    """
    if store is None:
        raise SearchError(
            f"{owner}(transfer_from='auto') needs the record store: run it through Tuner, or "
            "call reset(..., store=store)"
        )
    here = space.workload
    latest: dict[tuple[str, str], TrialRecord] = {}
    for t in store.trials(target=space.target):
        if t.candidate.workload != here and not t.status.is_inconclusive:
            key = (t.candidate.workload.key(), trace_key(t.candidate.trace))
            latest.pop(key, None)  # re-inserted: dict order is then the latest measurement's
            latest[key] = t
    return list(latest.values())[-limit:]


def by_workload(records: Sequence[TrialRecord]) -> dict[str, list[TrialRecord]]:
    """Records grouped by workload key, in first-seen order."""
    groups: dict[str, list[TrialRecord]] = {}
    for r in records:
        groups.setdefault(r.candidate.workload.key(), []).append(r)
    return groups


def transfer_note(settings: Mapping[str, JSON]) -> str | None:
    """What a run given ``transfer_from="auto"`` learned from other workloads, in one
    sentence for the command line and the Search tab (``None`` for a run without it).

    Example:
        >>> transfer_note({"transfer_from": "auto", "transfer_trials": 380})
        'transfer: its model learned first from 380 trials of other workloads'
        >>> transfer_note({"transfer_from": "auto", "transfer_trials": 0, "min_seed_records": 9})
        ... # doctest: +ELLIPSIS
        'transfer: nothing learned from other workloads (it needs at least 9); `explorer ...'
    """
    if settings.get("transfer_from") != "auto":
        return None
    learned = settings.get("transfer_trials")
    if isinstance(learned, int) and learned > 0:
        trials = plural(learned, "trial")
        return f"transfer: its model learned first from {trials} of other workloads"
    floor = settings.get("min_seed_records")
    needs = f" (it needs at least {floor})" if floor else ""
    return (
        f"transfer: nothing learned from other workloads{needs}; `explorer pretrain` measures some"
    )
