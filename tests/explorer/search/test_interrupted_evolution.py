"""Ctrl-C while MetaSchedule's evolution runs our postprocessor in TVM's threads.

Reproduced with a new user's `explorer model tune tiny --trials 40`, Ctrl-C from a terminal
during a chunk (SIGINT to the process group), 3 of 3 tries: killed by SIGSEGV, by SIGABRT
("terminate called without an active exception"), or "internal error (RuntimeError:
parallel_for_dynamic error with)" and the chunk's run marked failed. The script below drives the
evolution in the main thread of a process of its own and sends it SIGINT during a round (every
delay here landed inside one, and failed so, before the fix)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from explorer.core import interrupts_held

ROOT = Path(__file__).resolve().parents[3]

DRIVE = """
import os, signal, sys, threading, time
import numpy as np
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (CI: ignored)
from explorer.core._records import TrialRecord
from explorer.measure import MeasureResult
from explorer.search import make_strategy
from explorer.space import DesignSpace
from explorer.target import Target
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

space = DesignSpace.of(get_workload("matmul", M=256, N=256, K=256), Target.local_cpu())
strategy = make_strategy("evolutionary")
strategy.reset(space, rng=np.random.default_rng(0))
told = 0

def tell(cands):
    global told
    records = []
    for c in cands:
        secs = 1e-3 * (1 + told % 7)
        result = MeasureResult(MeasureStatus.OK, run_secs=(secs, secs, secs), flops=1)
        records.append(TrialRecord(told, 1, told, c, result, {}, 0.0))
        told += 1
    strategy.tell(records)

tell(strategy.ask(space.num_sketches))  # a random round: no evolution yet

def interrupt():
    time.sleep(float(sys.argv[1]))
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
try:
    while True:
        tell(strategy.ask(16))  # MetaSchedule's rounds
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    os._exit(130)
except BaseException as exc:
    print(f"{type(exc).__name__}: {exc}", flush=True)
    os._exit(1)
"""


@pytest.mark.parametrize("delay", [0.3, 1.5])
def test_ctrl_c_during_an_evolution_round_is_a_keyboard_interrupt_after_it(delay) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TVM_NUM_THREADS": "2"}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVE, str(delay)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert (proc.returncode, proc.stdout.strip()) == (130, "KeyboardInterrupt"), (
        proc.returncode,
        proc.stdout,
        proc.stderr[-2000:],
    )


def test_held_signals_are_raised_on_the_way_out_in_order_once_each() -> None:
    seen: list[int] = []

    def record(signum: int, frame: object) -> None:
        seen.append(signum)

    before = {s: signal.signal(s, record) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with interrupts_held():
            with interrupts_held():  # nested: the outer one keeps what the inner gives back
                signal.raise_signal(signal.SIGTERM)
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM, signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is record
        with interrupts_held():
            pass
        assert seen == [signal.SIGTERM, signal.SIGINT]  # nothing kept, nothing raised
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_keyboard_interrupt_held_reaches_the_caller_after_the_block() -> None:
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    finished = False
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupts_held():
                signal.raise_signal(signal.SIGINT)
                finished = True  # the block is not cut short
        assert finished
    finally:
        signal.signal(signal.SIGINT, before)


def test_outside_the_main_thread_nothing_changes() -> None:
    handlers: list[object] = []

    def look() -> None:
        with interrupts_held():
            handlers.append(signal.getsignal(signal.SIGINT))

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    assert handlers == [before]
