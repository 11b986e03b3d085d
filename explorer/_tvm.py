"""The one module that imports TVM.

TVM's Python namespaces moved in 2026 (``tvm.tir`` became ``tvm.tirx``/``tvm.s_tir``; target
strings were removed; ``tvm.nd`` became ``tvm.runtime.tensor``), so every other module reaches TVM
through the names and helpers defined here. When TVM moves again, only this file changes.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import linecache
import logging
import os
import sys
import types
from collections.abc import Iterator, Sequence
from typing import Any

# TVM's CPU thread pool defaults to 1 thread on this kind of machine and reads the variable when
# the pool first starts, so the default must be in place before any kernel runs. Measurement
# workers set it explicitly; this only covers kernels run in the calling process.
os.environ.setdefault("TVM_NUM_THREADS", str(os.cpu_count() or 1))

import tvm
import tvm.rpc.server
import tvm_ffi
from tvm import rpc, te, tirx, topi
from tvm.ir.utils import derived_object
from tvm.s_tir import Schedule, ScheduleError, Trace
from tvm.s_tir import meta_schedule as ms

from explorer._tvm_relax import (
    apply_schedules,
    build_relax,
    extract_relax_tasks,
    lower_relax,
    mark_weight_copies,
    mark_weights_layout_free,
    onnx_frontend_operators,
    relax_from_onnx,
    relax_runner,
    split_weight_copies,
    with_weights_layout_free,
)

# A Python function TVM calls back (a postprocessor, a cost model, a measurer) hands its exception
# back through TVM's FFI, which rebuilds it by its name and makes a name it does not know a bare
# ``RuntimeError('')``. A Ctrl-C landing in such a callback became a refused schedule: code that
# treats TVM's failures as data went on (a static-model scoring ran 2 more minutes after it).
tvm_ffi.register_error("KeyboardInterrupt", KeyboardInterrupt)

TVM_VERSION: str = tvm.__version__
FFI_VERSION: str = getattr(tvm_ffi, "__version__", "unknown")

__all__ = [
    "FFI_VERSION",
    "TVM_VERSION",
    "Schedule",
    "ScheduleError",
    "Trace",
    "apply_schedules",
    "apply_trace_json",
    "build_relax",
    "compile_mod",
    "create_prim_func",
    "derived_object",
    "ensure_cpu_intrinsics",
    "ensure_cuda_intrinsics",
    "llvm_cpu_features",
    "ensure_cuda_jit",
    "estimate_flops",
    "extract_relax_tasks",
    "fast_build",
    "is_instruction_kind",
    "load_json",
    "make_target",
    "mark_weight_copies",
    "mark_weights_layout_free",
    "metaschedule_logging_guard",
    "ms",
    "lower_relax",
    "onnx_frontend_operators",
    "parse_tvmscript",
    "prim_func_signature",
    "relax_from_onnx",
    "relax_runner",
    "rpc",
    "save_json",
    "split_weight_copies",
    "te",
    "tirx",
    "to_plain",
    "topi",
    "trace_to_json",
    "tune_relax",
    "tvm",
    "tvm_ffi",
    "with_weights_layout_free",
]


def make_target(spec: dict[str, Any]) -> tvm.target.Target:
    """Build a ``tvm.target.Target`` from its dict form (the only form TVM 0.27 accepts)."""
    return tvm.target.Target(spec)


def create_prim_func(tensors: Sequence[te.Tensor]) -> tvm.IRModule:
    """Lower a list of TE tensors (inputs first, outputs last) to an IRModule with ``main``."""
    return tvm.IRModule({"main": te.create_prim_func(list(tensors))})


def to_plain(obj: Any) -> Any:
    """Turn TVM FFI containers and scalars (from ``Trace.as_json``) into plain JSON values."""
    if isinstance(obj, (list, tuple)) or type(obj).__name__ == "Array":
        return [to_plain(x) for x in obj]
    if isinstance(obj, dict) or type(obj).__name__ == "Map":
        return {to_plain(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (tirx.IntImm, tirx.FloatImm)):
        return obj.value
    if isinstance(obj, str):
        return str(obj)  # FFI strings subclass str; keep them plain
    return obj


def trace_to_json(trace: Trace, *, remove_postproc: bool = False) -> Any:
    """The trace as a plain ``json.dumps``-able value (it round-trips via ``apply_trace_json``)."""
    value = to_plain(trace.as_json(remove_postproc=remove_postproc))
    json.dumps(value)  # fail here, not in the database, if TVM ever returns something exotic
    return value


def apply_trace_json(trace_json: Any, sch: Schedule) -> None:
    """Replay a JSON trace onto ``sch``; raises ``ScheduleError``/``ValueError`` if it cannot."""
    Trace.apply_json_to_schedule(trace_json, sch)


def is_instruction_kind(name: str) -> bool:
    """Whether TVM knows a schedule instruction called ``name`` (``Split``, ``Parallel``...)."""
    try:
        tvm.s_tir.schedule.InstructionKind.get(name)
    except Exception:  # noqa: BLE001  (TVM raises AttributeError for an unknown name)
        return False
    return True


def save_json(node: Any) -> str:
    """TVM's JSON text of an IR node (an ``IRModule``), for another process's ``load_json``."""
    return str(tvm.ir.save_json(node))


def load_json(text: str) -> Any:
    """The IR node that ``save_json`` wrote."""
    return tvm.ir.load_json(text)


def parse_tvmscript(text: str) -> tvm.IRModule:
    """An IRModule with ``main`` from the TVMScript text of one ``@T.prim_func`` (``T`` is
    ``tvm.script.tirx``; the text has no import lines)."""
    import tvm.script

    return tvm.IRModule({"main": tvm.script.from_source(text)})


def prim_func_signature(
    func: Any,
) -> tuple[list[tuple[str, tuple[int, ...], str]], list[int]]:
    """A PrimFunc's parameters as (name, shape, dtype), and the positions of those it writes.

    Raises:
        ValueError: a parameter's shape is not made of integer constants (a dynamic shape).
    """
    params = []
    for p in func.params:
        if not all(isinstance(d, tirx.IntImm) for d in p.shape):
            raise ValueError(f"buffer {p.name} has a dynamic shape {list(p.shape)}")
        params.append((str(p.name), tuple(int(d) for d in p.shape), str(p.dtype)))
    written: list[Any] = []
    _collect_writes(func.body, written)
    outputs = [i for i, p in enumerate(func.params) if any(p.same_as(w) for w in written)]
    return params, outputs


def _collect_writes(stmt: Any, out: list[Any]) -> None:
    """The buffers every block under ``stmt`` declares it writes (TVM 0.27 has no Python
    statement visitor for ``tirx``; these are the statement kinds a lowered PrimFunc holds)."""
    if stmt is None:
        return
    if isinstance(stmt, tvm.s_tir.SBlockRealize):
        _collect_writes(stmt.block, out)
    elif isinstance(stmt, tvm.s_tir.SBlock):
        out.extend(region.source for region in stmt.writes)
        _collect_writes(stmt.init, out)
        _collect_writes(stmt.body, out)
    elif hasattr(stmt, "seq"):
        for child in stmt.seq:
            _collect_writes(child, out)
    else:
        for name in ("body", "then_case", "else_case"):
            _collect_writes(getattr(stmt, name, None), out)


def estimate_flops(mod: tvm.IRModule) -> float:
    """TVM's count of the floating-point operations of ``mod``'s ``main`` (0 for data movement)."""
    return float(tvm.s_tir.analysis.estimate_tir_flops(mod))


def tune_relax(
    lowered: tvm.IRModule,
    target: tvm.target.Target,
    work_dir: str,
    trials: int,
    *,
    per_iter: int,
    seed: int,
) -> Any:
    """MetaSchedule's own ``tune_relax`` over every task of ``lowered`` (its gradient task
    scheduler, evolutionary search and XGBoost model, as shipped), ``per_iter`` trials per
    task and round, with ``fast_build`` as its builder; returns its database.

    Its tune contexts import ``tvm.s_tir.tensor_intrin``: every backend's intrinsics, 112 of a
    173 s tune of the tiny network at 10 trials in a profile (TVM's parser inspecting frames).
    The CPU rules use the x86 ones only, registered first as for our own design spaces and
    ``tune_tir`` (``ensure_cpu_intrinsics``; CUDA's too for a CUDA target)."""
    ensure_cpu_intrinsics()
    if target.kind.name == "cuda":
        ensure_cuda_intrinsics()
    builder = ms.builder.LocalBuilder(f_build=fast_build, max_workers=target.attrs["num-cores"])
    with metaschedule_logging_guard():
        return ms.relax_integration.tune_relax(
            mod=lowered,
            params={},
            target=target,
            work_dir=work_dir,
            max_trials_global=trials,
            num_trials_per_iter=per_iter,
            builder=builder,
            seed=seed,
        )


def compile_mod(mod: tvm.IRModule, target: tvm.target.Target) -> Any:
    """Compile a TIR module for ``target``; returns a ``tvm.runtime.Executable``."""
    return tvm.compile(mod, target=target)


def ensure_cuda_jit() -> None:
    """Register TVM's CUDA compiler callback before a CUDA module is loaded.

    A CUDA module built here holds CUDA source: TVM compiles it for the GPU when it is loaded
    (``CUDAModuleNode::JitCompileFromSource``), through ``tvm_callback_cuda_compile``, which
    ``tvm.support.nvcc`` registers (NVRTC by default: the ``cuda`` extra installs it).
    """
    importlib.import_module("tvm.support.nvcc")


_INTRINSICS_READY = False


def ensure_cpu_intrinsics() -> None:
    """Register the x86 tensor intrinsics that MetaSchedule's CPU rules look up, and only those.

    ``import tvm.s_tir.tensor_intrin`` registers every backend's intrinsics and takes about 12 s
    (the CUDA ones alone take 8 s). The default x86 schedule rules only look up the x86 ones
    (``dot_16x4_vnni``), so a package stub plus the x86 module is enough for CPU design spaces and
    brings a first ``TuneContext`` down to about 0.1 s (docs/tvm-notes.md, section 4).
    """
    global _INTRINSICS_READY
    if _INTRINSICS_READY:
        return
    name = "tvm.s_tir.tensor_intrin"
    if name not in sys.modules:
        pkg = types.ModuleType(name)
        pkg.__path__ = [os.path.join(os.path.dirname(tvm.s_tir.__file__), "tensor_intrin")]
        sys.modules[name] = pkg
    with _parser_frames_from_linecache():
        importlib.import_module(f"{name}.x86")  # registers the x86 intrinsics

    _INTRINSICS_READY = True


def llvm_cpu_features(mcpu: str) -> set[str]:
    """The instruction-set features LLVM gives the x86 CPU ``mcpu`` (``avx512f``, ...)."""
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu})
    return {str(f) for f in tvm.target.codegen.llvm_get_cpu_features(target)}


def ensure_cuda_intrinsics() -> None:
    """Register the CUDA tensor intrinsics (wmma, mma) MetaSchedule's CUDA rules look up: CUDA
    design spaces need them, and they take seconds to register, so only those pay.

    The module parses 183 TVMScript functions (see ``_parser_frames_from_linecache``).
    """
    if "tvm.s_tir.tensor_intrin.cuda" in sys.modules:
        return
    with _parser_frames_from_linecache():
        importlib.import_module("tvm.s_tir.tensor_intrin.cuda")


@contextlib.contextmanager
def _parser_frames_from_linecache() -> Iterator[None]:
    """While a module of TVMScript functions imports, give TVM's parser a cheap ``inspect.stack``.

    The parser calls ``inspect.stack()`` for each function it parses; the standard one looks up
    every frame's source module, and for the import machinery's frozen frames that scans all of
    ``sys.modules`` each time: the CUDA intrinsics' 183 functions took 40 of 48 s in a profile
    taken in a test process (a notebook kernel has as many modules), the x86 ones 1.7 of a
    12 s `explorer tune`. ``_frames_only_stack`` gives the parser the same frames and lines.
    """
    standard = inspect.stack
    inspect.stack = _frames_only_stack
    try:
        yield
    finally:
        inspect.stack = standard


def _frames_only_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """``inspect.stack(context)``'s frames, names and line numbers, with each frame's own line
    as its ``code_context`` (all TVM's parser reads) taken from ``linecache``."""
    infos = []
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        line = linecache.getline(filename, lineno) if context > 0 else ""
        code = [line] if line else None
        infos.append(
            inspect.FrameInfo(
                frame, filename, lineno, frame.f_code.co_name, code, 0 if code else None
            )
        )
        frame = frame.f_back
    return infos


def fast_build(mod: tvm.IRModule, target: tvm.target.Target, _params: Any) -> Any:
    """MetaSchedule's ``default_build`` without ``import tvm.s_tir.tensor_intrin``.

    The default builder pays that 12 s import again in every fresh worker of every batch, which
    makes builds time out spuriously (docs/tvm-notes.md, section 4). Tensorized schedules
    already carry the intrinsic bodies inline, so the registry is not needed to build them.
    Pass it as ``ms.builder.LocalBuilder(f_build=fast_build)``; workers import it from this module.
    """
    rewrite = tvm.s_tir.transform.RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)
    return tvm.driver.build(rewrite(mod), target=target)


@contextlib.contextmanager
def metaschedule_logging_guard() -> Iterator[None]:
    """Hide handlers without a name from MetaSchedule's logger while ``tune_tir`` runs.

    ``tune_tir`` rebuilds its logging with ``dictConfig``, listing the handlers already on
    ``tvm.s_tir.meta_schedule`` by name; one without a name (pytest's log capture, a notebook's
    handler) makes it fail with ``'NoneType' object has no attribute 'format'``.
    """
    logger = logging.getLogger("tvm.s_tir.meta_schedule")
    unnamed = [h for h in logger.handlers if h.get_name() is None]
    for h in unnamed:
        logger.removeHandler(h)
    try:
        yield
    finally:
        for h in unnamed:
            logger.addHandler(h)
