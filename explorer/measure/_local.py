"""``LocalMeasurer``: build and time candidates on this machine, in isolated worker processes.

Pipeline for one ``measure`` call (a batch):

1. Build every candidate in parallel on ``num_build_workers`` builder processes (one TVM
   thread each): rebuild the workload's module from its JSON, replay the JSON trace, compile
   for the target and ``export_library`` to a temporary ``.so``. Only as many builders start
   as the batch has candidates; a batch of one is built by the runner, with no builder at all
   (each worker process costs a TVM import, about a second of CPU). The latest builds are kept
   (``_builds``): a schedule built by an earlier call, as a run's confirmation re-times its
   best, is not built again.
2. Run the built ones one after another on a single runner process, so two kernels never
   compete for the cores while one is timed: load the ``.so``, run it once on
   ``Workload.random_inputs(seed)`` and compare with the NumPy reference, warm it up, then time
   it (``_timing.time_main``: each repeat the fastest of its samples; more rounds while the
   repeats spread wide; ``MeasureConfig``).
   The runner's ``TVM_NUM_THREADS`` is ``config.num_threads`` or else the target's core count,
   set in its environment before TVM's thread pool starts.

While one candidate is timed, this measurer holds ``TIMING_GATE.timing()`` (``_gate``): cost
models of this process wait to train or predict until the kernel is timed, and the timing
waits for one in progress. Builds do not hold it, so other work interleaves between kernels. A
correct kernel is ``OK`` however busy the machine was: how widely its repeats spread is part
of the result (``MeasureResult.spread``, ``is_noisy``), information rather than a verdict.

By default the runs start once the whole batch is built. On a 2-core machine a compile next to
a timed kernel skews that timing: measured on 16 MetaSchedule samples of matmul 256^3,
``overlap=True`` (run each candidate as soon as it is built) saved ~18 % of the wall time but
timed single candidates up to 6x slow. Use it for rough exploration only.

Failures are data. A trace that does not replay or compile is ``BUILD_ERROR`` (TVM's message);
an output that differs from NumPy is ``WRONG_RESULT``; a kernel that kills its process is
``RUN_ERROR`` ("worker crashed (signal SIGSEGV) ..."); one that outlives the timeout is
``TIMEOUT``; one whose process grows past ``config.memory_limit_bytes`` is ``RUN_ERROR``
("killed: exceeded the memory limit of N MiB"). The lost worker is replaced and the next
candidate proceeds as usual; the calling process is never at risk.

Broken kernels for tests come through this same path: ``explorer.testing.hooks`` registers a
test-only workload family whose kernels crash, hang, hog memory or disagree with their
reference. The measurer has no test-only entry point.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import threading
import uuid
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, wait
from typing import TYPE_CHECKING, Any

from explorer._process import owned_temp_dir
from explorer.core import (
    TIMING_GATE,
    Candidate,
    MeasureResult,
    WorkerLost,
    WorkerPool,
    server_pids,
    shutdown_pool,
)
from explorer.measure._base import MeasureConfig, Measurer, is_own_reference
from explorer.measure._batch import CUT_MIN_CALL_SECS, Batch
from explorer.measure._builds import Build, BuildCache, build_key
from explorer.target import Target, available_cores, cuda_available
from explorer.types import CacheFlush, MeasureStatus

if TYPE_CHECKING:  # imports TVM, which this module does not need (see ``start_workers``)
    from explorer.workloads import Workload


class LocalMeasurer(Measurer):
    """Measure candidates on the local CPU, isolated in a persistent pool of worker processes.

    Workers start on the first ``measure`` call, or earlier in the background with
    ``start_workers`` (about a second of CPU each), and are reused by every later call;
    ``close`` (or leaving a ``with`` block) stops them. One ``measure`` runs at a time;
    concurrent calls from several threads are serialised.

    Args:
        config: timing, timeout and memory settings.
        num_build_workers: parallel builder processes (default: the local core count).
        seed: seed of ``Workload.random_inputs`` for the correctness check and the timing.
        overlap: run each candidate as soon as it is built, while later ones still build.
            Faster, but compiles then compete with the kernel being timed (see module docs).

    Example:
        >>> from explorer import _tvm
        >>> from explorer.measure import Candidate, LocalMeasurer, MeasureConfig
        >>> from explorer.target import Target
        >>> from explorer.workloads import get_workload
        >>> w = get_workload("matmul", M=64, N=64, K=64)
        >>> trace = _tvm.trace_to_json(_tvm.Schedule(w.mod()).trace)
        >>> with LocalMeasurer(MeasureConfig(repeat=3)) as m:
        ...     (r,) = m.measure([Candidate(w, Target.local_cpu(), trace)])
        >>> r.is_ok, len(r.run_secs)
        (True, 3)
    """

    times_here = True

    def __init__(
        self,
        config: MeasureConfig | None = None,
        *,
        num_build_workers: int | None = None,
        seed: int = 0,
        overlap: bool = False,
    ) -> None:
        if config is not None and not isinstance(config, MeasureConfig):
            raise TypeError(f"config must be a MeasureConfig (got {type(config).__name__})")
        if num_build_workers is not None and num_build_workers < 1:
            raise ValueError(f"num_build_workers must be at least 1 (got {num_build_workers})")
        self.config = config if config is not None else MeasureConfig()
        self.num_build_workers = num_build_workers
        self.seed = seed
        self.overlap = overlap
        self._pool: WorkerPool | None = None
        self._artifact_dir: str | None = None
        self._finalizer: weakref.finalize[..., LocalMeasurer] | None = None
        self._builds = BuildCache()  # files in _artifact_dir, removed with it at close
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"LocalMeasurer(config={self.config!r}, num_build_workers={self.num_build_workers}, "
            f"seed={self.seed}, overlap={self.overlap})"
        )

    # -- public API ---------------------------------------------------------------------------
    def measure(
        self,
        candidates: Sequence[Candidate],
        *,
        best_secs: float | None = None,
        reference: bool = False,
    ) -> list[MeasureResult]:
        """Build, check and time every candidate; one result each, in order.

        With ``best_secs`` (a search's best so far; ``math.inf`` when it has none yet), a kernel
        whose check call and first 2 repeats each take ``config.hopeless_ratio`` times as long
        as that, or as the fastest kernel of this batch timed before it, stops after those 2
        (after its check's call alone when that took ``_timing.LONG_CALL_SECS`` or more).
        With ``reference`` (a run's unscheduled program), so does a kernel whose check's call
        and 2 repeats took ``CUT_MIN_CALL_SECS`` or more each: at 0.1 s a call a repeat is one
        call, far above a busy machine's time slices, and the run's confirmation re-times it
        beside the best (cut the same way), which decides. The unscheduled matmul 1024 was
        timed twice before every search, 5 s a call.

        Raises:
            RuntimeError: the measurer is closed.
            TypeError: an element is not a ``Candidate``, or ``reference`` is not a bool.
        """
        cands = _checked(candidates)
        if not isinstance(reference, bool):
            raise TypeError(f"reference must be True or False (got {reference!r})")
        with self._lock:
            self._check_open()
            per_round = self._measure(
                cands, rounds=1, best=_checked_best(best_secs), reference=reference
            )
            return [rs[0] for rs in per_round]

    def measure_paired(
        self, candidates: Sequence[Candidate], *, rounds: int = 3
    ) -> list[list[MeasureResult]]:
        """Time candidates side by side: each is built once, then every round times each of
        them in turn, so two readings of one round were taken under the same load.

        After a round, a candidate ``config.hopeless_ratio`` times slower than that round's
        fastest and taking ``CUT_MIN_CALL_SECS`` or more a call is not timed again (the
        unscheduled matmul 1024 takes 7 s a call); faster ones get every round, since one
        slow round of theirs may be the machine's load. Such a candidate is cut within the
        first round already, against the fastest candidate timed before it, as a search's
        hopeless kernel is (``measure``), by its check's call: 2 repeats, or that call alone
        from ``_timing.LONG_CALL_SECS`` a call on.

        Returns:
            Per candidate, its result of each round it was timed in (the first round's is
            checked against NumPy); a failure ends a candidate's rounds.
        """
        cands = _checked(candidates)
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1 (got {rounds})")
        with self._lock:
            self._check_open()
            return self._measure(cands, rounds=rounds, best=None, retiming=True)

    def start_workers(
        self, *, num_candidates: int | None = None, num_threads: int | None = None
    ) -> None:
        """Start the workers in the background and return at once; ``measure`` waits for them.

        Each worker imports TVM (about a second of CPU). Started before the caller prepares
        its candidates (which imports TVM in the caller too), they load at the same time; the
        command line's ``explorer measure`` does this. Without it the first ``measure`` starts
        them itself.

        Args:
            num_candidates: the size of the coming batch: no more builders than this start.
            num_threads: the runner's thread count (default: ``config.num_threads``, else every
                core available); a ``measure`` on a target of another core count replaces it.
        """
        with self._lock:
            self._check_open()
            threads = int(num_threads or self.config.num_threads or available_cores())
            self._ensure_pool().start(
                threads, num_builders=_builders_for(num_candidates), wait=False
            )

    def worker_pids(self) -> dict[str, list[int]]:
        """Process ids of the live workers by role (``"build"``, ``"run"``); empty if none."""
        return self._pool.pids() if self._pool is not None else {"build": [], "run": []}

    def helper_pids(self) -> list[int]:
        # its fork server may exist before its pool (another measurer of this process started
        # it): it forks this one's workers once they start
        return self._pool.helper_pids() if self._pool is not None else server_pids()

    @property
    def num_workers_replaced(self) -> int:
        """How many workers were lost (crash, hang, memory) and replaced so far."""
        return self._pool.num_replaced if self._pool is not None else 0

    @property
    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop the workers and delete temporary files. Idempotent."""
        with self._lock:
            self._closed = True
            if self._finalizer is not None:
                self._finalizer()  # runs _cleanup once and detaches
                self._finalizer = None
            self._pool = None
            self._artifact_dir = None

    def run_environment(self, target: Target) -> dict[str, Any]:
        """This machine, and its measured peak for ``target`` when one is kept."""
        from explorer.machine import cached_peak

        peak = cached_peak(target) if target.kind == "llvm" else None
        return {"measured_on": "this machine", "peak": peak.to_json() if peak else None}

    # -- internals ----------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this LocalMeasurer is closed; create a new one")

    def _ensure_pool(self) -> WorkerPool:
        if self._pool is None:
            workers = self.num_build_workers or available_cores()
            # Named after this process: the next measurer removes it if we die with kill -9.
            self._artifact_dir = owned_temp_dir("explorer-measure-")
            self._pool = WorkerPool(
                num_build_workers=workers,
                memory_limit_bytes=self.config.memory_limit_bytes,
                log_dir=self._artifact_dir,
            )
            # Workers and files go away even if the caller forgets close() (notebook restarts).
            self._finalizer = weakref.finalize(self, _cleanup, self._pool, self._artifact_dir)
        return self._pool

    def _threads(self, target: Target) -> int:
        return int(self.config.num_threads or target.num_cores)

    def _refusal(self, cand: Candidate) -> str | None:
        """Why this measurer cannot build ``cand`` at all, or ``None``."""
        if cand.target.kind not in ("llvm", "cuda"):
            return f"LocalMeasurer runs CPU (llvm) and CUDA targets only, not {cand.target}"
        return None

    def _cannot_run(self, cand: Candidate) -> str | None:
        """Why ``cand``, built, cannot run here, or ``None``. A CUDA schedule is built without
        a GPU (so a schedule that does not compile says why), and refused only to run."""
        if cand.target.kind == "cuda" and not cuda_available():
            return (
                f"no CUDA GPU on this machine to run {cand.target} kernels: the schedule "
                "compiled, but CUDA kernels run and are timed only on a machine with one"
            )
        missing = cand.target.missing_here()
        if missing:
            return (
                f"this machine's CPU lacks {', '.join(missing)}, which kernels built for "
                f"{cand.target.mcpu} may use (they would die of an illegal instruction here): "
                "the schedule compiled; measure it for this machine's target, or on a "
                f"{cand.target.mcpu} machine"
            )
        return None

    def _measure(
        self,
        cands: list[Candidate],
        *,
        rounds: int,
        best: float | None,
        retiming: bool = False,
        reference: bool = False,
    ) -> list[list[MeasureResult]]:
        """Per candidate, its result of each round (see ``measure_paired``)."""
        cfg = self.config
        batch = Batch(cands, best_secs=best, retiming=retiming, reference=reference)

        # Step 1. Refuse what this measurer cannot run.
        for i, cand in enumerate(cands):
            refusal = self._refusal(cand)
            if refusal is not None:
                batch.results[i] = MeasureResult(
                    MeasureStatus.INVALID, error_msg=refusal, max_spread=cfg.max_spread
                )
            else:
                batch.todo.append(i)
        if not batch.todo:
            return batch.per_round(cfg.max_spread)
        pool = self._ensure_pool()
        assert self._artifact_dir is not None

        # Step 2. Build in parallel; with `overlap`, each candidate runs as soon as it is built.
        # A schedule built by an earlier batch (a confirmation re-times the run's best) is not
        # built again.
        keys = {i: build_key(self._build_request(cands[i], "")) for i in batch.todo}
        kept = {i: b for i in batch.todo if (b := self._builds.get(keys[i])) is not None}
        batch.paths = {
            i: kept[i].path
            if i in kept
            else os.path.join(self._artifact_dir, f"{uuid.uuid4().hex}.so")
            for i in batch.todo
        }
        try:
            batch.futures = self._submit_builds(pool, batch, kept)
            if not self.overlap:
                wait(batch.futures.values())
            # Step 3. Run what was built.
            self._run_batch(pool, batch, rounds)
        except BaseException:
            pool.cancel(list(batch.futures.values()))  # interrupted: stop the builders mid-batch
            raise
        finally:
            for i, path in batch.paths.items():
                if i in batch.build_secs:  # built (now or before): kept for the next batch
                    build = Build(path, batch.build_secs[i], batch.prepacked.get(i))
                    self._builds.keep(keys[i], build)
                elif i not in kept:
                    with contextlib.suppress(OSError):
                        os.unlink(path)

        # Step 4. Each round's timings become a result; a failure ends the candidate's rounds.
        return batch.per_round(cfg.max_spread)

    def _hopeless_secs(self, batch: Batch) -> float | None:
        """The time from which the batch's next kernel is cut short (``Batch.best_secs``), or
        ``None``."""
        ratio = self.config.hopeless_ratio
        if ratio is None:
            return None
        best = min(math.inf if batch.best_secs is None else batch.best_secs, batch.fastest_secs)
        bar = ratio * best if batch.best_secs is not None or batch.retiming else math.inf
        if batch.reference:
            bar = min(bar, CUT_MIN_CALL_SECS)
        return bar if math.isfinite(bar) else None

    def _submit_builds(
        self, pool: WorkerPool, batch: Batch, kept: dict[int, Build]
    ) -> dict[int, Future[dict[str, Any] | WorkerLost]]:
        cfg = self.config
        futures: dict[int, Future[dict[str, Any] | WorkerLost]] = {}
        for i, build in kept.items():  # built before: answered as its build was
            futures[i] = Future()
            futures[i].set_result(
                {"ok": True, "build_secs": build.build_secs, "prepacked": build.prepacked}
            )
        todo = [i for i in batch.todo if i not in kept]
        # Not waiting: each request waits for its own worker, so builds begin as soon as a
        # builder is ready while the runner is still starting.
        first_threads = self._threads(batch.cands[batch.todo[0]].target)
        pool.start(first_threads, num_builders=_builders_for(len(todo)), wait=False)
        requests = [self._build_request(batch.cands[i], batch.paths[i]) for i in todo]
        if len(todo) == 1:  # see _builders_for: the runner builds it, then runs it
            solo: Future[dict[str, Any] | WorkerLost] = Future()
            solo.set_result(
                pool.run(requests[0], num_threads=first_threads, timeout=cfg.build_timeout_secs)
            )
            futures[todo[0]] = solo
        elif todo:
            builds = pool.submit_builds(requests, cfg.build_timeout_secs)
            futures.update(zip(todo, builds, strict=True))
        return futures

    def _take_build(self, batch: Batch, i: int) -> bool:
        """Record candidate ``i``'s build (its failure, or its build time); whether it built."""
        reply = batch.futures[i].result()
        failure = self._build_failure(reply)
        if failure is not None:
            batch.results[i] = failure
            return False
        assert isinstance(reply, dict)
        batch.build_secs[i] = float(reply["build_secs"])
        batch.prepacked[i] = reply.get("prepacked")
        return True

    def _run_batch(self, pool: WorkerPool, batch: Batch, rounds: int) -> None:
        """Run serially on the one runner; round-robin when timing several rounds."""
        cfg = self.config
        for rnd in range(rounds):
            settled = batch.settled(cfg.hopeless_ratio) if rnd else set()
            for i in batch.todo:
                if rnd == 0 and not self._take_build(batch, i):
                    continue
                if batch.results[i] is not None or i in settled:
                    continue
                cand = batch.cands[i]
                if (why := self._cannot_run(cand)) is not None:
                    batch.results[i] = MeasureResult(
                        MeasureStatus.INVALID,
                        error_msg=why,
                        build_secs=batch.build_secs[i],
                        max_spread=cfg.max_spread,
                    )
                    continue
                num_threads = self._threads(cand.target)
                check = rnd == 0 and cfg.check_correctness
                # Per candidate, so the explorer's own work can run between two kernels.
                with TIMING_GATE.timing():
                    reply = pool.run(
                        self._run_request(cand, batch, i, check, self._hopeless_secs(batch)),
                        num_threads=num_threads,
                        timeout=cfg.run_timeout_secs,
                    )
                failure = self._run_failure(reply, cand, batch.build_secs[i], num_threads)
                if failure is not None:
                    batch.results[i] = failure
                    continue
                assert isinstance(reply, dict)
                batch.add_timings(i, reply)

    def _build_request(self, cand: Candidate, path: str) -> dict[str, Any]:
        return {
            "op": "build",
            "workload": cand.workload.to_json(),
            "family_module": _family_module(cand.workload),
            "target": cand.target.to_json(),
            "trace": cand.trace,
            "path": path,
        }

    def _run_request(
        self,
        cand: Candidate,
        batch: Batch,
        i: int,
        check: bool,
        hopeless_secs: float | None = None,
    ) -> dict[str, Any]:
        cfg, t = self.config, cand.target
        protocol = batch.flushes[i] = cfg.flush_for(cand)
        flush = 0
        if protocol is CacheFlush.ALL:
            flush = max(2 * (t.l3_bytes + t.num_cores * t.l2_bytes), 16 << 20)
        return {
            "op": "run",
            "workload": cand.workload.to_json(),
            "family_module": _family_module(cand.workload),
            "path": batch.paths[i],
            "prepacked": batch.prepacked.get(i),
            "device": "cuda" if cand.target.kind == "cuda" else "cpu",
            "seed": self.seed,
            "check": check,
            "own_reference": is_own_reference(cand),
            "repeat": cfg.repeat,
            "min_repeat_secs": cfg.min_repeat_secs,
            "cache_flush_bytes": flush,
            "flush_arguments": protocol is CacheFlush.ARGUMENTS,
            "warmup_secs": cfg.warmup_secs,
            "timing_rounds": cfg.timing_rounds,
            "max_spread": cfg.max_spread,
            # Extra rounds must not turn a good kernel into a TIMEOUT.
            "timing_budget_secs": cfg.run_timeout_secs / 2,
            "hopeless_secs": hopeless_secs,
            "hopeless_min_call_secs": CUT_MIN_CALL_SECS if batch.retiming else 0.0,
        }

    def _build_failure(self, reply: dict[str, Any] | WorkerLost) -> MeasureResult | None:
        spread = self.config.max_spread
        if isinstance(reply, WorkerLost):
            timeout = reply.kind == "timeout"
            status = MeasureStatus.TIMEOUT if timeout else MeasureStatus.BUILD_ERROR
            msg = _with_detail(f"{reply.message} while building", reply)
            return MeasureResult(status, error_msg=msg, max_spread=spread)
        if reply.get("ok"):
            return None
        return MeasureResult(
            MeasureStatus.BUILD_ERROR, error_msg=str(reply.get("error")), max_spread=spread
        )

    def _run_failure(
        self,
        reply: dict[str, Any] | WorkerLost,
        cand: Candidate,
        build_secs: float,
        num_threads: int,
    ) -> MeasureResult | None:
        common: dict[str, Any] = {
            "build_secs": build_secs,
            "flops": cand.workload.flops(),
            "num_threads": num_threads,
            "max_spread": self.config.max_spread,
        }
        if isinstance(reply, WorkerLost):
            status = MeasureStatus.TIMEOUT if reply.kind == "timeout" else MeasureStatus.RUN_ERROR
            msg = _with_detail(f"{reply.message} while running the kernel", reply)
            return MeasureResult(status, error_msg=msg, **common)
        if reply.get("ok"):
            return None
        wrong = reply.get("stage") == "wrong"
        status = MeasureStatus.WRONG_RESULT if wrong else MeasureStatus.RUN_ERROR
        return MeasureResult(status, error_msg=str(reply.get("error")), **common)


def _builders_for(num_candidates: int | None) -> int | None:
    """Builder processes a batch needs: one each, up to the pool's size (``None``: all).

    A batch of one needs none: the runner builds it. A builder would cost a process start (a
    TVM import, about a second of CPU) for one compile, during which nothing else would run.
    """
    return 0 if num_candidates == 1 else num_candidates


def _checked_best(best_secs: float | None) -> float | None:
    if best_secs is None:
        return None
    if not (isinstance(best_secs, int | float) and best_secs > 0):  # NaN is not > 0
        raise ValueError(
            f"best_secs must be a positive number of seconds, or math.inf (got {best_secs!r})"
        )
    return float(best_secs)


def _checked(candidates: Sequence[Candidate]) -> list[Candidate]:
    cands = list(candidates)
    for i, cand in enumerate(cands):
        if not isinstance(cand, Candidate):
            raise TypeError(f"candidates[{i}] is a {type(cand).__name__}, not a Candidate")
    return cands


def _family_module(workload: Workload) -> str | None:
    """The module that defines the workload's family; workers import it before decoding."""
    try:
        return workload.spec.build.__module__
    except Exception:  # noqa: BLE001  (unregistered family: the worker will say so)
        return None


def _with_detail(message: str, lost: WorkerLost) -> str:
    return f"{message}; last stderr lines:\n{lost.detail}" if lost.detail else message


def _cleanup(pool: WorkerPool, artifact_dir: str) -> None:
    shutdown_pool(pool)
    shutil.rmtree(artifact_dir, ignore_errors=True)
