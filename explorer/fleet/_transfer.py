"""Measuring each target's best schedule on every target (``TransferInfo`` holds the table)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from explorer.core import Candidate

if TYPE_CHECKING:  # `explorer.fleet` stays light: the measurers import it
    from explorer.analysis import TransferInfo
    from explorer.measure import Measurer
    from explorer.storage import RecordStore
    from explorer.target import Target
    from explorer.workloads import Workload


def measure_transfer(
    store: RecordStore,
    workload: Workload,
    targets: Sequence[tuple[Target, Measurer]],
    *,
    rounds: int = 3,
) -> TransferInfo:
    """Take each target's best stored schedule of ``workload`` and time all of them on every
    target, with that target's measurer (for a fleet, a ``RemoteMeasurer`` per device key).

    On each target the schedules are re-timed together, ``rounds`` times round-robin
    (``Measurer.remeasure``), so a change of load hits them alike. Nothing is stored: the
    cells are measurements of one comparison, not trials of a search.

    Raises:
        ValueError: fewer than two targets, or a target without a successful trial.
    """
    from explorer.analysis import TransferCell, transfer_info

    if len(targets) < 2:
        raise ValueError(f"a transfer needs at least two targets (got {len(targets)})")
    best = {}
    for target, _ in targets:
        records = store.best(workload, target)
        if not records:
            raise ValueError(
                f"no successful trial of {workload.key()} on {target.key()} in the store: "
                "tune it for that target first"
            )
        best[target.key()] = records[0].candidate.trace
    cells = []
    for on, measurer in targets:
        candidates = [Candidate(workload, on, best[a.key()]) for a, _ in targets]
        results = measurer.remeasure(candidates, rounds=rounds)
        cells += [
            TransferCell(a.key(), on.key(), r) for (a, _), r in zip(targets, results, strict=True)
        ]
    return transfer_info(workload.key(), cells)
