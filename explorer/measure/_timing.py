"""The timing protocol shared by local and remote runs: a kernel's arguments, warm up, then
time rounds of repeats until one is tight enough; and how an exception becomes a one-message
error."""

from __future__ import annotations

import math
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_ERROR_CHARS = 16_000  # TVM's diagnostics print the whole module; keep them, within reason


def kernel_args(
    module: Any, dev: Any, inputs: list[np.ndarray], out: Any, prepacked: dict[str, Any] | None
) -> list[Any]:
    """The arguments of ``module["main"]`` on ``dev``: the workload's inputs and ``out``; for
    a kernel built apart from its weight copies (a build's ``prepacked``, see
    ``split_weight_copies``), with the weights copied once, now, by its ``pack`` function,
    as a network does at build time."""
    from explorer import _tvm  # here: importing the measurer must not load TVM (its workers do)

    tensor = _tvm.tvm.runtime.tensor
    given = [tensor(x, dev) for x in inputs]
    if not prepacked:
        return [*given, out]
    packed = [_tvm.tvm.runtime.empty(shape, dtype, dev) for shape, dtype in prepacked["packed"]]
    module["pack"](*[given[i] for i in prepacked["pack_inputs"]], *packed)
    by_kind = {"input": given, "packed": packed}
    return [*(by_kind[kind][i] for kind, i in prepacked["args"]), out]


def warm_up(kernel: Any, args: list[Any], secs: float, *, done_secs: float = 0.0) -> float:
    """Run the kernel untimed for about ``secs`` (at least once): after idle the runtime's
    worker threads sleep and the caches are cold, and the first timed repeats paid for it.

    ``done_secs``: how long the kernel has just run untimed already (the correctness check's
    call); only the rest is run. A slow kernel (an unscheduled matmul 1024 takes seconds) is
    then not run once more for nothing, which kept it within its run timeout.

    Returns the fastest call seen (``done_secs`` when no call was made): the timing sizes its
    samples with it (``time_main``).
    """
    start = time.perf_counter() - done_secs
    fastest = done_secs if done_secs > 0 else math.inf
    ran = done_secs > 0
    while not ran or time.perf_counter() - start < secs:
        before = time.perf_counter()
        kernel(*args)
        fastest = min(fastest, time.perf_counter() - before)
        ran = True
    return fastest


def keep_off_worker_cores() -> frozenset[int] | None:
    """Bind the calling thread (the one that launches kernels, which runs TVM's task 0 itself)
    to the allowed cores that TVM's worker threads are not bound to; returns them, or ``None``
    when there is nothing to do (one thread, unbound workers, or no such information here).

    TVM binds each worker thread to a core of its own but leaves the launching thread free to
    move, expecting the OS to keep it on the idle core 0. On a busy machine the OS moves it
    onto a worker's core for seconds at a time, and a 2-thread kernel then runs its halves one
    after the other: with two CPU burners, matmul 256 read 0.30 ms with the launching thread on
    core 0 (81% of samples that fast) and 0.59 ms on core 1 (0% that fast), and unbound it
    flipped between the two from one measurement to the next. Call once TVM's thread pool
    exists (after a kernel ran).
    """
    try:
        allowed = os.sched_getaffinity(0)
        taken: set[int] = set()
        for task in os.listdir("/proc/self/task"):
            if int(task) == threading.get_native_id():
                continue
            with open(f"/proc/self/task/{task}/status") as fh:
                cpus = next(
                    (
                        ln.split(":", 1)[1].strip()
                        for ln in fh
                        if ln.startswith("Cpus_allowed_list")
                    ),
                    "",
                )
            if cpus.isdigit():  # a thread bound to one core: a TVM worker
                taken.add(int(cpus))
        free = frozenset(allowed - taken)
        if not taken or not free or free == allowed:
            return None
        os.sched_setaffinity(0, free)  # 0: the calling thread
        return free
    except (AttributeError, OSError, ValueError):  # not Linux, or a thread ended meanwhile
        return None


def spread(secs: list[float]) -> float:
    """(max - min) / median of ``secs``."""
    med = statistics.median(secs)
    return (max(secs) - min(secs)) / med if med > 0 else math.inf


def timed_rounds(
    time_once: Callable[[], list[float]], *, max_rounds: int, max_spread: float, budget_secs: float
) -> tuple[list[float], int]:
    """Time up to ``max_rounds`` rounds until one spreads at most ``max_spread``.

    Returns the round with the lowest median (the tighter one on a tie), whole, and how many
    rounds ran. Interference only ever adds time, so the lowest round is the one least touched
    by it, even when it is not the tightest: a round slowed evenly throughout (another process
    held a core the whole time) is tight and wrong. Rounds are never mixed, so a result's
    repeats come from one stretch of time. Another round starts only while the time spent plus
    one more round stays within ``budget_secs`` (part of the run timeout).
    """
    start = time.perf_counter()
    rounds: list[list[float]] = []
    while True:
        before = time.perf_counter()
        rounds.append(time_once())
        took = time.perf_counter() - before
        if spread(rounds[-1]) <= max_spread or len(rounds) >= max_rounds:
            break
        if time.perf_counter() - start + took > budget_secs:
            break
    return min(rounds, key=lambda r: (statistics.median(r), spread(r))), len(rounds)


# From this long a call on, repeats are timed here, one call each (perf_counter around the call
# and a device sync), not by TVM's time_evaluator, whose first call is untimed, and the check's
# call (timed the same way) is the first repeat: at a second a call the Python overhead
# (microseconds) and a cold start (milliseconds) are nothing, and each call saved is a second or
# more. The unscheduled matmul 1024 (7 s a call) fits its 20 s run timeout only so.
LONG_CALL_SECS = 1.0


def repeats_that_fit(
    repeat: int, call_secs: float, budget_secs: float, *, extra_calls: int = 1
) -> int:
    """How many of ``repeat`` repeats one timing round can afford, for a kernel whose call
    takes ``call_secs``: all of them when they fit ``budget_secs``, else as many as fit, but
    never fewer than 2. ``extra_calls``: calls the round makes besides its repeats (TVM's
    time_evaluator makes 1 untimed call), or -1 when a call already made is its first repeat.

    A kernel of seconds a call (an unscheduled matmul 1024) once spent its whole run timeout on
    5 repeats and was reported ``TIMEOUT``, with no time at all; 2 or 3 repeats of it are a
    measurement, and a slow one is never the best anyway."""
    if call_secs * (repeat + extra_calls) <= budget_secs:  # NaN-safe: compared, not divided
        return repeat
    affordable = int(budget_secs // call_secs) - extra_calls
    return max(min(repeat, affordable), min(repeat, 2))


def _call_by_call(module: Any, dev: Any, args: list[Any], n: int) -> list[float]:
    """``n`` repeats of one call each, timed here (kernels of ``LONG_CALL_SECS`` or more)."""
    main, out = module["main"], []
    for _ in range(n):
        start = time.perf_counter()
        main(*args)
        dev.sync()
        out.append(time.perf_counter() - start)
    return out


# A sample is the mean of this much of back-to-back calls (one call when a call is longer), so
# the timer's resolution and the call's own overhead stay below a percent of it.
SAMPLE_SECS = 1e-4
_MAX_CHUNKS = 16  # a repeat's samples come in at most this many calls of the device's timer
MAX_SAMPLES = 128  # a repeat topped up (``_Sampler.repeats``) stops at this many samples
STALL_SAMPLES = 64  # ... or when this many of its samples in a row brought no faster one
TOP_UP_WINDOWS = 25  # ... or when the repeats topped up together spent this many windows each
CONFIRM_RATIO = 1.25  # a repeat this close to the measurement's fastest sample is undisturbed


def time_main(
    module: Any,
    dev: Any,
    args: list[Any],
    req: dict[str, Any],
    *,
    first_call_secs: float = 0.0,
    call_secs: float = 0.0,
) -> tuple[list[float], int]:
    """Time ``module["main"]`` on ``dev`` with TVM's ``time_evaluator`` (on the device itself,
    local or remote), in rounds per the run request's settings (``timed_rounds``).

    A repeat lasts about the request's ``min_repeat_secs`` and reads the *fastest* of its
    samples (each sample is one call, or the mean of back-to-back calls summing to
    ``SAMPLE_SECS``). Another process on the cores only ever adds time to a sample, and on a
    busy machine some samples of a short kernel still run undisturbed, so the fastest is what
    the kernel costs; the mean of the same stretch (TVM's own repeat) moved 8x between
    measurements beside two CPU burners. A kernel of a repeat's length or more has one sample
    a repeat.

    ``first_call_secs`` is how long the kernel's first call took: the correctness check's;
    ``call_secs`` the fastest call of the warm-up (``warm_up``), which sizes the samples.
    With the request's ``hopeless_secs`` (a search's best so far, or the batch's fastest kernel
    before this one, times ``MeasureConfig.hopeless_ratio``), a kernel whose first call was
    that slow is timed 2 repeats first, and stops there when both are that slow too: it cannot
    be the best, and the other repeats would only cost time (most of a search's timing on
    matmul 1024, whose random candidates take 20 ms to 2 s a call); a kernel whose check's
    call took ``LONG_CALL_SECS`` or more stops after that call alone. With
    ``hopeless_min_call_secs`` (a side-by-side re-timing: ``_batch.CUT_MIN_CALL_SECS``) only
    a kernel whose check's call took that long is cut: a faster one's round costs a fraction
    of a second, and a slow round of it may be the machine's load. Otherwise the round has
    all its repeats (``repeats_that_fit``). A kernel of ``LONG_CALL_SECS`` or more a call is
    timed call by call here, its check's call first (``first_call_secs`` must then be a
    timing of a completed call: the device synchronised).
    """
    budget = float(req.get("timing_budget_secs", math.inf))
    call = call_secs if call_secs > 0 else first_call_secs
    long_calls = max(first_call_secs, call) >= LONG_CALL_SECS
    carried = [first_call_secs] if first_call_secs >= LONG_CALL_SECS else []
    # Long calls: the check's call is the first round's first repeat, so it is not counted.
    repeat = repeats_that_fit(
        int(req["repeat"]), call, budget, extra_calls=-len(carried) if long_calls else 1
    )
    sampler = _Sampler(
        module,
        dev,
        args,
        window=float(req["min_repeat_secs"]),
        flush=int(req.get("cache_flush_bytes", 0)),
        flush_arguments=bool(req.get("flush_arguments", False)),
        fastest=call if call > 0 else math.inf,
        long_calls=long_calls,
        carried=carried,
        deadline=time.perf_counter() + budget,
    )
    hopeless = req.get("hopeless_secs")
    if first_call_secs < float(req.get("hopeless_min_call_secs", 0.0)):
        hopeless = None
    # A long call is a reading in itself: the check's call alone tells a hopeless one, and
    # each call saved is a second or more (the unscheduled matmul 1024: 6-7 s).
    probe = 1 if carried else 2
    if hopeless is None or first_call_secs < float(hopeless) or repeat <= probe:

        def time_once() -> list[float]:
            return sampler.repeats(repeat)

    else:

        def time_once() -> list[float]:
            head = sampler.repeats(probe)
            if min(head) >= float(hopeless):
                return head
            return head + sampler.repeats(repeat - probe)

    return timed_rounds(
        time_once,
        max_rounds=int(req.get("timing_rounds", 1)),
        max_spread=float(req.get("max_spread", math.inf)),
        budget_secs=budget,
    )


@dataclass
class _Sampler:
    """Repeats of one kernel, each the fastest sample of about ``window`` seconds (see
    ``time_main``), timed on the device by TVM's ``time_evaluator``; call by call here when
    a call takes ``LONG_CALL_SECS`` or more."""

    module: Any
    dev: Any
    args: list[Any]
    window: float
    flush: int  # bytes written before each sample (``CacheFlush.ALL``)
    fastest: float  # the fastest call seen (a sample's mean); inf: none yet
    long_calls: bool
    carried: list[float]  # timed calls already made, that are the next repeats
    deadline: float = math.inf  # perf_counter time by which topping up stops
    flush_arguments: bool = False  # every argument but the first flushed before each sample
    timers: dict[tuple[int, int], Any] = field(default_factory=dict)

    def samples(self, number: int, k: int) -> list[float]:
        """``k`` samples of ``number`` calls each, on the device (TVM makes one untimed call
        first)."""
        if (number, k) not in self.timers:
            self.timers[number, k] = self.module.time_evaluator(
                "main",
                self.dev,
                number=number,
                repeat=k,
                min_repeat_ms=0,  # the samples are sized here
                cooldown_interval_ms=0,
                repeats_to_cooldown=1,
                cache_flush_bytes=self.flush,
                **({"f_preproc": "cache_flush_cpu_non_first_arg"} if self.flush_arguments else {}),
            )
        return [float(x) for x in self.timers[number, k](*self.args).results]

    def repeats(self, n: int) -> list[float]:
        """``n`` repeats. One timer call times them all, sized from the fastest call seen so
        far; when that was a disturbed call (too slow: a cold check call, a busy warm-up), the
        repeats fall short of their window and one more call tops them up, sized from what
        the samples showed.

        A repeat whose fastest sample is still above ``CONFIRM_RATIO`` times the fastest
        sample seen in this measurement is topped up too, up to ``MAX_SAMPLES`` samples and
        within the deadline: beside CPU burners on every core, a 2-thread kernel's calls
        mostly wait for a burner's time slice (TVM's pool yields to it while it waits). A
        19 us matmul read 8 ms in its median call beside two burners on two cores, 2-6% of its
        calls ran undisturbed, a 20 ms window held 2 or 3 calls, and whole repeats read 4-16
        ms: a search chose a 1-thread program over kernels 30x faster. An undisturbed call,
        once seen, shows what the others can reach. On a quiet machine every repeat already
        does, and nothing changes; with a window of 0 (one call a repeat) nothing is topped
        up. Topping up stops for a repeat whose last ``STALL_SAMPLES`` samples brought no
        faster one, and for all after ``TOP_UP_WINDOWS`` windows a repeat: beside one busy
        core a 2-thread kernel's calls mostly wait for the other core (its worker is bound
        to it), and topping up to the deadline made a 2-trial tune of matmul 8 take 46 s
        instead of 8."""
        if self.long_calls:
            head = self.carried[:n]
            self.carried.clear()
            return head + _call_by_call(self.module, self.dev, self.args, n - len(head))
        seen: list[list[float]] = [[] for _ in range(n)]
        gained = [0] * n  # how many samples a repeat had when its fastest one came
        topping_until: float | None = None
        spent = [0.0] * n
        short = list(range(n))
        for _ in range(_MAX_CHUNKS):
            sized = math.isfinite(self.fastest)  # no call seen yet: one sample of one call
            pooled = [x for j in short for x in seen[j]]
            # What a call takes now, not at its best: beside a busy core a 2-thread kernel's
            # fastest call was 3 us and its typical one 4 ms, and a chunk sized from the
            # fastest (200 samples of 34 calls a repeat) ran past the 20 s run timeout. So the
            # first chunk is one sample a repeat, and the next ones are sized from it.
            per_call = statistics.median(pooled) if pooled else self.fastest
            number = max(1, math.ceil(SAMPLE_SECS / per_call))
            left = max(self.window - min(spent[j] for j in short), 0.0)
            k = max(1, round(left / (number * per_call))) if pooled else 1
            deadline = self.deadline
            if all(seen[j] and spent[j] >= 0.9 * self.window for j in short):  # topping up
                k = min(max(k, 4), MAX_SAMPLES - max(len(seen[j]) for j in short))
                if topping_until is None:
                    topping_until = time.perf_counter() + TOP_UP_WINDOWS * self.window * len(short)
                deadline = min(deadline, topping_until)
            affordable = (deadline - time.perf_counter()) / (number * per_call * len(short))
            if math.isfinite(affordable):  # every repeat gets a sample, deadline or not
                k = min(k, max(int(affordable), 0 if all(seen[j] for j in short) else 1))
            if k < 1:
                break
            got = self.samples(number, k * len(short))
            for slot, j in enumerate(short):
                mine = got[slot * k : (slot + 1) * k]
                if not seen[j] or min(mine) < min(seen[j]):
                    gained[j] = len(seen[j]) + mine.index(min(mine)) + 1
                seen[j].extend(mine)
                spent[j] += number * sum(mine)
            self.fastest = min(self.fastest, *got)  # a sample is the mean of its calls
            short = [
                j
                for j in range(n)
                if len(seen[j]) < MAX_SAMPLES
                and (
                    spent[j] < 0.9 * self.window
                    or (self._disturbed(seen[j]) and len(seen[j]) - gained[j] < STALL_SAMPLES)
                )
            ]
            one_call_fills = sized and pooled and k == 1 and number == 1  # not the first chunk
            if not short or (one_call_fills and self._settled(seen)):
                break  # one call fills a window
        return [min(s) for s in seen]

    def _settled(self, seen: list[list[float]]) -> bool:
        return not any(self._disturbed(s) for s in seen)

    def _disturbed(self, samples: list[float]) -> bool:
        # A window of 0 asks for one call a repeat: nothing is topped up.
        return self.window > 0 and min(samples) > CONFIRM_RATIO * self.fastest


def message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if len(text) > MAX_ERROR_CHARS:
        half = MAX_ERROR_CHARS // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
    return text
