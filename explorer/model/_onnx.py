"""Reading an ONNX file and everything that can be refused before any compilation: not ONNX,
truncated, weights outside the file, too large for the machine, an operator TVM cannot convert,
an input whose size is not known."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from explorer import _tvm
from explorer.core import ModelInput
from explorer.errors import ModelError
from explorer.extras import require

# The import holds the file's bytes, the parsed protobuf, the Relax module's constants and the
# lowered module's: about four copies of the weights at once.
COPIES_IN_MEMORY = 4
MAX_INPUT_DIM = 1 << 16


@dataclass(frozen=True)
class OnnxFile:
    """A readable ONNX model and what the import needs of it."""

    proto: Any  # onnx.ModelProto
    source: bytes  # the file's bytes, as stored with the model
    sha256: str
    inputs: tuple[ModelInput, ...]  # every graph input, with its static shape
    opset: int


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``name=1x3x224x224`` as (name, shape); ``ModelError`` saying what is wrong."""
    match = re.fullmatch(r"\s*([^=\s]+)\s*=\s*(\d+(?:\s*[x,]\s*\d+)*)\s*", text)
    if match is None:
        raise ModelError(
            f"an input's size must be NAME=DIMxDIMx... such as x=1x3x224x224 (got {text!r})"
        )
    dims = tuple(int(d) for d in re.split(r"\s*[x,]\s*", match.group(2)))
    if any(d < 1 or d > MAX_INPUT_DIM for d in dims):
        raise ModelError(
            f"input {match.group(1)}: every dimension must be in [1, {MAX_INPUT_DIM}] "
            f"(got {'x'.join(map(str, dims))})"
        )
    return match.group(1), dims


def read_onnx(path: str | os.PathLike[str], shapes: Mapping[str, Sequence[int]] = {}) -> OnnxFile:
    """Read and check ``path``; ``shapes`` gives the size of inputs whose dimensions the file
    leaves open (``{"x": (1, 3, 224, 224)}``).

    Raises:
        ModelError: one sentence naming what is wrong (and the node, for an operator).
    """
    require("onnx", "importing an ONNX model", "model")
    file = Path(path)
    if file.is_dir():
        raise ModelError(f"{file} is a folder: give the path of an ONNX file in it")
    if not file.is_file():
        raise ModelError(f"{file}: no such file")
    size = file.stat().st_size
    available = psutil.virtual_memory().available
    if size * COPIES_IN_MEMORY > available:
        raise ModelError(
            f"{file} is {size / 2**30:.1f} GiB: importing it needs about {COPIES_IN_MEMORY}x "
            f"that in memory, and this machine has {available / 2**30:.1f} GiB free"
        )
    return parse_onnx(file.read_bytes(), str(file), shapes)


def parse_onnx(data: bytes, where: str, shapes: Mapping[str, Sequence[int]] = {}) -> OnnxFile:
    """``read_onnx`` of bytes already read (a model's stored source); ``where`` names them in
    messages."""
    onnx = require("onnx", "importing an ONNX model", "model")
    file = where
    try:
        proto = onnx.load_model_from_string(data)
    except Exception:  # noqa: BLE001  (protobuf's DecodeError, or anything it raises)
        raise _unreadable(file, data) from None
    if not proto.graph.node:
        raise ModelError(f"{file} holds no ONNX graph nodes (an empty model, or one cut short)")
    _check_weights_inside(file, proto)
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:  # noqa: BLE001  (onnx.checker.ValidationError)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{file} is not a valid ONNX model: {first}") from None
    _check_operators(file, proto)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    known = int(onnx.defs.onnx_opset_version())
    if opset > known:  # the checker and TVM's frontend both let it through
        raise ModelError(
            f"{file} uses ONNX opset {opset}, newer than any this onnx ({onnx.__version__}) "
            f"knows (up to {known}): export it with opset {known} or lower"
        )
    inputs = _inputs(file, proto, shapes)
    return OnnxFile(proto, data, hashlib.sha256(data).hexdigest(), inputs, int(opset))


def _unreadable(file: str, data: bytes) -> ModelError:
    # onnx.save writes ir_version (field 1, a small varint) first: a file that starts so and
    # cannot be parsed was an ONNX model once, cut short or damaged since.
    if len(data) >= 2 and data[0] == 0x08 and 1 <= data[1] <= 0x7F:
        return ModelError(
            f"{file} is cut short or damaged: it starts as an ONNX model, but its "
            f"{len(data)} bytes cannot be read as one"
        )
    return ModelError(f"{file} is not an ONNX model (its bytes cannot be read as one)")


def _check_weights_inside(file: str, proto: Any) -> None:
    external = [t.name for t in proto.graph.initializer if t.data_location == 1]
    if external:
        raise ModelError(
            f"{file} keeps {len(external)} weight(s) in separate files (first: {external[0]}); "
            "save the model with its weights inside (onnx.save(model, path, "
            "save_as_external_data=False))"
        )


def _check_operators(file: str, proto: Any) -> None:
    known = _tvm.onnx_frontend_operators()
    for index, node in enumerate(proto.graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in known:
            where = f"node {node.name!r}" if node.name else f"node {index}"
            domain = f" of domain {node.domain!r}" if node.domain not in ("", "ai.onnx") else ""
            raise ModelError(
                f"{file}: operator {node.op_type}{domain} ({where}) has no conversion in "
                "TVM's ONNX frontend"
            )


def _inputs(file: str, proto: Any, shapes: Mapping[str, Sequence[int]]) -> tuple[ModelInput, ...]:
    onnx = require("onnx", "importing an ONNX model", "model")
    weights = {t.name for t in proto.graph.initializer}
    graph_inputs = [i for i in proto.graph.input if i.name not in weights]
    names = [i.name for i in graph_inputs]
    unknown = sorted(set(shapes) - set(names))
    if unknown:
        raise ModelError(
            f"{file} has no input {unknown[0]!r} (its inputs: {', '.join(names) or 'none'})"
        )
    out = []
    for value in graph_inputs:
        kind = value.type.WhichOneof("value")
        if kind != "tensor_type":
            raise ModelError(f"{file}: input {value.name!r} is a {kind}, not a tensor")
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
        dims = value.type.tensor_type.shape.dim
        declared = [
            d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in dims
        ]
        if value.name in shapes:
            given = tuple(int(d) for d in shapes[value.name])
            if len(given) != len(declared) or any(
                d is not None and d != g for d, g in zip(declared, given, strict=False)
            ):
                shown = "x".join("?" if d is None else str(d) for d in declared)
                raise ModelError(
                    f"{file}: the size given for input {value.name!r}, "
                    f"{'x'.join(map(str, given))}, does not fit its declared shape {shown}"
                )
            out.append(ModelInput(value.name, given, str(dtype)))
        elif any(d is None for d in declared):
            shown = "x".join(
                (d.dim_param or "?") if not (d.HasField("dim_value") and d.dim_value > 0)
                else str(d.dim_value)
                for d in dims
            )  # fmt: skip
            wanted = "x".join("N" if d is None else str(d) for d in declared)
            raise ModelError(
                f"{file}: input {value.name!r} has a dynamic shape {shown}; give its size as "
                f"{value.name}={wanted} with a whole number for each N (--input on the command "
                "line, Inputs in the Model tab)"
            )
        else:
            out.append(ModelInput(value.name, tuple(int(d) for d in declared if d), str(dtype)))
    return tuple(out)
