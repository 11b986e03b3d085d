"""The child process of ``race_model``: reads a pickled ``RacePlan`` on stdin, builds the
network untuned and tuned, checks both against ONNX Runtime, times the three in interleaved
rounds (after each round, the machine's probes too: its speed and its cores' latency then),
and writes the pickled (entries, versions) on stdout (or a ``ModelError``'s sentence)."""

from __future__ import annotations

import functools
import math
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from explorer.core import RaceEntry
from explorer.errors import ModelError
from explorer.machine import BusyElsewhere, fma_probe, forkjoin_probe
from explorer.measure import CONFIRM_RATIO, keep_off_worker_cores
from explorer.model._race import (
    FORKJOIN_US,
    MAX_ERROR,
    ONNXRUNTIME,
    PROBE_GFLOPS,
    TUNE_RELAX,
    TUNED,
    UNTUNED,
    RacePlan,
)
from explorer.text import last_line

MIN_PER_ITER = 4
ROUND_SECS = 0.3  # each contender's share of a round: its fastest call of this long
MAX_ROUND_SECS = 3.0  # ... or longer, while it has not reached its fastest (``_fastest_call``)


def race(plan: RacePlan) -> tuple[list[RaceEntry], dict[str, Any]]:
    import onnxruntime

    from explorer import _tvm
    from explorer.model._import import lower_as_stored
    from explorer.model._onnx import parse_onnx

    model = plan.model
    onnx_file = parse_onnx(
        plan.source, "the stored model", {i.name: i.shape for i in model.inputs}
    )
    lowered, _ = lower_as_stored(onnx_file, model, "the stored model")
    target = model.target.to_tvm()
    rng = np.random.default_rng(plan.seed)
    inputs = [_random_input(rng, i.shape, i.dtype) for i in onnx_file.inputs]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = plan.num_threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        plan.source, options, providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in onnx_file.inputs]
    feed = dict(zip(names, inputs, strict=True))
    runners: dict[str, Callable[[], Sequence[Any]]] = {
        ONNXRUNTIME: lambda: session.run(None, feed)
    }
    errors: dict[str, str] = {}
    tuned_schedules = [(_tvm.load_json(m), t) for m, t in plan.schedules]
    builds: list[tuple[str, Callable[[], Any]]] = [
        (TUNED, lambda: _tvm.build_relax(lowered, target, tuned_schedules))
    ]
    if plan.untuned:
        builds.insert(0, (UNTUNED, lambda: _tvm.build_relax(lowered, target)))
    if plan.tune_relax_trials:
        builds.append((TUNE_RELAX, lambda: _tune_relax_build(lowered, target, plan)))
    for name, build in builds:
        try:
            runners[name] = functools.partial(_tvm.relax_runner(build()), *inputs)
        except Exception as exc:  # noqa: BLE001  (a build failure is the entry's result)
            errors[name] = last_line(exc)
    expected = [np.asarray(x) for x in session.run(None, feed)]
    max_error: dict[str, float] = {}
    for name, run in runners.items():
        if name == ONNXRUNTIME:  # the reference: it has no error of its own
            continue
        got = [np.asarray(x) for x in run()]
        max_error[name] = _relative_error(got, expected)
        if max_error[name] > MAX_ERROR:
            errors[name] = (
                f"its output differs from ONNX Runtime's by {max_error[name]:.2g} of the "
                f"largest value (at most {MAX_ERROR:g} is a float32 rounding difference)"
            )
    found: dict[str, Any] = {"onnxruntime_version": onnxruntime.__version__}
    probes: dict[str, Callable[[], Any]] = {}  # the machine's speed and its cores' latency
    flops = 0.0
    try:
        probes[PROBE_GFLOPS], flops = fma_probe(model.target)
        probes[FORKJOIN_US] = forkjoin_probe(model.target)
    except Exception as exc:  # noqa: BLE001  (the race goes on without them)
        found["probe_error"] = last_line(exc)
    # as the measurer does, now that TVM's pool exists; and after ONNX Runtime's session
    # exists: threads it created later would share this thread's one core
    keep_off_worker_cores()
    timed = {n: run for n, run in runners.items() if n not in errors}
    watch = BusyElsewhere()
    round_secs, probe_secs = _rounds(timed, probes, plan.rounds)
    entries = [
        RaceEntry(name, tuple(round_secs.get(name, ())), max_error.get(name), errors.get(name))
        for name in [*(n for n, _ in builds), ONNXRUNTIME]
    ]
    if probes and plan.rounds:
        found[PROBE_GFLOPS] = [round(flops / secs / 1e9, 1) for secs in probe_secs[PROBE_GFLOPS]]
        found[FORKJOIN_US] = [round(secs * 1e6, 3) for secs in probe_secs[FORKJOIN_US]]
    found["others_cpus"] = round(watch.cores(), 2)
    return entries, found


Calls = dict[str, Callable[[], Any]]


def _rounds(
    runners: Calls, probes: Calls, rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each runner's fastest call in each round (each round in another order: no contender
    always goes first), and after each round each probe's (``machine_speed``)."""
    timed = list(runners)
    round_secs: dict[str, list[float]] = {n: [] for n in timed}
    probe_secs: dict[str, list[float]] = {n: [] for n in probes}
    for r in range(rounds):
        order = timed[r % len(timed) :] + timed[: r % len(timed)] if timed else []
        for name, run in [*((n, runners[n]) for n in order), *probes.items()]:
            secs = round_secs if name in runners else probe_secs
            secs[name].append(_fastest_call(run, min(secs[name], default=math.inf)))
    return round_secs, probe_secs


def relax_per_iter(trials: int, num_tasks: int) -> int:
    """``tune_relax``'s trials per task and round: its default, 64, when the budget allows,
    else small enough that every task gets a first round within half the budget. As shipped
    (64) at 500 trials on ResNet-18's 19 tasks, its first round in task order would spend the
    whole budget on 8 tasks and leave the rest unscheduled: a weaker baseline than TVM is."""
    return max(MIN_PER_ITER, min(64, trials // (2 * max(num_tasks, 1))))


def _tune_relax_build(lowered: Any, target: Any, plan: RacePlan) -> Any:
    """``tune_relax`` as TVM recommends it for CPUs, with its weights' layouts free (its
    ``cpu_weight_prepack``): at 150 trials on ResNet-18 its build took 0.885 of the time it
    took as shipped (``benchmarks/bench_prepack.py``; docs/reproduction.md, "Whole networks")."""
    from explorer import _tvm

    free = _tvm.with_weights_layout_free(lowered)
    with tempfile.TemporaryDirectory(prefix="explorer-tune-relax-") as work_dir:
        trials = plan.tune_relax_trials
        database = _tvm.tune_relax(
            free, target, work_dir, trials, per_iter=relax_per_iter(trials, len(plan.model.tasks)),
            seed=plan.seed,
        )  # fmt: skip
        return _tvm.build_relax(free, target, database=database)


def _fastest_call(run: Callable[[], Any], seen: float = math.inf) -> float:
    """The fastest of as many calls as fit in ``ROUND_SECS`` (one at least), each timed with
    ``perf_counter`` around it: interference only ever adds time to a call.

    While that is above ``CONFIRM_RATIO`` times ``seen`` (the contender's fastest call in an
    earlier round), the round goes on, up to ``MAX_ROUND_SECS``: beside CPU burners a network
    of 2-thread kernels waits for a burner's time slice in most calls, and a round of 0.3 s
    read a tuned network 5-50x slower than its undisturbed calls."""
    times: list[float] = []
    start = time.perf_counter()
    while True:
        before = time.perf_counter()
        run()
        times.append(time.perf_counter() - before)
        took = time.perf_counter() - start
        if took >= MAX_ROUND_SECS or (took >= ROUND_SECS and min(times) <= CONFIRM_RATIO * seen):
            return min(times)


def _random_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype=dtype)  # indices (token ids, say): 0 is valid for every table


def _relative_error(got: list[np.ndarray], expected: list[np.ndarray]) -> float:
    if len(got) != len(expected) or any(
        g.shape != e.shape for g, e in zip(got, expected, strict=True)
    ):
        return math.inf
    worst = 0.0
    for g, e in zip(got, expected, strict=True):
        scale = float(np.abs(e).max()) if e.size else 0.0
        diff = float(np.abs(g.astype(np.float64) - e).max()) if e.size else 0.0
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst


def main() -> None:
    plan = pickle.loads(sys.stdin.buffer.read())
    # The reply is the only thing on stdout: whatever TVM or a runtime prints goes to stderr.
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        reply: Any = race(plan)
    except ModelError as exc:
        reply = str(exc)
    with os.fdopen(reply_fd, "wb") as out:
        out.write(pickle.dumps(reply))


if __name__ == "__main__":
    main()
