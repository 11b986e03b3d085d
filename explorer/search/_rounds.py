"""How large MetaSchedule's evolutionary rounds and populations are, for a run's budget and for
what the run was told before its session began."""

from __future__ import annotations

import math

from explorer.search._base import AUTO

_POPULATION, _MIN_POPULATION = 512, 64  # MetaSchedule's default; a floor for small rounds


def population_for(population_size: int | str, per_iter: int) -> int:
    """``population_size``, or for ``"auto"``: 8 traces per candidate of a round of
    ``per_iter`` (MetaSchedule's 512 for its rounds of 64), between 64 and 512.

    Example:
        >>> [population_for("auto", n) for n in (4, 16, 64, 100)], population_for(48, 16)
        ([64, 128, 512, 512], 48)
    """
    if population_size == AUTO:
        return min(_POPULATION, max(_MIN_POPULATION, 8 * per_iter))
    return int(population_size)


def carried_slots(told: int, per_iter: int, population: int, eps_greedy: float) -> int:
    """How many candidates a round asks MetaSchedule for beyond ``per_iter`` when ``told``
    measured schedules were told before its session began (a model tune's earlier chunks).

    MetaSchedule's evolution skips only what it proposed itself in this session (its
    ``measured_workloads_``; its source's TODO: "add records from the database to avoid
    re-measuring"), and its cost model ranks the carried-over schedules, the best measured,
    first: a round came back short or empty, and every round more is an evolution more. A round
    larger by the carried-over ones that can reach it holds the ``per_iter`` best it would have
    proposed knowing them (``_round_of`` keeps those). They come from the population (its
    measured share and mutants that land on them): at most half of it counts, as a larger round
    costs describing and matching every candidate, and MetaSchedule counts all it returned as
    proposed. The size is raised so that its eps-greedy random share comes on top.

    Example:
        >>> carried_slots(0, 4, 64, 0.05), carried_slots(600, 4, 64, 0.05)
        (0, 34)
    """
    if told <= 0:
        return 0
    wanted = per_iter + min(told, population // 2)
    size = math.ceil(wanted / (1.0 - eps_greedy))
    while size - int(size * eps_greedy) < wanted:
        size += 1
    return size - per_iter
