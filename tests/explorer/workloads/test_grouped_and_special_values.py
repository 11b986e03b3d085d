"""Issue 8, section 5: grouped convolution, reductions misspelled as calls, division by zero, and
references that are NaN or infinite, each checked against real TVM kernels where it matters."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import _tvm
from explorer.errors import WorkloadError
from explorer.measure import Candidate, LocalMeasurer, MeasureConfig
from explorer.types import MeasureStatus
from explorer.workloads import get_workload, parse_expression
from explorer.workloads._conv2d import out_size

FAST = MeasureConfig(repeat=2, min_repeat_secs=0.001, build_timeout_secs=120.0)


@pytest.fixture(scope="module")
def measurer():
    with LocalMeasurer(FAST, num_build_workers=1) as m:
        yield m


def measure(measurer, workload, target):
    trace = _tvm.trace_to_json(_tvm.Schedule(workload.mod()).trace)
    (result,) = measurer.measure([Candidate(workload, target, trace)])
    return result


# -- grouped convolution -----------------------------------------------------------------------
def test_grouped_reference_against_direct_loops() -> None:
    p = dict(N=2, CI=6, H=7, W=6, CO=4, KH=3, KW=2, stride=2, padding=1, dilation=2, groups=2)
    w = get_workload("conv2d", dtype="float64", **p)
    x, k = w.random_inputs()
    assert k.shape == (4, 3, 3, 2)  # (CO, CI/groups, KH, KW)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    OH, OW = out_size(7, 3, 2, 1, 2), out_size(6, 2, 2, 1, 2)
    ref = np.zeros((2, 4, OH, OW))
    for n, f, y, xx, c, r, s in np.ndindex(2, 4, OH, OW, 3, 3, 2):
        group_channel = (f // 2) * 3 + c  # output channels 0-1 read inputs 0-2, 2-3 read 3-5
        ref[n, f, y, xx] += xp[n, group_channel, y * 2 + r * 2, xx * 2 + s * 2] * k[f, c, r, s]
    np.testing.assert_allclose(w.reference([x, k]), ref, rtol=1e-12)


def test_depthwise_as_a_grouped_conv_equals_the_depthwise_family() -> None:
    grouped = get_workload("conv2d", N=1, CI=3, H=9, W=7, CO=3, KH=3, KW=3, stride=2, groups=3)
    depthwise = get_workload("depthwise_conv2d", N=1, C=3, H=9, W=7, KH=3, KW=3, stride=2)
    inputs = grouped.random_inputs()
    np.testing.assert_allclose(grouped.reference(inputs), depthwise.reference(inputs), rtol=1e-6)


def test_groups_keep_old_keys_and_name_new_ones() -> None:
    # Records stored before `groups` existed name conv2d workloads without it: still the same key.
    dense = get_workload("conv2d", CI=8, CO=8)
    assert "groups" not in dense.key() and dense == get_workload("conv2d", CI=8, CO=8, groups=1)
    assert dense.param_dict["groups"] == 1
    grouped = get_workload("conv2d", CI=8, CO=8, groups=2)
    assert "groups=2" in grouped.key() and grouped != dense
    assert type(grouped).from_json(grouped.to_json()) == grouped


@pytest.mark.timeout(300)
def test_grouped_conv_measured_for_real_matches_numpy(measurer, cpu_target) -> None:
    w = get_workload("conv2d", N=1, CI=8, H=10, W=10, CO=12, KH=3, KW=3, padding=1, groups=4)
    result = measure(measurer, w, cpu_target)
    assert result.status is MeasureStatus.OK, result.error_msg
    # ... and the check has teeth: the same kernel judged against a dense conv's answer fails.
    inputs = w.random_inputs()
    dense_w = np.concatenate([inputs[1]] * 4, axis=1)  # (CO, CI, KH, KW), every group's taps
    dense = get_workload("conv2d", N=1, CI=8, H=10, W=10, CO=12, KH=3, KW=3, padding=1)
    assert w.check_output(dense.reference([inputs[0], dense_w]), w.reference(inputs)) is not None


# -- expression language -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "suggestion"),
    [
        ("M[i] = max(A[i, k])", "`M[i] max= A[i, k]`"),
        ("M[i] = min(A[i, k] * 2)", "`M[i] min= A[i, k] * 2`"),
        ("M[i] = sum(A[i, k])", "`M[i] += A[i, k]`"),
    ],
)
def test_a_reduction_written_as_a_call_says_how_to_write_it(text: str, suggestion: str) -> None:
    with pytest.raises(WorkloadError) as info:
        parse_expression(text, {"A": (4, 5)})
    assert "reductions are written" in str(info.value) and suggestion in str(info.value)
    assert info.value.position == text.index("(") - 3


@pytest.mark.parametrize(
    "text",
    [
        "C[i] = A[i] / 0",
        "C[i] = A[i] / (1 - 1)",
        "C[i] = A[i] / -0.0",
        "C[i] = A[i] / (0 * A[i])",
        "C[i] = A[i] / (A[i] - A[i])",
        "C[i] = A[i] / max(0, -1)",
        "C[i] = 2 + 1 / 0 * A[i]",
    ],
)
def test_division_by_zero_is_a_workload_error_before_tvm(text: str, monkeypatch) -> None:
    def no_tvm(*args, **kwargs):
        raise AssertionError("TVM was called")

    monkeypatch.setattr(_tvm.te, "compute", no_tvm)
    with pytest.raises(WorkloadError) as info:
        parse_expression(text, {"A": (4,)}).mod()
    assert "division by zero" in str(info.value)
    assert text[info.value.position] == "/"


def test_division_by_a_value_that_may_be_zero_is_allowed(cpu_target) -> None:
    w = parse_expression("C[i] = A[i] / (A[i] - 1)", {"A": (8,)})
    assert w.mod() is not None


# -- NaN and infinities ------------------------------------------------------------------------
def test_check_output_nan_and_inf_rules() -> None:
    w = get_workload("matmul", M=1, N=4, K=1)
    inf, nan = np.inf, np.nan
    expected = np.array([[1.0, nan, inf, -inf]], dtype=np.float32)
    assert w.check_output(expected.copy(), expected) is None
    for got in (
        [[1.0, 0.0, inf, -inf]],  # a number where NumPy says NaN
        [[nan, nan, inf, -inf]],  # NaN where NumPy has a number (e.g. an element never written)
        [[1.0, nan, -inf, -inf]],  # the sign of an infinity
        [[1.0, nan, 3e38, -inf]],  # a huge finite value is not infinity
        [[5.0, nan, inf, -inf]],  # an infinite expected value must not widen the tolerance
    ):
        assert "differ" in w.check_output(np.array(got, dtype=np.float32), expected), got


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "text",
    [
        "C[i] = log(A[i] - 2)",  # inputs are in [0.5, 1.5): NaN everywhere
        "C[i] = log(A[i] - 1)",  # NaN for about half the elements, finite for the rest
        "C[i] = exp((A[i] - 1) * 400) - exp((1 - A[i]) * 400)",  # +inf, -inf and finite
    ],
)
def test_nan_and_inf_references_measure_ok(text: str, measurer, cpu_target) -> None:
    w = parse_expression(text, {"A": (64,)})
    ref = w.reference(w.random_inputs())
    assert not np.isfinite(ref).all()  # the case under test really has NaN/inf
    result = measure(measurer, w, cpu_target)
    assert result.status is MeasureStatus.OK, result.error_msg
