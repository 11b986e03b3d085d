"""A task of an imported model: the ``task`` family, one fused TIR function of a network.

A model's lowering (``explorer.model``) leaves one TIR function per fused operator group
(``fused_conv2d_add_relu``, ``matmul``, ``mean``...). Each becomes a workload of this family,
scheduled, measured and stored like any catalog operator. Its parameters are the task's name and
the TVMScript text of its function, so a record names the exact program it timed; the key shows a
hash of the text instead of the text.

No NumPy formula exists for a fused function, so its reference is the function itself, compiled
unscheduled for this machine's CPU (TVM's default lowering) and run on the same inputs: a schedule
is correct when it computes what its unscheduled program computes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.errors import WorkloadError
from explorer.text import last_line
from explorer.types import CacheFlush
from explorer.workloads._base import (
    MAX_TENSOR_ELEMENTS,
    OperatorFamily,
    Params,
    ShapeParam,
    Workload,
    make_workload,
)

TASK = "task"

_EXAMPLE = """\
@T.prim_func(s_tir=True)
def main(A: T.Buffer((T.int64(64), T.int64(64)), "float32"),
         B: T.Buffer((T.int64(64),), "float32"),
         C: T.Buffer((T.int64(64), T.int64(64)), "float32")):
    T.func_attr({"op_pattern": 0, "tirx.noalias": True})
    for i, j in T.grid(T.int64(64), T.int64(64)):
        with T.sblock("add"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi, vj], B[vj])
            T.writes(C[vi, vj])
            C[vi, vj] = A[vi, vj] + B[vj]
"""
"""The family's default: a broadcast add, as the Relax lowering writes one."""

MAX_SCRIPT_CHARS = 1 << 20  # a fused function's text is a few KB; a megabyte is not a task


@functools.lru_cache(maxsize=64)
def _parsed(text: str) -> tuple[Any, list[tuple[str, tuple[int, ...], str]]]:
    """The IRModule of ``text`` and its buffers (inputs first, the output last), or
    ``WorkloadError`` saying in one sentence why it is not a task."""
    if not isinstance(text, str) or not text.strip():
        raise WorkloadError("task: parameter 'tir' must be the TVMScript text of a PrimFunc")
    if len(text) > MAX_SCRIPT_CHARS:
        raise WorkloadError(
            f"task: parameter 'tir' is {len(text):,} characters (limit {MAX_SCRIPT_CHARS:,})"
        )
    try:
        mod = _tvm.parse_tvmscript(text)
        params, outputs = _tvm.prim_func_signature(mod["main"])
    except ValueError as exc:  # a dynamic shape
        raise WorkloadError(f"task: {exc}; only static shapes can be timed") from None
    except Exception as exc:  # noqa: BLE001  (TVMScript's parser raises its own diagnostics)
        raise WorkloadError(
            f"task: parameter 'tir' is not a TIR PrimFunc ({last_line(exc)})"
        ) from None
    if outputs != [len(params) - 1]:
        written = ", ".join(params[i][0] for i in outputs) or "none"
        raise WorkloadError(
            f"task: the function must write exactly its last buffer (it writes {written}); "
            "tasks with several outputs cannot be timed yet"
        )
    for name, shape, dtype in params:
        if math.prod(shape) > MAX_TENSOR_ELEMENTS:
            raise WorkloadError(
                f"task: buffer {name} of shape {shape} would hold {math.prod(shape):,} elements "
                f"(limit {MAX_TENSOR_ELEMENTS:,})"
            )
        try:
            np.dtype(dtype)
        except TypeError:
            raise WorkloadError(
                f"task: buffer {name} has dtype {dtype}, unknown to NumPy"
            ) from None
    return mod, params


def _validate(params: Params) -> None:
    _parsed(params["tir"])


def _flops(params: Params) -> int:
    return round(_tvm.estimate_flops(_parsed(params["tir"])[0]))


def _bytes_moved(params: Params) -> int:
    return sum(math.prod(shape) * np.dtype(dt).itemsize for _, shape, dt in _signature(params))


def _signature(params: Params) -> list[tuple[str, tuple[int, ...], str]]:
    return _parsed(params["tir"])[1]


@functools.lru_cache(maxsize=8)
def _default_build(text: str) -> Any:
    """The unscheduled function compiled for the host's CPU: what a schedule must agree with."""
    target = _tvm.make_target({"kind": "llvm"})
    return _tvm.compile_mod(_parsed(text)[0], target)


def _reference(inputs: Sequence[np.ndarray], params: Params) -> np.ndarray:
    tvm = _tvm.tvm
    buffers = _signature(params)
    dev = tvm.cpu()
    args = [
        tvm.runtime.tensor(np.asarray(x).astype(dt), dev)
        for x, (_, _, dt) in zip(inputs, buffers[:-1], strict=True)
    ]
    _, shape, dtype = buffers[-1]
    out = tvm.runtime.empty(shape, dtype, dev)
    _default_build(params["tir"])["main"](*args, out)
    return np.asarray(out.numpy(), dtype=np.float64)


def _build_mod(params: Params) -> Any:
    return _parsed(params["tir"])[0]


TASK_FAMILY = OperatorFamily(
    name=TASK,
    description="one fused TIR function of an imported model (explorer.model)",
    params=(
        ShapeParam("name", "add", kind="str", help="the task's name in its model"),
        ShapeParam("tir", _EXAMPLE, kind="script", help="the function's TVMScript text"),
    ),
    build=None,
    build_mod=_build_mod,
    flops=_flops,
    reference=_reference,
    reference_name="its unscheduled program",
    reference_is_unscheduled=True,
    bytes_moved=_bytes_moved,
    validate=_validate,
    signature=_signature,
    # In its network a task reads its input as the task before wrote it, its weights from
    # memory (once an inference): timed warm, a search ranks schedules as the network does not.
    cache_flush=CacheFlush.ARGUMENTS,
)


def task_workload(name: str, tir: str) -> Workload:
    """The workload of one TIR function, from its TVMScript text (``@T.prim_func`` with ``T``
    meaning ``tvm.script.tirx``; comment lines are dropped, so a function's ``script()`` fits).

    Raises:
        WorkloadError: the text is not one static-shaped PrimFunc that writes its last buffer.
    """
    text = "\n".join(ln for ln in tir.strip().splitlines() if not ln.startswith("#")).strip()
    return make_workload(TASK_FAMILY, {"name": name, "tir": text + "\n"})
