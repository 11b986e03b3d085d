"""LocalMeasurer against real TVM kernels, good and deliberately broken."""

from __future__ import annotations

import gc
import math
import os
import time
from dataclasses import replace

import psutil
import pytest
from _measure_cases import FAST, RUN_TIMEOUT, hook, tiled, unscheduled

from explorer import _tvm
from explorer.measure import (
    CacheFlush,
    Candidate,
    LocalMeasurer,
    MeasureConfig,
    MeasureResult,
)
from explorer.target import KNOWN_MCPUS, VECTOR_SETS, _cpu_flags
from explorer.types import MeasureStatus
from explorer.workloads import get_workload


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_unscheduled_matmul_is_ok(measurer, mm, target):
    (r,) = measurer.measure([unscheduled(mm, target)])
    assert r.status is MeasureStatus.OK, r.error_msg
    assert len(r.run_secs) == FAST.repeat
    assert all(s > 0 for s in r.run_secs)
    assert r.gflops is not None and r.gflops > 0
    assert r.flops == mm.flops()
    assert r.num_threads == target.num_cores  # config.num_threads=None: the target's cores
    assert r.build_secs is not None and r.build_secs > 0


def test_scheduled_matmul_is_ok(measurer, mm, target):
    (r,) = measurer.measure([tiled(mm, target, 8, 16)])
    assert r.status is MeasureStatus.OK, r.error_msg
    assert len(r.run_secs) == FAST.repeat
    assert r.error_msg is None


def test_metaschedule_sample_with_postprocs_replays(measurer, target):
    # The form the lead's design-space sampler produces: the FULL trace after postprocs.
    w = get_workload("matmul", M=128, N=128, K=128)
    _tvm.ensure_cpu_intrinsics()
    ctx = _tvm.ms.TuneContext(
        mod=w.mod(),
        target=target.to_tvm(),
        space_generator="post-order-apply",
        search_strategy="evolutionary",
        task_name="t",
        rand_state=1,
        num_threads=1,
    )
    cands = []
    for seed, space in enumerate(ctx.generate_design_space(), start=1):
        s = _tvm.Schedule(w.mod(), seed=seed)
        _tvm.Trace(list(space.trace.insts), {}).apply_to_schedule(s, remove_postproc=True)
        assert all(p.apply(s) for p in ctx.space_generator.postprocs)
        cands.append(Candidate(w, target, _tvm.trace_to_json(s.trace)))
    results = measurer.measure(cands)
    assert [r.status for r in results] == [MeasureStatus.OK] * len(cands), [
        r.error_msg for r in results
    ]


def test_trace_that_does_not_apply_is_build_error_with_tvms_message(measurer, mm, target):
    bad = Candidate(mm, target, [[["GetSBlock", [], ["D", "main"], ["b0"]]], []])
    good = unscheduled(mm, target)
    r_bad, r_good = measurer.measure([bad, good])
    assert r_bad.status is MeasureStatus.BUILD_ERROR
    assert "Cannot find a block with the name: D" in r_bad.error_msg
    assert not r_bad.run_secs
    assert r_good.is_ok


def test_wrong_output_is_wrong_result(measurer, target):
    (r,) = measurer.measure([hook("wrong", target)])
    assert r.status is MeasureStatus.WRONG_RESULT
    assert "differ from NumPy" in r.error_msg
    assert not r.run_secs


def test_segfault_is_run_error_and_next_candidate_still_runs(measurer, mm, target):
    before = measurer.worker_pids()["run"]
    r_crash, r_good = measurer.measure([hook("crash", target), unscheduled(mm, target)])
    assert r_crash.status is MeasureStatus.RUN_ERROR
    assert "worker crashed (signal SIGSEGV)" in r_crash.error_msg
    assert r_good.status is MeasureStatus.OK, r_good.error_msg
    assert measurer.worker_pids()["run"] != before  # replaced
    assert measurer.num_workers_replaced >= 1


def test_hang_is_timeout_and_next_candidate_still_runs(measurer, mm, target):
    start = time.monotonic()
    r_hang, r_good = measurer.measure([hook("hang", target), unscheduled(mm, target)])
    assert r_hang.status is MeasureStatus.TIMEOUT
    assert f"timeout of {RUN_TIMEOUT:g} s" in r_hang.error_msg
    assert time.monotonic() - start >= RUN_TIMEOUT  # a lower bound only: the box is noisy
    assert r_good.status is MeasureStatus.OK, r_good.error_msg


def test_memory_hog_is_run_error_naming_the_limit(measurer, mm, target):
    r_hog, r_good = measurer.measure([hook("hog", target), unscheduled(mm, target)])
    assert r_hog.status is MeasureStatus.RUN_ERROR
    assert "memory limit of 512 MiB" in r_hog.error_msg
    assert r_good.status is MeasureStatus.OK, r_good.error_msg


def test_misuse_raises(measurer):
    with pytest.raises(TypeError, match="not a Candidate"):
        measurer.measure(["not a candidate"])
    assert measurer.measure([]) == []


def test_remeasure_pools_all_repeats(measurer, mm, target):
    cands = [tiled(mm, target, 8, 16), unscheduled(mm, target)]
    first = measurer.measure(cands)
    again = measurer.remeasure(cands, rounds=2, previous=first)
    for before, after in zip(first, again, strict=True):
        assert after.is_ok
        assert len(after.run_secs) == 3 * FAST.repeat
        assert after.run_secs[: FAST.repeat] == before.run_secs


def test_num_threads_comes_from_the_config(mm, target):
    config = MeasureConfig(repeat=2, min_repeat_secs=0, num_threads=1, max_spread=math.inf)
    with LocalMeasurer(config) as m:
        (r,) = m.measure([tiled(mm, target)])
    assert r.status is MeasureStatus.OK, r.error_msg
    assert r.num_threads == 1


@pytest.mark.parametrize("flush", list(CacheFlush))
def test_every_cache_flush_times_the_kernel_and_checks_it(flush, target):
    """Each setting reaches TVM's timer as it takes it (a preprocessing function it does not
    know, or a flush it cannot make, would be a run error), on a kernel of 0.1 ms and more a
    call, whose samples are one call each: every sample flushed."""
    big = get_workload("matmul", M=256, N=256, K=256)
    config = replace(FAST, cache_flush=flush, max_spread=math.inf)
    with LocalMeasurer(config) as m:
        (r,) = m.measure([tiled(big, target, 8, 16)])
    assert r.status is MeasureStatus.OK, r.error_msg
    assert len(r.run_secs) == FAST.repeat and all(s > 0 for s in r.run_secs)
    assert r.cache_flush is flush  # the result names its protocol


def test_a_cache_flush_is_named_not_guessed():
    with pytest.raises(TypeError, match="cache_flush must be a CacheFlush or None .got bool"):
        MeasureConfig(cache_flush=True)  # type: ignore[arg-type]
    assert MeasureConfig().cache_flush is None  # each workload's own


def test_each_workload_is_timed_under_its_own_protocol_unless_one_is_configured(mm, target):
    """A network's task is timed with its weights flushed, as the network runs it; a catalog
    operator warm, as a loop of calls runs it. A configured protocol applies to both."""
    task = get_workload("task")
    assert task.spec.cache_flush is CacheFlush.ARGUMENTS and mm.spec.cache_flush is CacheFlush.NONE
    cands = [unscheduled(task, target), tiled(mm, target, 8, 16)]
    for config, expected in (
        (FAST, [CacheFlush.ARGUMENTS, CacheFlush.NONE]),
        (replace(FAST, cache_flush=CacheFlush.NONE), [CacheFlush.NONE] * 2),
        (replace(FAST, cache_flush=CacheFlush.ALL), [CacheFlush.ALL] * 2),
    ):
        with LocalMeasurer(replace(config, max_spread=math.inf)) as m:
            results = m.measure(cands)
        assert all(r.status is MeasureStatus.OK for r in results), [r.error_msg for r in results]
        assert [r.cache_flush for r in results] == expected


def test_overlapped_build_and_run_gives_the_same_statuses(mm, target):
    cands = [tiled(mm, target, 8, 16), hook("wrong", target), unscheduled(mm, target)]
    with LocalMeasurer(FAST, num_build_workers=2, overlap=True) as m:
        results = m.measure(cands)
    assert [r.status for r in results] == [
        MeasureStatus.OK,
        MeasureStatus.WRONG_RESULT,
        MeasureStatus.OK,
    ]


def test_workers_persist_across_candidates_and_calls_then_close_cleans_up(mm, target):
    m = LocalMeasurer(FAST, num_build_workers=2)
    shapes = [(ti, tj) for ti in (4, 8, 16, 32, 64) for tj in (8, 16)]
    cands = [tiled(mm, target, ti, tj) for ti, tj in shapes]
    assert len(cands) == 10
    results = m.measure(cands)
    assert all(r.is_ok for r in results), [(r.status.value, r.error_msg) for r in results]
    pids = m.worker_pids()
    assert len(pids["build"]) == 2 and len(pids["run"]) == 1
    assert m.measure(cands[:3]) and m.worker_pids() == pids  # same processes, second call
    assert m.num_workers_replaced == 0
    all_pids = set(pids["build"] + pids["run"])
    assert all_pids <= _children()
    artifacts = m._artifact_dir
    m.close()
    assert not all_pids & _children()
    assert artifacts is not None and not os.path.exists(artifacts)
    with pytest.raises(RuntimeError, match="closed"):
        m.measure(cands[:1])
    m.close()  # idempotent


def test_a_re_timing_builds_nothing_built_before_and_old_builds_go(mm, target):
    """A run's confirmation built its best and its baseline again right after the search had
    built them: about a second of each small run on a 2-core machine."""
    m = LocalMeasurer(FAST, num_build_workers=2)
    try:
        fast, slow = tiled(mm, target, 8, 16), unscheduled(mm, target)
        first = m.measure([fast, slow])
        assert all(r.is_ok for r in first), [r.error_msg for r in first]
        paired = m.measure_paired([slow, fast], rounds=2)
        assert all(r.is_ok for rs in paired for r in rs), paired
        # each answered with the build it had (a build of its own would take its own time)
        assert [rs[0].build_secs for rs in paired] == [first[1].build_secs, first[0].build_secs]
        assert paired[1][0].median_secs < paired[0][0].median_secs  # and they are not swapped

        def libraries() -> list[str]:
            return [f for f in os.listdir(m._artifact_dir) if f.endswith(".so")]

        assert len(libraries()) == 2
        for name in libraries():  # files gone behind the measurer's back: built again
            os.unlink(os.path.join(m._artifact_dir, name))
        (again,) = m.measure([fast])
        assert again.is_ok and again.build_secs != first[0].build_secs
        m._builds.capacity = 1  # past the capacity, the oldest build's file is deleted
        (other,) = m.measure([tiled(mm, target, 16, 8)])
        assert other.is_ok and len(libraries()) == 1
    finally:
        m.close()


def test_forgotten_measurer_is_cleaned_up_by_gc(mm, target):
    m = LocalMeasurer(MeasureConfig(repeat=1, min_repeat_secs=0), num_build_workers=1)
    m.measure([unscheduled(mm, target)])
    pids = set(sum(m.worker_pids().values(), []))
    assert pids <= _children()
    del m
    gc.collect()
    assert not pids & _children()


def test_result_round_trips_through_json(measurer, mm, target):
    (r,) = measurer.measure([unscheduled(mm, target)])
    assert MeasureResult.from_json(r.to_json()) == r


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to place threads on")
def test_the_launching_thread_keeps_off_the_cores_of_tvms_workers(mm, target):
    """Issue 21: on a busy machine the OS moved the thread that launches kernels onto a TVM
    worker's core, and a 2-thread kernel ran its halves one after the other (2x slower, from
    one measurement to the next). The runner binds it to the cores the workers left free."""
    config = MeasureConfig(repeat=2, min_repeat_secs=0, num_threads=2)
    with LocalMeasurer(config, num_build_workers=1) as m:
        (r,) = m.measure([tiled(mm, target, 8, 16)])  # parallel: the runner's pool exists now
        cores = m._pool.call("explorer.testing.hooks:thread_cores", num_threads=2)
    assert r.is_ok and isinstance(cores, dict) and cores["ok"], cores
    mine, bound = set(cores["value"]["mine"]), set(cores["value"]["bound"])
    assert bound, "TVM bound its worker thread to a core"
    assert mine and not (mine & bound), cores


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to place threads on")
def test_the_launching_thread_keeps_off_them_after_a_one_thread_kernel_ran_first(mm, target):
    """A tune times the unscheduled program first: it has no parallel loop, so TVM's thread
    pool did not exist yet when the runner looked for its workers' cores, and the runner never
    looked again. Every parallel kernel after it ran with the launching thread free to share
    a worker's core (on a busy machine, a conv2d's schedules read up to 48x slow and the
    unscheduled program was called the answer)."""
    config = MeasureConfig(repeat=2, min_repeat_secs=0, num_threads=2)
    with LocalMeasurer(config, num_build_workers=1) as m:
        (first,) = m.measure([unscheduled(mm, target)])
        (r,) = m.measure([tiled(mm, target, 8, 16)])
        cores = m._pool.call("explorer.testing.hooks:thread_cores", num_threads=2)
    assert first.is_ok and r.is_ok and isinstance(cores, dict) and cores["ok"], cores
    mine, bound = set(cores["value"]["mine"]), set(cores["value"]["bound"])
    assert bound, "TVM bound its worker thread to a core"
    assert mine and not (mine & bound), cores


def test_the_runner_has_a_session_of_its_own_and_the_builders_do_not(mm, target):
    """Beside CPU hogs of the caller's session (a test suite's other workers), a 2-thread
    kernel's worker thread waited for their time slices when the runner shared that session's
    scheduling group: see ``test_verdicts_under_load`` for the readings."""
    # A measurer of its own: the module's shared one may hold these builds from an earlier
    # test in the same worker, and then starts no builder (seen under ``-n 2``).
    with LocalMeasurer(FAST, num_build_workers=2) as measurer:
        results = measurer.measure([tiled(mm, target, 8, 16), unscheduled(mm, target)])
        assert all(r.is_ok for r in results), [r.error_msg for r in results]
        pids = measurer.worker_pids()
        (runner,) = pids["run"]
        assert os.getsid(runner) == runner
        assert pids["build"], pids
        assert all(os.getsid(b) == os.getsid(0) for b in pids["build"]), pids


def test_a_schedule_is_cut_between_rounds_by_its_fastest_repeat(mm, target):
    """Between the rounds of a side-by-side re-timing, a schedule is read by its fastest
    repeat. The last CI's conv2d beside two burners: the best schedule's repeats read 5.7,
    5.9, 0.12, 4.0 and 4.0 ms (its 2-thread calls waited for a burner's time slice), the
    unscheduled program's 1.17-1.19 ms; read by its median it was cut as hopeless after one
    round, and the unscheduled program was called the best."""
    from explorer.measure._batch import Batch

    batch = Batch(cands=[tiled(mm, target), unscheduled(mm, target)])
    batch.add_timings(0, {"run_secs": [5.7e-3, 5.85e-3, 0.121e-3, 3.99e-3, 3.99e-3],
                          "num_threads": 2})  # fmt: skip
    batch.add_timings(1, {"run_secs": [1.174e-3, 1.185e-3, 1.182e-3], "num_threads": 1})
    assert batch.fastest_secs == 0.121e-3
    assert batch.settled(3.0) == set()  # 1.2 ms a call: another round is cheap


def test_only_kernels_that_cost_seconds_are_cut_between_rounds(mm, target):
    """A clean clone's suite beside two burners (four CPU-bound processes on two cores with
    the test's own): the chosen 60 us conv2d read 12 ms in every repeat of the re-timing's
    first round (each 2-thread call waited for a time slice), the unscheduled program 1.1 ms,
    and the chosen one was cut after that round, so the re-timing called the unscheduled
    program faster. A kernel is cut only when a call of it takes CUT_MIN_CALL_SECS."""
    from explorer.measure._batch import CUT_MIN_CALL_SECS, Batch

    batch = Batch(cands=[tiled(mm, target), unscheduled(mm, target)])
    batch.add_timings(0, {"run_secs": [11.99e-3, 12.1e-3, 11.9e-3], "num_threads": 2})
    batch.add_timings(1, {"run_secs": [1.114e-3, 1.112e-3, 1.113e-3], "num_threads": 1})
    assert batch.settled(3.0) == set()
    # The unscheduled matmul 1024 (7 s a call) beside a 60 ms schedule: cut.
    slow = Batch(cands=[tiled(mm, target), unscheduled(mm, target)])
    slow.add_timings(0, {"run_secs": [0.06, 0.061], "num_threads": 2})
    slow.add_timings(1, {"run_secs": [6.9, 7.0], "num_threads": 1})
    assert slow.settled(3.0) == {1}
    # Hopeless by the ratio but just under a tenth of a second a call: timed again.
    edge = Batch(cands=[tiled(mm, target), unscheduled(mm, target)])
    edge.add_timings(0, {"run_secs": [0.01], "num_threads": 2})
    edge.add_timings(1, {"run_secs": [CUT_MIN_CALL_SECS * 0.99], "num_threads": 1})
    assert edge.settled(3.0) == set()
    edge.add_timings(1, {"run_secs": [CUT_MIN_CALL_SECS], "num_threads": 1})
    assert edge.settled(3.0) == {1}


def test_a_kernel_for_a_cpu_with_vector_sets_this_one_lacks_is_built_and_not_run(
    measurer, mm, target
) -> None:
    """The CI's failure on an AMD EPYC without AVX-512: the shipped recording's Zen 5 kernels
    killed the fleet's devices with SIGILL. Built for such a CPU, a kernel is compiled (so a
    schedule that does not compile says so) and refused to run, in one sentence."""
    here = _cpu_flags()
    foreign = [
        replace(target, mcpu=m, name="") for m in KNOWN_MCPUS
        if replace(target, mcpu=m, name="").missing_here()
    ]  # fmt: skip
    if not foreign:  # this CPU has every set compared: any known CPU's kernels run here
        assert set(VECTOR_SETS) <= here, sorted(set(VECTOR_SETS) - here)
        return
    other = foreign[0]
    assert target.missing_here() == ()
    (result,) = measurer.measure([unscheduled(mm, other)])
    assert result.status is MeasureStatus.INVALID and result.build_secs > 0
    missing = ", ".join(other.missing_here())
    assert result.error_msg.startswith(f"this machine's CPU lacks {missing}, which kernels built")
    assert set(other.missing_here()).isdisjoint(here)
