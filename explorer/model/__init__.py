"""Bring your own model: import an ONNX network, explore and tune its tasks.

``import_model("net.onnx", store)`` converts the network with TVM's Relax ONNX frontend, lowers it
to fused TIR functions and extracts MetaSchedule's tasks; each task becomes a workload of the
``task`` family (``explorer.workloads.task_workload``) that the schedule editor, the measurers,
the strategies and the database handle like a catalog operator. The model is stored with its
tasks, each with its weight (calls per inference), FLOPs and time untuned.

``NETWORKS`` builds ResNet-18, a MobileNetV2, a BERT encoder layer and a tiny test network as
ONNX models at their real shapes (random weights). Needs the ``model`` extra (onnx, onnxruntime).
"""

from __future__ import annotations

from explorer.core import ModelInput, ModelRace, ModelRecord, ModelTask, RaceEntry
from explorer.model._import import import_busy_note, import_model, lower_onnx, model_tasks
from explorer.model._networks import NETWORKS
from explorer.model._onnx import OnnxFile, parse_input_shape, parse_onnx, read_onnx
from explorer.model._race import (
    MAX_ERROR,
    ONNXRUNTIME,
    TUNE_RELAX,
    TUNED,
    UNTUNED,
    MachineSpeed,
    best_schedules,
    best_times,
    busy_note,
    machine_speed,
    race_model,
    speed_note,
    speed_text,
    untuned_kept,
)
from explorer.model._tune import (
    SCHEDULERS,
    ModelTuneProgress,
    TaskState,
    task_states,
    tune_model,
    tune_name,
    tune_spent,
)

__all__ = [
    "MAX_ERROR",
    "NETWORKS",
    "ONNXRUNTIME",
    "TUNED",
    "TUNE_RELAX",
    "UNTUNED",
    "MachineSpeed",
    "best_schedules",
    "best_times",
    "untuned_kept",
    "busy_note",
    "machine_speed",
    "speed_note",
    "speed_text",
    "race_model",
    "SCHEDULERS",
    "ModelTuneProgress",
    "TaskState",
    "task_states",
    "tune_model",
    "tune_name",
    "tune_spent",
    "parse_onnx",
    "ModelInput",
    "ModelRace",
    "RaceEntry",
    "ModelRecord",
    "ModelTask",
    "OnnxFile",
    "import_busy_note",
    "import_model",
    "lower_onnx",
    "model_tasks",
    "parse_input_shape",
    "read_onnx",
]
