"""CUDA schedules: compiled here to real CUDA kernels (no GPU needed), measured where a GPU is.

Building is TVM's own CUDA code generation: the module it makes holds the kernels' CUDA source,
which TVM compiles for the GPU when the module is loaded there. So the whole path up to loading
runs on any machine; the measurement itself is marked ``gpu`` and runs only beside a GPU.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from explorer import _tvm
from explorer.measure import LocalMeasurer, MeasureConfig
from explorer.session import ScheduleSession
from explorer.space import DesignSpace
from explorer.target import Target, cuda_available
from explorer.types import MeasureStatus
from explorer.workloads import get_workload

inspect_stack = inspect.stack


def bound_matmul(target: Target) -> ScheduleSession:
    """A 256^3 matmul with 16x16 threads per block, one output element each."""
    session = ScheduleSession(get_workload("matmul", M=256, N=256, K=256), target)
    session.apply("split", loop="i", factors=[None, 16])
    session.apply("split", loop="j", factors=[None, 16])
    session.apply("reorder", loops=["i_0", "j_0", "i_1", "j_1"])
    for loop, axis in (
        ("i_0", "blockIdx.y"),
        ("j_0", "blockIdx.x"),
        ("i_1", "threadIdx.y"),
        ("j_1", "threadIdx.x"),
    ):
        session.apply("bind", loop=loop, thread_axis=axis)
    return session


def test_a_bound_schedule_compiles_here_to_a_cuda_kernel(tmp_path) -> None:
    target = Target(kind="cuda", arch="sm_80")
    session = bound_matmul(target)
    executable = _tvm.compile_mod(session.mod, target.to_tvm())
    (device_module,) = executable.mod.imports
    source = device_module.inspect_source()
    assert device_module.kind == "cuda"
    assert "__global__" in source
    assert all(f"{axis}.{dim}" in source for axis in ("blockIdx", "threadIdx") for dim in "xy")
    # the artifact a GPU's measurement worker loads: built as for any candidate
    executable.export_library(str(tmp_path / "kernel.so"))
    assert (tmp_path / "kernel.so").stat().st_size > 0


@pytest.mark.skipif(cuda_available(), reason="a GPU is here: the test below measures on it")
def test_without_a_gpu_the_measurer_builds_and_then_refuses_in_one_sentence(measurer) -> None:
    target = Target(kind="cuda", arch="sm_80")
    unbound = ScheduleSession(get_workload("matmul", M=64, N=64, K=64), target)
    bound, wrong = measurer.measure([bound_matmul(target).candidate(), unbound.candidate()])
    # built for real (a schedule that does not compile would say so), refused only to run
    assert bound.status is MeasureStatus.INVALID and bound.build_secs > 0
    assert bound.error_msg.startswith("no CUDA GPU on this machine to run cuda:sm_80 kernels")
    # TVM compiles a schedule with no bound loop as host code over GPU buffers: refused
    assert wrong.status is MeasureStatus.BUILD_ERROR
    assert wrong.error_msg.startswith("no loop is bound to a GPU block or thread")


@pytest.mark.skipif(cuda_available(), reason="a GPU is here: the test below measures on it")
def test_a_searchs_cuda_design_space_draws_schedules_that_compile_to_gpu_kernels(
    measurer,
) -> None:
    # MetaSchedule's CUDA sketches (tiled for blocks, threads and shared memory), as the
    # search strategies draw them, built by the measurer's workers
    target = Target(kind="cuda", arch="sm_80", num_cores=108, l1d_bytes=48 * 1024)
    space = DesignSpace.of(get_workload("matmul", M=256, N=256, K=256), target)
    rng = np.random.default_rng(0)
    # two: the measurer's two build workers compile them at once (a third took as long again)
    results = measurer.measure([space.sample(rng).candidate for _ in range(2)])
    assert [r.status for r in results] == [MeasureStatus.INVALID] * 2, results
    assert all(r.build_secs > 0 and "the schedule compiled" in r.error_msg for r in results)


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="no CUDA GPU on this machine")
def test_on_a_gpu_a_bound_schedule_is_measured_and_checked_against_numpy() -> None:
    target = Target.cuda()
    session = bound_matmul(target)
    unbound = ScheduleSession(session.workload, target)
    with LocalMeasurer(MeasureConfig(repeat=5, min_repeat_secs=0.01)) as measurer:
        result, wrong = measurer.measure([session.candidate(), unbound.candidate()])
    assert result.status is MeasureStatus.OK, result.error_msg  # OK: it matched NumPy
    assert result.gflops is not None and result.gflops > 1.0
    assert wrong.status is MeasureStatus.BUILD_ERROR


def test_the_cheaper_stack_tvms_parser_gets_while_cuda_intrinsics_load_is_inspects() -> None:
    """``ensure_cuda_intrinsics`` imports TVM's CUDA intrinsics with a cheaper ``inspect.stack``
    (the standard one made a CUDA design space take 17 s here, 3 s without it): the frames, names,
    lines and code TVM's parser reads are those ``inspect.stack`` gives."""

    def both() -> tuple[list[inspect.FrameInfo], list[inspect.FrameInfo]]:
        return inspect.stack(), _tvm._frames_only_stack()

    standard, cheap = both()
    assert len(cheap) == len(standard) > 5
    for a, b in zip(standard, cheap, strict=True):
        assert (a.frame, a.filename, a.lineno, a.function, a.code_context, a.index) == (
            b.frame, b.filename, b.lineno, b.function, b.code_context, b.index,
        )  # fmt: skip
    _tvm.ensure_cuda_intrinsics()
    assert inspect.stack is inspect_stack  # put back
    assert _tvm.tvm.s_tir.TensorIntrin.get("wmma_sync_16x16x16_f16f16f32") is not None
