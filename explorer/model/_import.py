"""Importing a model: ONNX to Relax (TVM's frontend), the standard lowering to fused TIR
functions, MetaSchedule's task extraction, each task timed once unscheduled, and the model
stored with its tasks."""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from explorer import _tvm
from explorer.core import ModelRecord, ModelTask, RecordStore
from explorer.errors import ModelError, WorkloadError
from explorer.machine import BUSY
from explorer.measure import LocalMeasurer, Measurer
from explorer.model._onnx import OnnxFile, read_onnx
from explorer.search import baseline_candidate
from explorer.storage import stored_as_imported
from explorer.target import Target
from explorer.text import last_line
from explorer.types import MeasureStatus
from explorer.workloads import Workload, task_workload


@dataclass(frozen=True)
class Lowering:
    """How ``lower_onnx`` lowers a network (see its arguments)."""

    channels_last: bool = True
    weights_layout_free: bool = True
    fast_math: bool = True
    winograd: bool = True


LOWERINGS = (
    Lowering(),
    Lowering(winograd=False),
    Lowering(fast_math=False, winograd=False),
    Lowering(channels_last=False, fast_math=False, winograd=False),
    Lowering(channels_last=False, weights_layout_free=False, fast_math=False, winograd=False),
)
"""Today's lowering, then those of models imported before each of its options existed."""


def lower_onnx(
    onnx_file: OnnxFile,
    where: str,
    *,
    weights_layout_free: bool = True,
    channels_last: bool = True,
    fast_math: bool = True,
    winograd: bool = True,
) -> Any:
    """The lowered Relax module of a checked ONNX file; ``ModelError`` when TVM's frontend or
    the lowering fails (their message's last line, which names the cause).

    ``weights_layout_free``: each TIR function lists which of its parameters are the network's
    weights (``mark_weights_layout_free``), so a schedule may give them any layout
    at build time and is timed without that copy (``split_weight_copies``).
    ``channels_last``: convolutions in NHWC (``lower_relax``), where TVM's layout conversion
    takes the network (else it is lowered as it comes).
    ``fast_math``: ``erf``, ``exp``, ``tanh`` and ``softmax`` as polynomial approximations
    (``lower_relax``), vectorizable and as fast on every value.
    ``winograd``: large channels-last 3x3 stride-1 convolutions as Winograd's F(4x4, 3x3)
    (``lower_relax``), a quarter of the multiplications, weights transformed at build time.
    Models imported before an option existed have tasks lowered without it:
    ``lower_as_stored`` finds any model's lowering."""
    lowering = Lowering(channels_last, weights_layout_free, fast_math, winograd)
    return _lower(_to_relax(onnx_file, where), where, lowering)


def _to_relax(onnx_file: OnnxFile, where: str) -> Any:
    shapes = {i.name: list(i.shape) for i in onnx_file.inputs}
    try:
        return _tvm.relax_from_onnx(onnx_file.proto, shapes)
    except Exception as exc:  # noqa: BLE001  (the frontend raises whatever its converters do)
        raise ModelError(
            f"{where}: TVM's ONNX frontend cannot convert it ({last_line(exc)})"
        ) from None


def _lower(mod: Any, where: str, lowering: Lowering) -> Any:
    try:
        try:
            lowered = _tvm.lower_relax(
                mod,
                channels_last=lowering.channels_last,
                fast_math=lowering.fast_math,
                winograd=lowering.winograd,
            )
        except Exception:
            if not lowering.channels_last:
                raise
            # TVM's layout conversion refuses some networks that lower as they come (and
            # Winograd's convolutions need it: the fallback has none)
            lowered = _tvm.lower_relax(mod, fast_math=lowering.fast_math)
        return _tvm.mark_weights_layout_free(lowered) if lowering.weights_layout_free else lowered
    except Exception as exc:  # noqa: BLE001
        raise ModelError(f"{where}: lowering it to TIR failed ({last_line(exc)})") from None


def lower_as_stored(onnx_file: OnnxFile, model: ModelRecord, where: str) -> tuple[Any, Lowering]:
    """``model``'s network lowered as it was when imported, and which of ``LOWERINGS`` that is:
    the first whose tasks are the stored ones. A schedule applies to a function only when the
    function is its task's, so a network lowered otherwise would build every task untuned.

    Raises:
        ModelError: no lowering of this version gives the stored tasks (TVM's lowering
            changed since the import).
    """
    stored = {t.name: t.workload.key() for t in model.tasks}
    mod = _to_relax(onnx_file, where)  # once: the frontend copies every weight
    for lowering in LOWERINGS:
        lowered = _lower(mod, where, lowering)
        found = model_tasks(lowered, model.target, where)
        if {name: workload.key() for name, _, workload in found} == stored:
            return lowered, lowering
    raise ModelError(
        f"{where}: this version lowers the model into other tasks than those stored at its "
        "import; import the file again under another name"
    )


def model_tasks(lowered: Any, target: Target, where: str) -> list[tuple[str, int, Workload]]:
    """(name, calls per inference, workload) of every task of a lowered module."""
    try:
        extracted = _tvm.extract_relax_tasks(lowered, target.to_tvm())
    except Exception as exc:  # noqa: BLE001
        raise ModelError(
            f"{where}: MetaSchedule's task extraction failed ({last_line(exc)})"
        ) from None
    out = []
    for name, weight, mod in extracted:
        try:
            out.append((name, weight, task_workload(name, mod["main"].script())))
        except WorkloadError as exc:
            raise ModelError(f"{where}: its task {name} cannot be explored ({exc})") from None
    return out


def import_model(
    path: str | os.PathLike[str],
    store: RecordStore,
    *,
    inputs: Mapping[str, Sequence[int]] | None = None,
    name: str | None = None,
    target: Target | None = None,
    measurer: Measurer | None = None,
    on_step: Callable[[str], None] = lambda _: None,
) -> ModelRecord:
    """Import the ONNX model at ``path`` into ``store`` and return it as stored.

    Each task is timed once, unscheduled, with ``measurer`` (default: a ``LocalMeasurer`` made
    and closed here), which gives its share of the untuned network's time; a task that fails
    to build or run is kept, with its error. Importing the same file at the same input sizes
    under the same name again returns the stored model at once (its ``created_at`` tells).

    Args:
        inputs: sizes of the inputs the file leaves dynamic, by name.
        name: the model's name in the database (default: the file's name without suffix).
        target: what the tasks are extracted and timed for (default: this machine's CPU).
        on_step: told, in a few words, what the import is doing (for a progress line).

    Raises:
        ModelError: the file is not ONNX, an operator has no conversion, a dynamic input has
            no size, the model (its file, or a task's buffers at the input sizes) is too large
            for the machine, or a task cannot be explored.
        StoreError: another file, or this one at other input sizes, is stored under that
            name.
    """
    file = Path(path)
    name = name if name is not None else re.sub(r"[^A-Za-z0-9_.-]+", "_", file.stem) or "model"
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
        raise ModelError(f"a model's name is 1-64 letters, digits, '_', '.' or '-' (got {name!r})")
    target = target or Target.local_cpu()
    onnx_file = read_onnx(file, inputs or {})
    for stored in store.models():  # before any work: found, or refused, in a moment
        if stored.name == name:
            return stored_as_imported(stored, onnx_file.sha256, onnx_file.inputs)
    on_step("converting to Relax and lowering to TIR")
    lowered = lower_onnx(onnx_file, str(file))
    on_step("extracting tasks")
    found = model_tasks(lowered, target, str(file))
    check_task_memory(found, str(file))
    on_step(f"timing {len(found)} tasks unscheduled")
    tasks = _timed(found, target, measurer)
    record = ModelRecord(
        0, name, onnx_file.sha256, onnx_file.inputs, tuple(tasks), target, time.time()
    )
    return store.add_model(record, onnx_file.source)


def import_busy_note(model: ModelRecord) -> str | None:
    """One sentence when other processes used ``BUSY`` or more of the CPUs while the import
    timed ``model``'s tasks, else ``None``."""
    shares = [t.untuned_busy for t in model.tasks if t.untuned_busy is not None]
    if not shares or max(shares) < BUSY:
        return None
    return (
        f"Other processes used {max(shares):.0%} of the CPUs while {model.name}'s tasks were "
        "timed on import: their untuned times read slower than on a quiet machine, and each "
        "task's share of the untuned network (which orders the tune's first chunks) may be "
        "off; importing the file again under another name, on a quiet machine, times them "
        "again."
    )


RUN_COPIES = 3
"""Timing and checking a task holds its buffers about this many times: on the device, as the
random inputs NumPy made, and as the reference output it is compared with."""


def check_task_memory(found: Sequence[tuple[str, int, Workload]], where: str) -> None:
    """``ModelError`` when a task's buffers (its inputs and output: the activations at the
    model's input sizes) cannot be held to time it on this machine: a small file with huge
    ``--input`` sizes is refused before anything is built or stored."""
    available = psutil.virtual_memory().available
    for name, _, workload in found:
        need = sum(_nbytes(shape, dtype) for shape, dtype in workload.input_specs())
        need += _nbytes(*workload.output_spec())
        if need * RUN_COPIES > available:
            raise ModelError(
                f"{where}: its task {name} works on {need / 2**30:.1f} GiB of inputs and output "
                f"(about {RUN_COPIES}x that to time and check it), and this machine has "
                f"{available / 2**30:.1f} GiB free: give the model smaller input sizes"
            )


def _nbytes(shape: Sequence[int], dtype: str) -> int:
    return math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize


def _timed(
    found: list[tuple[str, int, Workload]], target: Target, measurer: Measurer | None
) -> list[ModelTask]:
    candidates = [baseline_candidate(w, target) for _, _, w in found]
    with contextlib.ExitStack() as stack:
        if measurer is None:
            measurer = stack.enter_context(LocalMeasurer())
        watch = measurer.watch_busy()
        results = measurer.measure(candidates)
        busy = None if watch is None else round(watch.share(), 3)
    tasks = []
    for (task_name, weight, workload), result in zip(found, results, strict=True):
        ok = result.status is MeasureStatus.OK
        secs = result.fastest_secs if ok else None
        error = None if ok else (result.error_msg or result.status.value)
        flops, flush = workload.flops(), result.cache_flush
        tasks.append(ModelTask(task_name, workload, weight, flops, secs, error, busy, flush))
    return tasks
