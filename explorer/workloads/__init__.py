"""The operator catalog and custom expressions.

``get_workload("matmul", M=512, N=512, K=512)`` builds a validated ``Workload``; a preset name
(``get_workload("resnet18_c2")``) stands for a family with fixed shapes. ``parse_expression`` turns
einsum-like text into a workload of the ``expr`` family.
"""

from __future__ import annotations

from typing import Any

from explorer.errors import UnknownPluginError, WorkloadError
from explorer.workloads._base import (
    DTYPES,
    OperatorFamily,
    Params,
    ShapeParam,
    Workload,
    family_named,
    make_workload,
    register_families,
)
from explorer.workloads._batch_matmul import BATCH_MATMUL
from explorer.workloads._conv2d import CONV2D, out_size
from explorer.workloads._dense import DENSE_BIAS_RELU
from explorer.workloads._depthwise import DEPTHWISE_CONV2D
from explorer.workloads._elementwise import ELEMENTWISE_CHAIN
from explorer.workloads._expr import EXPR, parse_expression
from explorer.workloads._layer_norm import LAYER_NORM
from explorer.workloads._matmul import MATMUL
from explorer.workloads._reduce import REDUCE_SUM
from explorer.workloads._shapes import format_shapes, parse_shapes
from explorer.workloads._softmax import SOFTMAX
from explorer.workloads._task import TASK, TASK_FAMILY, task_workload
from explorer.workloads._transpose import TRANSPOSE

FAMILIES: dict[str, OperatorFamily] = register_families(
    MATMUL,
    BATCH_MATMUL,
    DENSE_BIAS_RELU,
    CONV2D,
    DEPTHWISE_CONV2D,
    SOFTMAX,
    LAYER_NORM,
    REDUCE_SUM,
    ELEMENTWISE_CHAIN,
    TRANSPOSE,
    EXPR,
    TASK_FAMILY,
)
"""Every operator family by name, in the order a catalog shows them."""


def presets() -> dict[str, tuple[str, Params]]:
    """Named shapes: preset name -> (family name, parameters)."""
    return {name: (f.name, p) for f in FAMILIES.values() for name, p in f.presets.items()}


def get_family(name: str) -> OperatorFamily:
    return family_named(name)


def get_workload(name: str, **params: Any) -> Workload:
    """A validated workload from a family or preset name plus shape parameters.

    Raises:
        UnknownPluginError: ``name`` is neither a family nor a preset.
        WorkloadError: a parameter is unknown, out of range or inconsistent, or changes a shape
            parameter a preset fixes (a preset's open parameters, such as ``dtype``, may be set).
    """
    table = presets()
    if name in table:
        family, fixed = table[name]
        # A preset names a shape: changing part of it would silently make another workload under
        # the preset's name. Parameters the preset leaves open (dtype) may still be chosen.
        changed = sorted(k for k in params if k in fixed and str(params[k]) != str(fixed[k]))
        if changed:
            given = ", ".join(f"{k}={params[k]}" for k in changed)
            fixed_text = ", ".join(f"{k}={fixed[k]}" for k in changed)
            raise WorkloadError(
                f"preset {name!r} fixes {fixed_text}; it cannot be changed to {given} "
                f"(use the family {family!r} with every parameter you want instead)"
            )
        params = {**fixed, **params}
        name = family
    if name not in FAMILIES:
        raise UnknownPluginError("workload", name, [*FAMILIES, *table])
    return make_workload(FAMILIES[name], params)


__all__ = [
    "DTYPES",
    "FAMILIES",
    "OperatorFamily",
    "Params",
    "ShapeParam",
    "Workload",
    "WorkloadError",
    "format_shapes",
    "get_family",
    "get_workload",
    "out_size",
    "parse_expression",
    "parse_shapes",
    "presets",
    "TASK",
    "task_workload",
]
