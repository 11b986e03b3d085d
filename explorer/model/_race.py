"""Building a model whole and racing it: the network untuned (TVM's default lowering), with the
best schedule of every task, and ONNX Runtime, each checked against ONNX Runtime's output and
timed in interleaved rounds with the same timer.

The race runs in a child process: a network's build and the two runtimes' thread pools never
touch the calling process (a notebook's kernel), its thread count is the target's from the
first kernel on, and whatever happens there, the caller gets a sentence back.
"""

from __future__ import annotations

import math
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.core import (
    ModelRace,
    ModelRecord,
    ModelTask,
    RaceEntry,
    RecordStore,
    TrialRecord,
)
from explorer.errors import ModelError, RaceStopped
from explorer.machine import BUSY, cached_peak
from explorer.model._tune import tune_spent
from explorer.storage import environment
from explorer.types import MeasureStatus

UNTUNED, TUNED, TUNE_RELAX, ONNXRUNTIME = "untuned", "tuned", "tune_relax", "onnxruntime"
# a race's environment: its probes' readings (``machine_speed``) and the kept peak
PROBE_GFLOPS, FORKJOIN_US, PEAK_GFLOPS = "probe_gflops", "forkjoin_us", "peak_gflops"
SLOW_MACHINE = 0.85
"""A race whose FMA probe ran below this share of the kept peak says its times read slow."""
SLOW_JOIN = 2.0
"""... and one whose fork-join probe took this many times the quickest of the model's races
(on the development VM, 0.54-1.09 µs in a quick phase and 1.24-1.40 µs in a slow one, the
fastest call of each 0.2 s: a race keeps its fastest round's)."""
MAX_ERROR = 1e-3
"""Largest difference from ONNX Runtime's output (relative to its largest value) a build may
show and still count as correct: float32 sums in another order, over a whole network."""


@dataclass(frozen=True)
class RacePlan:
    """What the child needs, picklable: the ONNX bytes, the model as stored (its inputs'
    shapes, target and tasks, which say how to lower it: ``lower_as_stored``) and each tuned
    task's (IRModule JSON, trace)."""

    source: bytes
    model: ModelRecord
    num_threads: int
    schedules: tuple[tuple[str, Any], ...]
    rounds: int
    seed: int
    untuned: bool
    tune_relax_trials: int  # 0: no tune_relax contender


def best_schedules(
    model: ModelRecord, store: RecordStore, *, tune: str | None = None
) -> list[tuple[str, TrialRecord]]:
    """(task name, its fastest correct trial) for every task that has one: among the runs of
    the model tune ``tune``, or (``None``) among every trial of the task on the model's target.

    Only trials timed under the task's own protocol (``OperatorFamily.cache_flush``: its
    weights flushed) are ranked when it has any: a schedule timed warm reads faster than the
    same schedule with its weights flushed, so a database holding both would always pick a
    warm one. Without such trials (tuned with another ``MeasureConfig.cache_flush``, or before
    trials named their protocol) all of them are.

    Within a tune, trials rank by their fastest repeat, not their median: interference only
    adds time, and beside CPU burners a 2-thread task's repeats read 60 us and 2 ms in one
    measurement; by the median a 1-thread schedule at 1.4 ms won over kernels 20x faster and
    the "tuned" network was the untuned one. Across tunes they rank by their median, as
    ``RecordStore.best`` does."""
    runs_of: dict[str, list[int]] = {}
    for run_id, task_name, run_tune in store.model_runs(model.id):
        if tune is None or run_tune == tune:
            runs_of.setdefault(task_name, []).append(run_id)
    out: list[tuple[str, TrialRecord]] = []
    for task in model.tasks:
        if tune is None:
            found = store.trials(workload=task.workload, target=model.target)
        else:
            runs = runs_of.get(task.name, [])
            found = [t for run_id in runs for t in store.trials(run_id=run_id)]
        ok = [t for t in found if t.status is MeasureStatus.OK and t.result.run_secs]
        own = [t for t in ok if t.result.cache_flush is task.workload.spec.cache_flush]
        if tune is None:
            trial = min(own or ok, key=lambda t: (t.result.median_secs, t.id), default=None)
        else:
            trial = min(own or ok, key=lambda t: t.result.fastest_secs or math.inf, default=None)
        if trial is not None:
            out.append((task.name, trial))
    return out


def untuned_kept(task: ModelTask, trial: TrialRecord) -> bool:
    """Whether the network keeps ``task``'s default schedule although ``trial`` was tuned: its
    fastest repeat is no faster than the task's untuned time (its fastest repeat at import).
    The race builds it so, and the Model tab counts it so ("now"). Two times taken under
    different protocols (``CacheFlush``: a model imported before its tasks' weights were
    flushed) are not compared, and the tuned schedule is built."""
    fastest = trial.result.fastest_secs
    if task.untuned_secs is None or trial.result.cache_flush is not task.untuned_flush:
        return False
    return fastest is None or fastest >= task.untuned_secs


def best_times(
    model: ModelRecord,
    store: RecordStore,
    *,
    schedules: Sequence[tuple[str, TrialRecord]] | None = None,
) -> dict[str, float]:
    """Each tuned task's best time per call, as ``untuned_secs`` is taken (the fastest repeat
    of its best schedule), by task name: what ``model_times_info`` compares. ``schedules``:
    ``best_schedules(model, store)`` when the caller has it already."""
    if schedules is None:
        schedules = best_schedules(model, store)
    return {
        name: trial.result.fastest_secs
        for name, trial in schedules
        if trial.result.fastest_secs is not None
    }


def busy_note(race: ModelRace) -> str | None:
    """One sentence when other processes kept cores busy during ``race`` and its TVM builds
    ran on more than one thread, else ``None``.

    TVM's thread pool yields its cores while a thread waits, so beside a busy core most calls
    of a multi-thread build wait for another process's time slice: beside two CPU burners on
    two cores the tiny network's tuned build read 0.13-3.8 ms against 0.09 ms on the quiet machine,
    while ONNX Runtime and the 1-thread untuned build read as on the quiet machine.
    """
    others = race.environment.get("others_cpus")
    threads = int(race.environment.get("num_threads") or 1)
    # ``others_cpus`` counts cores: as a share of the builds' threads, the measurer's threshold
    if others is None or threads < 2 or float(others) / threads < BUSY:
        return None
    return (
        f"Other processes kept {float(others):.1f} of the cores busy during this race: the "
        f"{threads}-thread TVM builds waited for them and read slower than they run on a "
        "quiet machine; race again when it is quieter."
    )


@dataclass(frozen=True)
class MachineSpeed:
    """What a race's probes read (``machine_speed``): the peak's FMA kernel's fastest rate
    over the rounds (GFLOPS) against the kept peak (``None``: none kept), and the fastest call
    of a kernel that only starts the target's threads and joins them (µs)."""

    fma_gflops: float
    peak_gflops: float | None
    forkjoin_us: float

    @property
    def share_of_peak(self) -> float | None:
        return None if not self.peak_gflops else self.fma_gflops / self.peak_gflops


def machine_speed(race: ModelRace) -> MachineSpeed | None:
    """What ``race``'s probes read, or ``None`` for a race without them (raced before
    2026-12-07, or their kernels did not compile).

    Both are timed after each round with the contenders' timer. On this project's development
    VM, with no other process running, back-to-back races read the tiny network's 2-thread
    build at 105 to 187 µs, each steady within its race, while its 1-thread build and the FMA
    kernel's rate did not move; alternated with it, the fork-join kernel read 0.54-1.09 µs
    while it ran at 128 µs and 1.24-1.40 µs while it ran at 155 (docs/reproduction.md, "Race
    times from race to race": it warns, it does not tell every level apart)."""
    env = race.environment
    rates, joins = env.get(PROBE_GFLOPS), env.get(FORKJOIN_US)
    if not rates or not joins:
        return None
    peak = env.get(PEAK_GFLOPS)
    return MachineSpeed(
        max(float(r) for r in rates), None if peak is None else float(peak),
        min(float(j) for j in joins),
    )  # fmt: skip


def speed_text(race: ModelRace) -> str:
    """``race``'s probes in a few words, or "" for a race without them."""
    speed = machine_speed(race)
    if speed is None:
        return ""
    share = speed.share_of_peak
    peak = f"{share:.2f} of its peak" if share is not None else "no peak kept (`explorer peak`)"
    # The probe's fastest round: how fast a core ran when it had one, not how many were free
    # (a new user read "0.94 of its peak" beside "other processes kept 1.4 of the cores busy")
    return (
        f"its cores at {peak} when free (FMA probe, fastest round: "
        f"{speed.fma_gflops:.0f} GFLOPS), its threads started and joined in "
        f"{speed.forkjoin_us:.2f} µs"
    )


def speed_note(race: ModelRace, races: Sequence[ModelRace] = ()) -> str | None:
    """One sentence when ``race``'s probes read a slow machine, else ``None``: its FMA kernel
    below ``SLOW_MACHINE`` of the kept peak, or its fork-join kernel ``SLOW_JOIN`` times
    slower than in the quickest of ``races`` (the model's races; same CPU, same threads)."""
    speed = machine_speed(race)
    if speed is None:
        return None
    share = speed.share_of_peak
    if share is not None and share < SLOW_MACHINE:
        return (
            f"The machine ran at {share:.2f} of its peak during this race (the peak's FMA "
            f"kernel, timed after each round: {speed.fma_gflops:.0f} of "
            f"{speed.peak_gflops:.0f} GFLOPS): every time in it, ONNX Runtime's too, reads "
            "slower than this machine runs; race again to compare times."
        )
    same = [s for r in races if _same_machine(r, race) and (s := machine_speed(r)) is not None]
    quickest = min((s.forkjoin_us for s in same), default=speed.forkjoin_us)
    if speed.forkjoin_us > SLOW_JOIN * quickest:
        return (
            f"This race's threads took {speed.forkjoin_us / quickest:.1f}x as long to start and "
            f"join as in this model's quickest race here ({speed.forkjoin_us:.2f} against "
            f"{quickest:.2f} µs): its multi-thread builds read slower than the machine ran "
            "them then (most, a network of many short kernels); race again to compare times."
        )
    return None


def _same_machine(a: ModelRace, b: ModelRace) -> bool:
    keys = ("cpu_model", "num_threads")
    return all(a.environment.get(k) == b.environment.get(k) for k in keys)


def race_model(
    model: ModelRecord,
    store: RecordStore,
    *,
    tune: str | None = None,
    rounds: int = 3,
    seed: int = 0,
    untuned: bool = True,
    tune_relax_trials: int = 0,
    timeout_secs: float = 3600.0,
    on_step: Callable[[str], None] = lambda _: None,
    should_stop: Callable[[], bool] = lambda: False,
) -> ModelRace:
    """Build ``model`` with the best schedule of each task and race it (see the module doc);
    the race is stored and returned.

    With ``tune_relax_trials``, TVM's own ``tune_relax`` tunes the network first (in the child,
    with that many trials in all: give it the trials the ``tuned`` entry spent, for an equal
    budget) and its build is one more contender, ``tune_relax``.

    ``should_stop`` is polled while the child runs; ``True`` ends it (its process group) and
    nothing is stored.

    Raises:
        ModelError: the child process failed (it says why), or ran past ``timeout_secs``.
        RaceStopped: ``should_stop`` said stop.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1 (got {rounds})")
    from explorer import _tvm

    # A tuned schedule slower than TVM's default would make the "tuned" network slower.
    chosen = [
        (name, trial)
        for name, trial in best_schedules(model, store, tune=tune)
        if not untuned_kept(model.task(name), trial)
    ]
    schedules = tuple(
        (_tvm.save_json(trial.candidate.workload.mod()), trial.candidate.trace)
        for _, trial in chosen
    )
    plan = RacePlan(
        source=store.model_source(model.id),
        model=model,
        num_threads=model.target.num_cores,
        schedules=schedules,
        rounds=rounds,
        seed=seed,
        untuned=untuned,
        tune_relax_trials=tune_relax_trials,
    )
    relax = f", tune_relax with {tune_relax_trials} trials" if tune_relax_trials else ""
    on_step(
        f"building {model.name} with {len(chosen)} of {len(model.tasks)} tasks scheduled"
        f"{relax}, then {rounds} interleaved rounds against ONNX Runtime"
    )
    entries, versions = _run_child(plan, model.name, timeout_secs, should_stop)
    trials = tune_spent(model, store, tune)
    peak = cached_peak(model.target)  # what the probe's rate is compared with: never measured here
    race = ModelRace(
        0, model.id, tune, trials, tuple(entries),
        {**environment(), **versions, "num_threads": plan.num_threads,
         "tasks_scheduled": len(chosen),
         PEAK_GFLOPS: None if peak is None else round(peak.gflops_f32, 1)},
        time.time(),
    )  # fmt: skip
    return store.add_model_race(race)


def _run_child(
    plan: RacePlan, name: str, timeout_secs: float, should_stop: Callable[[], bool]
) -> tuple[list[RaceEntry], dict[str, Any]]:
    """``explorer.model._race_child`` run on ``plan`` (pickled through its stdin and stdout:
    a fresh interpreter, which imports nothing of the caller's ``__main__``)."""
    # The plan goes in through a file: communicate() sends its input once, and a retry after
    # a timeout (to poll should_stop) would leave a plan larger than the pipe half sent.
    with tempfile.TemporaryFile() as plan_file:
        pickle.dump(plan, plan_file)
        plan_file.seek(0)
        child = subprocess.Popen(
            [sys.executable, "-m", "explorer.model._race_child"],
            stdin=plan_file, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            # TVM's thread pool reads its size once, when it starts: the target's, from the
            # first kernel on (ONNX Runtime's is set on its session)
            env={**os.environ, "TVM_NUM_THREADS": str(plan.num_threads)},
            start_new_session=True,  # a scheduling group of its own (explorer.core._sched)
        )  # fmt: skip
    deadline = time.monotonic() + timeout_secs
    with child:
        try:
            while True:
                try:  # the output read so far is kept between tries
                    stdout, stderr = child.communicate(timeout=STOP_POLL_SECS)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if should_stop():
                    raise RaceStopped(
                        f"the race of {name} was stopped before it ended; nothing was stored"
                    )
                if time.monotonic() > deadline:
                    raise ModelError(f"racing {name} took more than {timeout_secs:.0f} s")
        except BaseException:  # a stop, the timeout, Ctrl-C: the child's group goes too
            _kill_group(child)
            raise
    done = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        why = said[-1] if said else f"exit status {done.returncode}"
        raise ModelError(
            f"the process building and racing {name} failed ({why}); nothing was stored"
        )
    reply = pickle.loads(done.stdout)
    if isinstance(reply, str):  # a ModelError of the child's: its sentence
        raise ModelError(reply)
    entries, versions = reply
    return list(entries), dict(versions)


STOP_POLL_SECS = 0.5
"""How often a race polls ``should_stop`` while its child runs."""


def _kill_group(child: subprocess.Popen[bytes]) -> None:
    """End the child and whatever it started (its session's process group), and reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # already gone
    child.wait()
