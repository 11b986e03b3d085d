"""The operator catalog: every family compiles with real TVM and matches its NumPy reference;
FLOP counts, presets, JSON round trips and shape validation."""

from __future__ import annotations

import collections
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from explorer import _tvm
from explorer.errors import UnknownPluginError, WorkloadError
from explorer.workloads import (
    DTYPES,
    FAMILIES,
    Workload,
    get_family,
    get_workload,
    presets,
)
from explorer.workloads._conv2d import out_size

# Small shapes: each compiles in ~0.1 s and runs unscheduled in well under a millisecond.
# Odd, unequal extents so that a swapped axis shows up as a shape or value mismatch.
SMALL: dict[str, dict] = {
    "matmul": dict(M=12, N=10, K=7),
    "batch_matmul": dict(batch=3, M=6, N=5, K=4),
    "dense_bias_relu": dict(M=6, N=5, K=7),
    "conv2d": dict(N=2, CI=3, H=9, W=8, CO=4, KH=3, KW=2, stride=2, padding=1, dilation=2),
    "depthwise_conv2d": dict(N=1, C=3, H=9, W=7, KH=3, KW=3, stride=2, padding=1),
    "softmax": dict(M=5, N=17),
    "layer_norm": dict(M=5, N=17, eps=1e-3),
    "reduce_sum": dict(ndim=3, D0=3, D1=4, D2=5, axis=1),
    "elementwise_chain": dict(ndim=2, D0=4, D1=5),
    "transpose": dict(perm="2,0,3,1", D0=2, D1=3, D2=4, D3=5),
    "expr": dict(text="Z[i, j] += exp(A[i, k] - 1) * B[k, j]", shapes={"A": (4, 3), "B": (3, 5)}),
}

# More shapes per family: strides without padding, other axes and ranks, 1x1 kernels.
EXTRA: list[tuple[str, dict]] = [
    ("conv2d", dict(N=1, CI=4, H=7, W=7, CO=3, KH=1, KW=1, stride=2, padding=0)),
    ("conv2d", dict(N=1, CI=2, H=6, W=5, CO=3, KH=3, KW=3, stride=1, padding=0)),
    ("conv2d", dict(N=1, CI=2, H=5, W=5, CO=2, KH=5, KW=5, stride=3, padding=2)),
    ("conv2d", dict(N=2, CI=6, H=7, W=6, CO=4, KH=3, KW=2, stride=2, padding=1, groups=2)),
    ("conv2d", dict(N=1, CI=4, H=5, W=5, CO=8, KH=1, KW=1, padding=0, groups=4)),
    ("conv2d", dict(N=1, CI=3, H=6, W=6, CO=3, KH=3, KW=3, groups=3, dilation=2)),
    ("depthwise_conv2d", dict(N=2, C=4, H=6, W=6, KH=3, KW=3, stride=1, padding=0)),
    ("reduce_sum", dict(ndim=2, D0=6, D1=9, axis=0)),
    ("reduce_sum", dict(ndim=3, D0=3, D1=4, D2=5, axis=2)),
    ("elementwise_chain", dict(ndim=1, D0=33)),
    ("transpose", dict(perm="1,0", D0=3, D1=7)),
    ("transpose", dict(perm="0,2,1", D0=2, D1=3, D2=4)),
]


def run_tvm(w: Workload, target, inputs: list[np.ndarray]) -> np.ndarray:
    """Compile ``w`` unscheduled with real TVM and run it on ``inputs``."""
    ex = _tvm.compile_mod(w.mod(), target.to_tvm())
    dev = _tvm.tvm.cpu()
    shape, dtype = w.output_spec()
    out = _tvm.tvm.runtime.empty(shape, dtype, dev)
    ex["main"](*[_tvm.tvm.runtime.tensor(a, dev) for a in inputs], out)
    return out.numpy()


def assert_matches_reference(w: Workload, target) -> None:
    inputs = w.random_inputs()
    expected = w.reference(inputs)
    got = run_tvm(w, target, inputs)
    assert w.check_output(got, expected) is None, w.key()


def test_catalog_order_and_coverage() -> None:
    assert list(FAMILIES) == [
        "matmul",
        "batch_matmul",
        "dense_bias_relu",
        "conv2d",
        "depthwise_conv2d",
        "softmax",
        "layer_norm",
        "reduce_sum",
        "elementwise_chain",
        "transpose",
        "expr",
        "task",
    ]
    # a model's task has no dtype to vary: test_a_task_computes_its_own_program covers it
    assert set(SMALL) == set(FAMILIES) - {"task"}


def test_a_task_computes_its_own_program(cpu_target) -> None:
    """The `task` family's reference is its program's default build: here a broadcast add,
    which NumPy computes too."""
    w = get_workload("task")
    a, b = w.random_inputs()
    np.testing.assert_allclose(w.reference([a, b]), a + b, rtol=1e-6)
    assert_matches_reference(w, cpu_target)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("family", list(SMALL))
def test_family_compiles_and_matches_numpy(family: str, dtype: str, cpu_target) -> None:
    w = get_workload(family, dtype=dtype, **SMALL[family])
    assert w.output_spec()[1] == dtype
    assert all(dt == dtype for _, dt in w.input_specs())
    assert_matches_reference(w, cpu_target)


@pytest.mark.parametrize(("family", "params"), EXTRA, ids=[f for f, _ in EXTRA])
def test_more_shapes_match_numpy(family: str, params: dict, cpu_target) -> None:
    assert_matches_reference(get_workload(family, **params), cpu_target)


def test_defaults_build() -> None:
    for name in FAMILIES:
        w = get_workload(name)
        assert w.mod() is not None and w.flops() >= 0


def test_reference_catches_a_wrong_result(cpu_target) -> None:
    w = get_workload("dense_bias_relu", **SMALL["dense_bias_relu"])
    inputs = w.random_inputs()
    got = run_tvm(w, cpu_target, inputs)
    got[1, 2] += 1.0
    assert "differ" in w.check_output(got, w.reference(inputs))


def block_names(w: Workload) -> list[str]:
    sch = _tvm.Schedule(w.mod())
    return [sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))]


@pytest.mark.parametrize(
    ("family", "blocks"),
    [
        ("matmul", ["C"]),
        ("batch_matmul", ["C"]),
        ("dense_bias_relu", ["dense", "bias_add", "relu"]),
        ("conv2d", ["pad", "conv"]),
        ("depthwise_conv2d", ["pad", "depthwise"]),
        ("softmax", ["maxval", "exp", "expsum", "softmax"]),
        ("layer_norm", ["mean", "var", "rstd", "layer_norm"]),
        ("reduce_sum", ["reduce_sum"]),
        ("elementwise_chain", ["mul", "add", "relu"]),
        ("transpose", ["transpose"]),
        ("expr", ["Z"]),
    ],
)
def test_block_names(family: str, blocks: list[str]) -> None:
    assert block_names(get_workload(family, **SMALL[family])) == blocks


def test_convolutions_without_padding_have_no_copy_block() -> None:
    # A pure-copy pad block would be one more block to inline and more knobs to search.
    assert block_names(get_workload("resnet18_c3")) == ["conv"]
    assert block_names(get_workload("conv2d", **{**SMALL["conv2d"], "padding": 0})) == ["conv"]
    params = {**SMALL["depthwise_conv2d"], "padding": 0}
    assert block_names(get_workload("depthwise_conv2d", **params)) == ["depthwise"]


def test_batch_matmul_is_not_transposed(cpu_target) -> None:
    # topi.nn.batch_matmul defaults to A @ B^T; ours is A @ B (checked independently of reference).
    w = get_workload("batch_matmul", batch=2, M=3, N=5, K=4)
    assert w.input_specs()[1][0] == (2, 4, 5)
    a, b = w.random_inputs()
    np.testing.assert_allclose(run_tvm(w, cpu_target, [a, b]), a @ b, rtol=1e-5)


def test_conv2d_reference_against_direct_loops() -> None:
    # The im2col reference is what every conv test trusts, so check it against the definition.
    p = dict(N=2, CI=3, H=7, W=6, CO=2, KH=3, KW=2, stride=2, padding=1, dilation=2)
    w = get_workload("conv2d", dtype="float64", **p)
    x, k = w.random_inputs()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    OH, OW = out_size(7, 3, 2, 1, 2), out_size(6, 2, 2, 1, 2)
    ref = np.zeros((2, 2, OH, OW))
    for n, f, y, xx, c, r, s in np.ndindex(2, 2, OH, OW, 3, 3, 2):
        ref[n, f, y, xx] += xp[n, c, y * 2 + r * 2, xx * 2 + s * 2] * k[f, c, r, s]
    np.testing.assert_allclose(w.reference([x, k]), ref, rtol=1e-12)


def test_depthwise_reference_against_direct_loops() -> None:
    w = get_workload("depthwise_conv2d", dtype="float64", **SMALL["depthwise_conv2d"])
    x, k = w.random_inputs()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    OH, OW = out_size(9, 3, 2, 1), out_size(7, 3, 2, 1)
    ref = np.zeros((1, 3, OH, OW))
    for n, c, y, xx, r, s in np.ndindex(1, 3, OH, OW, 3, 3):
        ref[n, c, y, xx] += xp[n, c, y * 2 + r, xx * 2 + s] * k[c, 0, r, s]
    np.testing.assert_allclose(w.reference([x, k]), ref, rtol=1e-12)


# -- FLOPs -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "params", "flops"),
    [
        ("matmul", dict(M=64, N=64, K=64), 524_288),
        ("matmul_512", {}, 268_435_456),
        ("batch_matmul_8x128", {}, 33_554_432),  # 2 * 8 * 128^3
        ("dense_bias_relu", dict(M=2, N=3, K=4), 2 * 2 * 3 * 4 + 2 * 2 * 3),
        ("resnet18_c1", {}, 236_027_904),  # 118.0M MACs: 64 * 112^2 * 3 * 49
        ("resnet18_c2", {}, 231_211_008),  # 64 * 56^2 * 64 * 9 MACs
        ("resnet18_c5", {}, 12_845_056),  # 128 * 28^2 * 64 MACs (1x1, stride 2)
        ("resnet18_c12", {}, 231_211_008),  # 512 * 7^2 * 512 * 9 MACs
        ("conv2d", dict(N=1, CI=1, H=5, W=5, CO=1, KH=3, KW=3, padding=0), 2 * 9 * 9),
        # 4 groups of 2 input channels: a quarter of the dense conv's MACs
        ("conv2d", dict(N=1, CI=8, H=5, W=5, CO=4, KH=3, KW=3, padding=1, groups=4), 3600),
        ("depthwise_112", {}, 7_225_344),  # 2 * 32 * 112^2 * 9
        ("softmax_128x1024", {}, 655_360),  # 5 per element
        ("layer_norm", dict(M=2, N=8), 12 * 16 + 2 * 2),
        ("reduce_sum", dict(ndim=3, D0=2, D1=3, D2=4, axis=0), 24),
        ("elementwise_chain", dict(ndim=1, D0=1000), 3000),
        ("transpose_1024", {}, 0),
    ],
)
def test_flops(name: str, params: dict, flops: int) -> None:
    assert get_workload(name, **params).flops() == flops


def test_bytes_moved_default() -> None:
    w = get_workload("matmul", M=4, N=5, K=6, dtype="float64")
    assert w.bytes_moved() == 8 * (4 * 6 + 6 * 5 + 4 * 5)
    assert get_workload("transpose", D0=3, D1=7, dtype="float16").bytes_moved() == 2 * 2 * 21


# -- presets -----------------------------------------------------------------------------------
RESNET = {
    # name: (size, CI, CO, k, stride) from the ResNet-18 table
    1: (224, 3, 64, 7, 2),
    2: (56, 64, 64, 3, 1),
    3: (56, 64, 64, 1, 1),
    4: (56, 64, 128, 3, 2),
    5: (56, 64, 128, 1, 2),
    6: (28, 128, 128, 3, 1),
    7: (28, 128, 256, 3, 2),
    8: (28, 128, 256, 1, 2),
    9: (14, 256, 256, 3, 1),
    10: (14, 256, 512, 3, 2),
    11: (14, 256, 512, 1, 2),
    12: (7, 512, 512, 3, 1),
}


@pytest.mark.parametrize("i", sorted(RESNET))
def test_resnet_presets(i: int) -> None:
    hw, ci, co, k, s = RESNET[i]
    w = get_workload(f"resnet18_c{i}")
    p = w.param_dict
    assert (p["N"], p["CI"], p["H"], p["W"], p["CO"]) == (1, ci, hw, hw, co)
    assert (p["KH"], p["KW"], p["stride"], p["padding"], p["dilation"]) == (k, k, s, k // 2, 1)
    assert w.input_specs() == [((1, ci, hw, hw), "float32"), ((co, ci, k, k), "float32")]
    assert w.output_spec() == ((1, co, hw // s, hw // s), "float32")


def python_calls(fn: Callable[[], object]) -> tuple[object, list[str]]:
    """``fn()``'s value, and the Python functions it called (NumPy's C calls not counted):
    what a Python loop over elements would multiply, counted the same on a busy machine."""
    calls: list[str] = []

    def profile(frame: Any, event: str, _arg: object) -> None:
        if event == "call":
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        value = fn()
    finally:
        sys.setprofile(None)
    return value, calls


def test_resnet_references_are_vectorised() -> None:
    # The reference runs on whole ResNet layers (C1: 118M multiply-adds), so it must be
    # vectorised: a Python loop over its output's 800k elements would make millions of calls.
    for i in (1, 2, 10):
        w = get_workload(f"resnet18_c{i}")
        inputs = w.random_inputs()
        out, calls = python_calls(lambda w=w, inputs=inputs: w.reference(inputs))
        assert out.shape == w.output_spec()[0]  # type: ignore[attr-defined]  # an ndarray
        assert len(calls) < 5_000, (i, len(calls), collections.Counter(calls).most_common(3))


def test_resnet_layer_end_to_end(cpu_target) -> None:
    assert_matches_reference(get_workload("resnet18_c11"), cpu_target)


def test_all_presets_resolve() -> None:
    table = presets()
    for name in [
        "matmul_512",
        "matmul_1024",
        "batch_matmul_8x128",
        "softmax_128x1024",
        "depthwise_112",
        *(f"resnet18_c{i}" for i in range(1, 13)),
    ]:
        assert name in table
    for name, (family, params) in table.items():
        w = get_workload(name)
        assert w.family == family
        assert all(w.param_dict[k] == v for k, v in params.items())
        assert w.flops() > 0 or family == "transpose"


def test_preset_parameters_can_be_overridden() -> None:
    w = get_workload("resnet18_c2", dtype="float16")
    assert w.param_dict["dtype"] == "float16" and w.param_dict["CI"] == 64


def test_depthwise_112_preset() -> None:
    w = get_workload("depthwise_112")
    assert w.input_specs() == [((1, 32, 112, 112), "float32"), ((32, 1, 3, 3), "float32")]
    assert w.output_spec() == ((1, 32, 112, 112), "float32")


# -- identity and JSON -------------------------------------------------------------------------
@pytest.mark.parametrize("family", list(SMALL))
def test_json_round_trip(family: str) -> None:
    w = get_workload(family, **SMALL[family])
    data = json.loads(json.dumps(w.to_json()))
    back = Workload.from_json(data)
    assert back == w and back.key() == w.key() and hash(back) == hash(w)
    assert Workload.from_json(get_workload(family).to_json()) == get_workload(family)


def test_keys_are_distinct_and_stable() -> None:
    keys = {get_workload(f, **p).key() for f, p in SMALL.items()}
    assert len(keys) == len(SMALL)
    assert get_workload("matmul", M=64, N=64, K=64).key() == "matmul(K=64,M=64,N=64,dtype=float32)"
    # String forms of ints and floats coerce to the same workload.
    assert get_workload("matmul", M="64", N=64, K=64) == get_workload("matmul", M=64, N=64, K=64)
    assert get_workload("layer_norm", eps="1e-3") == get_workload("layer_norm", eps=0.001)


# -- bad shapes --------------------------------------------------------------------------------
BAD: list[tuple[str, dict, list[str]]] = [
    ("matmul", dict(M=0), ["'M'", "at least 1", "0"]),
    ("matmul", dict(N=-4), ["'N'", "-4"]),
    ("matmul", dict(K=1.5), ["'K'", "integer", "1.5"]),
    ("matmul", dict(K="lots"), ["'K'", "integer"]),
    ("matmul", dict(M=True), ["'M'", "integer"]),
    ("matmul", dict(M=1 << 17), ["'M'", "at most"]),
    ("matmul", dict(M=65536, N=65536, K=65536), ["A[M, K]", "65536", "elements"]),
    ("matmul", dict(dtype="int8"), ["'dtype'", "int8"]),
    ("batch_matmul", dict(batch=4096, M=512, N=512, K=512), ["A[batch, M, K]", "elements"]),
    ("dense_bias_relu", dict(M=65536, K=65536), ["X[M, K]", "elements"]),
    ("conv2d", dict(H=5, W=5, KH=9, padding=1), ["KH=9", "padded input H", "7"]),
    ("conv2d", dict(H=5, W=5, KW=4, padding=0, dilation=2), ["KW=4", "dilation=2", "W", "7"]),
    ("conv2d", dict(stride=0), ["'stride'", "at least 1"]),
    ("conv2d", dict(padding=-1), ["'padding'", "at least 0"]),
    ("conv2d", dict(dilation=0), ["'dilation'"]),
    ("conv2d", dict(N=64, CI=1024, H=1024, W=1024), ["X[N, CI, H, W]", "elements"]),
    ("depthwise_conv2d", dict(H=2, W=2, KH=3, KW=3, padding=0), ["KH=3", "padded input H"]),
    ("softmax", dict(M=1 << 20, N=1 << 20), ["X[M, N]", "elements"]),
    ("layer_norm", dict(eps=-1.0), ["'eps'", "at least 0"]),
    ("layer_norm", dict(eps="tiny"), ["'eps'", "number"]),
    ("layer_norm", dict(eps=float("nan")), ["'eps'", "finite"]),
    ("reduce_sum", dict(ndim=2, axis=2), ["'axis'", "out of range", "ndim=2"]),
    ("reduce_sum", dict(ndim=2, D2=5), ["'D2'", "must be 1", "2-D"]),
    ("reduce_sum", dict(ndim=4), ["'ndim'", "4"]),
    ("elementwise_chain", dict(ndim=1, D0=1 << 29), ["'D0'", "at most"]),
    ("elementwise_chain", dict(ndim=2, D0=1 << 20, D1=1 << 10), ["A[D0, D1]", "elements"]),
    ("transpose", dict(perm="2,0"), ["'perm'", "'2,0'"]),
    ("transpose", dict(perm="1,0", D0=4, D1=4, D3=2), ["'D3'", "must be 1"]),
    ("transpose", dict(perm="0,2,1", D0=1 << 10, D1=1 << 10, D2=1 << 10), ["X[D0, D1, D2]"]),
    ("matmul", dict(Q=3), ["unknown parameter", "Q", "valid: M, N, K, dtype"]),
    ("conv2d", dict(kernel=3), ["unknown parameter", "kernel"]),
    ("conv2d", dict(CI=6, CO=4, groups=4), ["CI=6", "not divisible by groups=4"]),
    ("conv2d", dict(CI=8, CO=6, groups=4), ["CO=6", "not divisible by groups=4"]),
    ("conv2d", dict(groups=0), ["'groups'", "at least 1"]),
]


@pytest.mark.parametrize(("family", "params", "fragments"), BAD, ids=[f for f, _, _ in BAD])
def test_bad_parameters_raise_workload_error(family: str, params: dict, fragments) -> None:
    with pytest.raises(WorkloadError) as info:
        get_workload(family, **params)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    assert message.startswith(family), message


def test_too_many_flops_is_refused() -> None:
    # Each tensor is in range; the product is not.
    with pytest.raises(WorkloadError, match="FLOPs"):
        get_workload("conv2d", N=64, CI=1024, H=56, W=56, CO=1024, KH=7, KW=7, padding=3)


def test_unknown_family() -> None:
    with pytest.raises(UnknownPluginError) as info:
        get_workload("matmull")
    assert "matmul" in str(info.value) and "resnet18_c1" in str(info.value)
    with pytest.raises(UnknownPluginError):
        get_family("nope")
    with pytest.raises(UnknownPluginError):
        Workload.from_json({"family": "nope", "params": {}})


def test_validation_happens_before_tvm() -> None:
    # A huge conv must be refused by shape arithmetic alone: TE would take minutes and memory.
    def refused() -> str:
        with pytest.raises(WorkloadError) as info:
            get_workload("conv2d", N=1024, CI=4096, H=4096, W=4096)
        return str(info.value)

    def tvm_calls(calls: list[str]) -> list[str]:
        return [c for c in calls if f"{os.sep}tvm{os.sep}" in c]

    _, calls = python_calls(refused)
    assert not tvm_calls(calls), "TVM was called"
    small = get_workload("conv2d", N=1, CI=4, H=8, W=8, CO=4, KH=3, KW=3)
    assert tvm_calls(python_calls(small.mod)[1])  # what building its program calls


def test_every_param_has_help_and_a_valid_default() -> None:
    for family in FAMILIES.values():
        for p in family.params:
            assert p.help, (family.name, p.name)
            p.check(family.name, p.default)
        assert math.isfinite(family.rtol)


def test_a_bool_is_not_taken_for_an_integer_choice():
    from explorer.workloads import FAMILIES

    family, param = next(
        (f, p)
        for f in FAMILIES.values()
        for p in f.params
        if p.kind == "choice" and 1 in p.choices and all(type(c) is int for c in p.choices)
    )
    with pytest.raises(WorkloadError, match=param.name):
        get_workload(family.name, **{param.name: True})
