"""What a workload is: an operator family (a TE builder with shape parameters, FLOP and byte counts
and a NumPy reference) and one instance of it with concrete parameters."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from explorer import _tvm
from explorer.errors import UnknownPluginError, WorkloadError
from explorer.types import CacheFlush

ParamValue = Any  # int | float | str | tuple of those
Params = Mapping[str, ParamValue]

DTYPES = ("float32", "float64", "float16")
MAX_TENSOR_ELEMENTS = 1 << 28  # 1 GiB of fp32 per tensor: larger is a typo, not a workload
MAX_FLOPS = 10**13  # ~an hour on this machine even at peak


@dataclass(frozen=True, slots=True)
class ShapeParam:
    """One parameter of an operator family, declared so a UI can build a picker from it."""

    name: str
    default: ParamValue
    kind: str = "int"  # "int", "float", "choice", "str", "shapes", "script" (long text)
    min: int | None = 1
    max: int | None = 1 << 16
    choices: tuple[ParamValue, ...] = ()
    help: str = ""
    # Left out of the workload's key (and JSON) at its default, so that the keys of records stored
    # before the parameter existed (e.g. conv2d's ``groups``) still name the same workload.
    keyed_at_default: bool = True

    def check(self, family: str, value: ParamValue) -> ParamValue:
        """Coerce and validate one value; raises ``WorkloadError`` naming the parameter."""
        where = f"{family}: parameter {self.name!r}"
        original = value
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                try:  # "512" from a command line or a form; "--5", "1.5" and "lots" are not
                    value = int(value) if isinstance(value, str) else None
                except ValueError:
                    value = None
                if value is None:
                    raise WorkloadError(f"{where} must be an integer (got {original!r})")
            value = int(value)
            if self.min is not None and value < self.min:
                raise WorkloadError(f"{where} must be at least {self.min} (got {value})")
            if self.max is not None and value > self.max:
                raise WorkloadError(f"{where} must be at most {self.max} (got {value})")
            return value
        if self.kind == "choice":
            # `True in (0, 1)` holds in Python; a bool is only a valid choice among bools.
            is_bool_mixup = isinstance(value, bool) != isinstance(self.choices[0], bool)
            if is_bool_mixup or value not in self.choices:
                raise WorkloadError(
                    f"{where} must be one of {', '.join(map(repr, self.choices))} (got {value!r})"
                )
            return value
        if self.kind == "float":
            return self._check_float(where, value)
        if self.kind in ("str", "script"):
            if not isinstance(value, str):
                raise WorkloadError(f"{where} must be a string (got {value!r})")
            return value
        if self.kind == "shapes":
            return _canonical_shapes(where, value, self.max)
        return value

    def _check_float(self, where: str, value: ParamValue) -> float:
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise WorkloadError(f"{where} must be a number (got {value!r})") from None
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise WorkloadError(f"{where} must be a number (got {value!r})")
        number = float(value)
        if not math.isfinite(number):
            raise WorkloadError(f"{where} must be finite (got {number!r})")
        if self.min is not None and number < self.min:
            raise WorkloadError(f"{where} must be at least {self.min} (got {number})")
        if self.max is not None and number > self.max:
            raise WorkloadError(f"{where} must be at most {self.max} (got {number})")
        return number


def _canonical_shapes(
    where: str, value: ParamValue, max_dim: int | None
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Tensor name -> shape, as a hashable tuple sorted by name (JSON gives lists of pairs)."""
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)) and all(
        isinstance(v, (list, tuple)) and len(v) == 2 for v in value
    ):
        pairs = [tuple(v) for v in value]
    else:
        raise WorkloadError(f"{where} must map tensor names to shapes (got {value!r})")
    out: dict[str, tuple[int, ...]] = {}
    for name, dims in pairs:
        if not isinstance(name, str) or not name:
            raise WorkloadError(f"{where}: tensor names must be non-empty strings (got {name!r})")
        if name in out:
            raise WorkloadError(f"{where}: tensor {name!r} is given twice")
        if not isinstance(dims, (list, tuple)) or any(
            isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims
        ):
            raise WorkloadError(
                f"{where}: shape of {name!r} must be a tuple of ints (got {dims!r})"
            )
        for d in dims:
            if d < 1 or (max_dim is not None and d > max_dim):
                raise WorkloadError(
                    f"{where}: every dimension of {name!r} must be in [1, {max_dim}] "
                    f"(got {tuple(dims)})"
                )
        out[name] = tuple(int(d) for d in dims)
    return tuple(sorted(out.items()))


def dtype_param(default: str = "float32") -> ShapeParam:
    return ShapeParam("dtype", default, kind="choice", choices=DTYPES, help="element type")


@dataclass(frozen=True, slots=True)
class OperatorFamily:
    """A parameterised operator: how to build it in TE and what it should compute.

    ``build`` returns TE tensors, inputs first and the output last; a family whose program is
    TIR already (a model's task) gives ``build_mod`` (the IRModule with ``main``) and
    ``signature`` (its buffers' name, shape and dtype, inputs first) instead. ``reference``
    computes the output from NumPy inputs. ``validate`` checks cross-parameter constraints
    (e.g. a kernel larger than its padded input) and raises ``WorkloadError``; per-parameter
    ranges are in ``params``.
    """

    name: str
    description: str
    params: tuple[ShapeParam, ...]
    build: Callable[[Params], list[Any]] | None
    flops: Callable[[Params], int]
    reference: Callable[[Sequence[np.ndarray], Params], np.ndarray]
    bytes_moved: Callable[[Params], int] | None = None  # default: inputs + output, once each
    validate: Callable[[Params], None] | None = None
    presets: Mapping[str, Params] = field(default_factory=dict)  # named shapes, e.g. ResNet layers
    rtol: float = 1e-4
    build_mod: Callable[[Params], Any] | None = None
    signature: Callable[[Params], list[tuple[str, tuple[int, ...], str]]] | None = None
    # How its kernel finds the CPU caches where it runs, so every timing of it is made that way
    # (``MeasureConfig.cache_flush``): a catalog operator is timed as a loop runs it.
    cache_flush: CacheFlush = CacheFlush.NONE
    # Whose output a schedule's is checked against, as the checks' verdicts name it.
    reference_name: str = "NumPy"
    # Whether that reference is the unscheduled program itself (a model's task): its own
    # timing then needs no check, which would only compile the same program twice.
    reference_is_unscheduled: bool = False

    def resolve(self, given: Params) -> dict[str, ParamValue]:
        """Fill defaults, coerce and validate; raises ``WorkloadError`` on anything wrong."""
        known = {p.name: p for p in self.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise WorkloadError(
                f"{self.name}: unknown parameter(s) {', '.join(unknown)}; "
                f"valid: {', '.join(known)}"
            )
        out = {p.name: p.check(self.name, given.get(p.name, p.default)) for p in self.params}
        if self.validate is not None:
            self.validate(out)
        return out


@dataclass(frozen=True, slots=True)
class Workload:
    """One operator with concrete parameters: the unit a session schedules and a record names.

    Build instances with ``explorer.workloads.get_workload`` (or ``parse_expression`` for custom
    text), which validates the parameters first. Tensors and the PrimFunc are built lazily and
    cached per key.

    Example:
        >>> from explorer.workloads import get_workload
        >>> w = get_workload("matmul", M=64, N=64, K=64)
        >>> w.key()
        'matmul(K=64,M=64,N=64,dtype=float32)'
        >>> w.flops()
        524288
    """

    family: str
    params: tuple[tuple[str, ParamValue], ...]

    # -- identity -----------------------------------------------------------------------------
    def key(self) -> str:
        """A stable, readable identifier: family plus sorted parameters (a long text, such as
        a task's TVMScript, by its digest)."""
        scripts = {p.name for p in self.spec.params if p.kind == "script"}
        inner = ",".join(
            f"{k}={_digest(str(v)) if k in scripts else _fmt(v)}" for k, v in self.params
        )
        return f"{self.family}({inner})"

    @property
    def param_dict(self) -> dict[str, ParamValue]:
        """Every parameter, including those left out of the key at their default."""
        implicit = {p.name: p.default for p in self.spec.params if not p.keyed_at_default}
        return {**implicit, **dict(self.params)}

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "params": {k: _jsonable(v) for k, v in self.params}}

    @staticmethod
    def from_json(data: object) -> Workload:
        if not isinstance(data, Mapping) or "family" not in data:
            raise WorkloadError(f"not a workload description: {data!r}")
        return make_workload(family_named(data["family"]), dict(data.get("params", {})))

    def __str__(self) -> str:
        return self.key()

    # -- what it computes ---------------------------------------------------------------------
    @property
    def spec(self) -> OperatorFamily:
        return family_named(self.family)

    def tensors(self) -> list[Any]:
        """The TE tensors, inputs first (a family built from TIR has none: ``buffers``)."""
        if self.spec.build is None:
            raise WorkloadError(f"{self.family}: a workload built from TIR has no TE tensors")
        return _build_cached(self)[0]

    def buffers(self) -> list[tuple[str, tuple[int, ...], str]]:
        """Every buffer of the program as (name, shape, dtype), inputs first, output last."""
        if self.spec.signature is not None:
            return list(self.spec.signature(self.param_dict))
        return [(t.op.name, tuple(int(s) for s in t.shape), str(t.dtype)) for t in self.tensors()]

    def mod(self) -> Any:
        """The ``tvm.IRModule`` with the unscheduled PrimFunc as ``main``."""
        return _build_cached(self)[1]

    def flops(self) -> int:
        return int(self.spec.flops(self.param_dict))

    def bytes_moved(self) -> int:
        if self.spec.bytes_moved is not None:
            return int(self.spec.bytes_moved(self.param_dict))
        return sum(_nbytes(shape, dtype) for shape, dtype in self.input_specs()) + _nbytes(
            *self.output_spec()
        )

    def input_specs(self) -> list[tuple[tuple[int, ...], str]]:
        return [(shape, dtype) for _, shape, dtype in self.buffers()[:-1]]

    def output_spec(self) -> tuple[tuple[int, ...], str]:
        _, shape, dtype = self.buffers()[-1]
        return shape, dtype

    def random_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Inputs in [0.5, 1.5): away from zero so divisions and logs stay well defined."""
        rng = np.random.default_rng(seed)
        return [
            (rng.random(shape, dtype=np.float64) + 0.5).astype(dtype)
            for shape, dtype in self.input_specs()
        ]

    def reference(self, inputs: Sequence[np.ndarray]) -> np.ndarray:
        """The expected output, computed by NumPy (in float64 for accuracy, cast back)."""
        out_shape, out_dtype = self.output_spec()
        wide = [np.asarray(a, dtype=np.float64) for a in inputs]
        ref = self.spec.reference(wide, self.param_dict)
        with np.errstate(over="ignore"):  # beyond the dtype's range is inf, as in the kernel
            ref = np.asarray(ref).astype(out_dtype)
        if ref.shape != out_shape:
            raise AssertionError(f"{self.key()}: reference shape {ref.shape} != {out_shape}")
        return ref

    @property
    def rtol(self) -> float:
        dtype = self.param_dict.get("dtype", "float32")
        return {"float16": 2e-2, "float64": 1e-9}.get(str(dtype), self.spec.rtol)

    def check_output(self, got: np.ndarray, expected: np.ndarray) -> str | None:
        """``None`` when ``got`` matches, else a one-line description of the mismatch."""
        if got.shape != expected.shape:
            return f"output shape {got.shape} != expected {expected.shape}"
        # The tolerance scales with the largest *finite* expected value: an infinite one would make
        # every finite element "close". Infinities must then match exactly (np.isclose compares
        # them by sign and place), and NaN matches NaN at the same place only (log of a negative
        # input is NaN in NumPy and in the kernel alike; a NaN anywhere else, e.g. an element the
        # kernel never wrote into the NaN-filled output buffer, is still a mismatch).
        finite = np.abs(expected[np.isfinite(expected)])
        scale = max(float(finite.max()) if finite.size else 0.0, 1e-30)
        bad = ~np.isclose(got, expected, rtol=self.rtol, atol=self.rtol * scale, equal_nan=True)
        if not bad.any():
            return None
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return (
            f"{int(bad.sum())} of {bad.size} output elements differ from NumPy "
            f"(first at {list(idx)}: got {got[idx]!r}, expected {expected[idx]!r})"
        )


@functools.lru_cache(maxsize=64)
def _build_cached(workload: Workload) -> tuple[list[Any], Any]:
    spec = workload.spec
    if spec.build is None:
        assert spec.build_mod is not None, f"{spec.name}: a family needs build or build_mod"
        return [], spec.build_mod(workload.param_dict)
    tensors = spec.build(workload.param_dict)
    for t in tensors:
        n = math.prod(int(s) for s in t.shape)
        if n > MAX_TENSOR_ELEMENTS:
            raise WorkloadError(
                f"{workload.key()}: tensor {t.name!r} would hold {n:,} elements "
                f"(limit {MAX_TENSOR_ELEMENTS:,})"
            )
    return tensors, _tvm.create_prim_func(tensors)


_CATALOG: dict[str, OperatorFamily] = {}
"""Every operator family by name, in the order a catalog shows them: filled once by
``explorer.workloads`` (``register_families``), which Python imports before any module of it."""


def register_families(*families: OperatorFamily) -> dict[str, OperatorFamily]:
    """Add ``families`` to the catalog; returns it (the same dict, read-only by convention)."""
    _CATALOG.update((f.name, f) for f in families)
    return _CATALOG


def family_named(name: str) -> OperatorFamily:
    try:
        return _CATALOG[name]
    except KeyError:
        raise UnknownPluginError("operator family", name, _CATALOG) from None


def make_workload(family: OperatorFamily, given: Params) -> Workload:
    """Validate ``given`` against ``family`` and return the frozen workload."""
    params = family.resolve(given)
    for p in family.params:
        if not p.keyed_at_default and params[p.name] == p.default:
            del params[p.name]
    workload = Workload(family.name, tuple(sorted(params.items())))
    flops = workload.flops()
    if flops > MAX_FLOPS:
        raise WorkloadError(
            f"{workload.key()}: {flops:.3g} FLOPs is beyond what can be measured here "
            f"(limit {MAX_FLOPS:.0e})"
        )
    return workload


def check_elements(family: str, name: str, shape: Sequence[int]) -> None:
    """Refuse absurd tensors before TVM allocates anything (cheap, shape arithmetic only)."""
    n = math.prod(shape)
    if n > MAX_TENSOR_ELEMENTS:
        raise WorkloadError(
            f"{family}: tensor {name} of shape {tuple(shape)} would hold {n:,} elements "
            f"(limit {MAX_TENSOR_ELEMENTS:,})"
        )


def _nbytes(shape: Sequence[int], dtype: str) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


@functools.lru_cache(maxsize=256)
def _digest(value: str) -> str:
    # cached: a task's key is asked for on every cache lookup, its text is kilobytes
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


def _fmt(value: ParamValue) -> str:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(_jsonable(value), sort_keys=True, separators=(",", ":"))
    return str(value)


def _jsonable(value: ParamValue) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value
