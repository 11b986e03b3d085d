"""Layer transformations (issue 12): each transformed layer's TVM kernels, assembled, compute
what the authors' definition of the transformed layer computes (a NumPy reference written from
``pytorch/models/convs.py``, not from the catalog); MACs and parameters agree with the catalog
workloads' ``flops()``; refusals are one sentence; misuse raises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import _tvm
from explorer.errors import UnknownPluginError
from explorer.measure import Candidate, LocalMeasurer, MeasureConfig
from explorer.nas import (
    TRANSFORMATIONS,
    Bottleneck,
    Depthwise,
    Group,
    Layer,
    Refusal,
    SpatialSplit,
    SplitGroup,
    Transformation,
    UnrollGroup,
    apply_sequence,
    make_transformation,
)
from explorer.types import MeasureStatus


# -- an independent reference: convolution by its definition ------------------------------------
def conv_ref(x: np.ndarray, w: np.ndarray, stride: int, pad: int, groups: int) -> np.ndarray:
    """nn.Conv2d(bias=False) in float64, one output channel and one kernel tap at a time."""
    N, C, H, W = x.shape
    CO, Cg, K, _ = w.shape
    assert C == Cg * groups and CO % groups == 0
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH, OW = (H + 2 * pad - K) // stride + 1, (W + 2 * pad - K) // stride + 1
    out = np.zeros((N, CO, OH, OW))
    per_group = CO // groups
    for f in range(CO):
        g = f // per_group
        xs = xp[:, g * Cg : (g + 1) * Cg]
        for r in range(K):
            for s in range(K):
                window = xs[:, :, r : r + stride * OH : stride, s : s + stride * OW : stride]
                out[:, f] += np.einsum("nchw,c->nhw", window, w[f, :, r, s])
    return out


def authors_reference(
    step: str, x: np.ndarray, ws: list[np.ndarray], stride: int, pad: int
) -> np.ndarray:
    """The transformed layer as the authors' PyTorch modules compute it, weights in piece order."""
    if step == "group(2) > spatial_split(2)":  # a composition: grouped strips
        Hg = x.shape[2] // 2
        strips = [
            conv_ref(x[:, :, i * Hg : (i + 1) * Hg], ws[i], stride, pad, 2) for i in range(2)
        ]
        return np.concatenate(strips, 2)
    if step.startswith("group("):
        return conv_ref(x, ws[0], stride, pad, int(step[6:-1]))
    if step == "depthwise":
        return conv_ref(x, ws[0], stride, pad, x.shape[1])
    if step.startswith("bottleneck("):
        return conv_ref(x, ws[0], stride, pad, 1)
    if step.startswith("split_group("):  # Seq1: cat([conv_i(x) for i], dim=1)
        groups = [int(g) for g in step[12:-1].split(",")]
        return np.concatenate(
            [conv_ref(x, w, stride, pad, g) for w, g in zip(ws, groups, strict=True)], 1
        )
    if step.startswith("unroll_group("):  # Seq2: cat((conv1(x), convg1(x[:, u:])), 1)
        u, g = (int(v) for v in step[13:-1].split(","))
        return np.concatenate(
            [conv_ref(x, ws[0], stride, pad, 1), conv_ref(x[:, u:], ws[1], stride, pad, g)], 1
        )
    if step.startswith("spatial_split("):  # Seq3: cat([conv_i(x[:, :, i*Hg:(i+1)*Hg])], dim=2)
        sf = int(step[14:-1])
        Hg = x.shape[2] // sf
        strips = [
            conv_ref(x[:, :, i * Hg : (i + 1) * Hg], ws[i], stride, pad, 1) for i in range(sf)
        ]
        return np.concatenate(strips, 2)
    raise AssertionError(step)


CASES = [
    (Layer.dense("conv", 8, 8, 8, 8), [Group(4)]),
    (Layer.dense("conv", 8, 8, 8, 8, 3, 2), [Group(2)]),
    (Layer.dense("conv", 8, 8, 8, 8), [Depthwise()]),
    (Layer.dense("conv", 8, 8, 8, 8), [Bottleneck(4)]),
    (Layer.dense("conv", 8, 8, 8, 8), [Bottleneck(8)]),  # collapses the channels to 1
    (Layer.dense("conv", 8, 8, 8, 8), [SplitGroup((1, 2, 2, 1))]),
    (Layer.dense("conv", 8, 8, 8, 8, 3, 2), [SplitGroup((2, 4))]),
    (Layer.dense("conv", 8, 8, 8, 8), [UnrollGroup(2, 3)]),
    (Layer.dense("conv", 8, 8, 8, 8, 3, 2), [UnrollGroup(4, 2)]),
    (Layer.dense("conv", 8, 8, 8, 8), [SpatialSplit(4)]),
    (Layer.dense("conv", 8, 8, 8, 8, 3, 2), [SpatialSplit(2)]),
    (Layer.dense("conv", 8, 8, 8, 8), [Group(2), SpatialSplit(2)]),
]
IDS = [f"{' > '.join(map(str, steps))}@s{layer.stride}" for layer, steps in CASES]


@pytest.fixture(scope="module")
def measurer():
    config = MeasureConfig(repeat=2, min_repeat_secs=0.001, build_timeout_secs=120.0)
    with LocalMeasurer(config, num_build_workers=1) as m:
        yield m


def run_kernel(workload, inputs, target) -> np.ndarray:
    """Compile the catalog workload's unscheduled TE and run it here on ``inputs``."""
    tvm = _tvm.tvm
    dev = tvm.cpu()
    executable = _tvm.compile_mod(workload.mod(), target.to_tvm())
    shape, dtype = workload.output_spec()
    out = tvm.runtime.empty(shape, dtype, dev)
    executable["main"](*[tvm.runtime.tensor(np.ascontiguousarray(a), dev) for a in inputs], out)
    return out.numpy()


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("layer", "steps"), CASES, ids=IDS)
def test_the_transformed_layer_s_kernels_compute_the_authors_definition(
    layer, steps, cpu_target
) -> None:
    new = apply_sequence(layer, steps)
    assert isinstance(new, Layer), new
    rng = np.random.default_rng(len(new.pieces))
    x = rng.standard_normal((1, layer.in_channels, layer.height, layer.width)).astype("float32")
    ws = [
        rng.standard_normal(
            (p.conv.out_channels, p.conv.in_channels // p.conv.groups, 3, 3)
        ).astype("float32")
        for p in new.pieces
    ]
    # Every piece runs its own catalog workload on its slice of the input, into its slice of
    # the output: what a network built from the tuned workloads would do.
    got = np.full((1, new.out_channels, new.out_height, new.out_width), np.nan, "float32")
    for p, w in zip(new.pieces, ws, strict=True):
        c = p.conv
        part = x[:, p.in_start : p.in_start + c.in_channels, p.row_start : p.row_start + c.height]
        got[
            :,
            p.out_start : p.out_start + c.out_channels,
            p.out_row_start : p.out_row_start + c.out_height,
        ] = run_kernel(c.workload(), [part, w], cpu_target)
    step = " > ".join(new.history)
    want = authors_reference(
        step, x.astype(np.float64), [w.astype(np.float64) for w in ws], layer.stride, layer.padding
    )
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.timeout(600)
def test_every_piece_is_an_ordinary_workload_the_measurer_checks(measurer, cpu_target) -> None:
    # Through the explorer's own measurer: build in a worker, run, compare with the workload's
    # NumPy reference (status OK), as a search over the transformed layer would.
    workloads = {}
    for layer, steps in CASES:
        new = apply_sequence(layer, steps)
        assert isinstance(new, Layer)
        for w in new.workloads():
            workloads[w.key()] = w
    candidates = [
        Candidate(w, cpu_target, _tvm.trace_to_json(_tvm.Schedule(w.mod()).trace))
        for w in workloads.values()
    ]
    results = measurer.measure(candidates)
    assert len(results) == len(workloads) >= 10
    for w, r in zip(workloads.values(), results, strict=True):
        assert r.status is MeasureStatus.OK, (w.key(), r.error_msg)


# -- MACs and parameters ------------------------------------------------------------------------
def flops_macs(layer: Layer) -> int:
    """MACs as the catalog counts them: half of each piece workload's FLOPs."""
    return sum(p.conv.workload().flops() // 2 for p in layer.pieces)


def dense_macs(layer: Layer, ci: int, co: int, groups: int = 1) -> int:
    return co * (ci // groups) * layer.kernel**2 * layer.out_height * layer.out_width


channels = st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64])
counts = st.sampled_from([1, 2, 3, 4, 8, 16])
factors = counts.filter(lambda n: n > 1)  # a group, bottleneck or strip count of 1 changes nothing
split_groups = st.lists(counts, min_size=1, max_size=8).filter(lambda gs: set(gs) != {1})
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def layers(draw: st.DrawFn) -> Layer:
    size = draw(st.sampled_from([4, 6, 8, 12, 16]))
    kernel = draw(st.sampled_from([1, 3, 5]))
    stride = draw(st.sampled_from([1, 2]))
    return Layer.dense("conv", draw(channels), draw(channels), size, size, kernel, stride)


@SETTINGS
@given(layers(), factors)
def test_group_and_bottleneck_macs_and_params(layer: Layer, g: int) -> None:
    ci, co = layer.in_channels, layer.out_channels
    grouped = Group(g).apply(layer)
    if ci % g or co % g:
        assert isinstance(grouped, Refusal)
    else:
        assert isinstance(grouped, Layer)
        assert grouped.macs == flops_macs(grouped) == dense_macs(layer, ci, co, g)
        assert grouped.params * g == layer.params
    narrowed = Bottleneck(g).apply(layer)
    if co % g:
        assert isinstance(narrowed, Refusal)
    else:
        assert isinstance(narrowed, Layer) and narrowed.out_channels == co // g
        assert narrowed.macs == flops_macs(narrowed) == dense_macs(layer, ci, co // g)
        assert narrowed.params == co // g * ci * layer.kernel**2
    depthwise = Depthwise().apply(layer)
    assert isinstance(depthwise, Refusal) == (ci != co)
    if isinstance(depthwise, Layer):
        assert depthwise.macs == flops_macs(depthwise) == dense_macs(layer, ci, co, ci)


@SETTINGS
@given(layers(), split_groups, counts, counts)
def test_composite_sequences_macs_and_params(
    layer: Layer, split: list[int], u: int, g: int
) -> None:
    ci, co = layer.in_channels, layer.out_channels
    sf = len(split)
    seq1 = SplitGroup(tuple(split)).apply(layer)
    if co % sf or any(ci % gi or (co // sf) % gi for gi in split):
        assert isinstance(seq1, Refusal)
    else:
        assert isinstance(seq1, Layer)
        expected = sum(dense_macs(layer, ci, co // sf, gi) for gi in split)
        assert seq1.macs == flops_macs(seq1) == expected
        assert seq1.params == sum(co // sf * (ci // gi) * layer.kernel**2 for gi in split)
    seq2 = UnrollGroup(u, g).apply(layer)
    if u >= min(ci, co) or (ci - u) % g or (co - u) % g:
        assert isinstance(seq2, Refusal)
    else:
        assert isinstance(seq2, Layer)
        expected = dense_macs(layer, ci, u) + dense_macs(layer, ci - u, co - u, g)
        assert seq2.macs == flops_macs(seq2) == expected
    seq3 = SpatialSplit(u).apply(layer) if u > 1 else layer
    if (
        isinstance(seq3, Layer) and u > 1
    ):  # strips that tile the output compute as many MACs as before
        assert seq3.macs == flops_macs(seq3) == layer.macs and seq3.params == u * layer.params
        assert len(seq3.pieces) == u


@SETTINGS
@given(
    layers(),
    st.lists(
        st.one_of(
            st.builds(Group, factors),
            st.just(Depthwise()),
            st.builds(Bottleneck, factors),
            st.builds(SplitGroup, split_groups.filter(lambda gs: len(gs) <= 4).map(tuple)),
            st.builds(UnrollGroup, counts, counts),
            st.builds(SpatialSplit, factors),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_any_sequence_gives_a_tiled_layer_or_a_one_sentence_refusal(
    layer: Layer, steps: list[Transformation]
) -> None:
    result = apply_sequence(layer, steps)
    if isinstance(result, Refusal):
        text = str(result)
        assert "\n" not in text and text.endswith(".") and text.count(". ") == 0
        assert text.startswith(f"{result.step} does not apply to conv: ")
        assert result.step in [s.label() for s in steps]
        return
    # Layer() checked the tiling on construction; every piece is a valid catalog workload.
    assert result.history == tuple(s.label() for s in steps)
    assert result.macs == flops_macs(result)
    assert result.out_height == layer.out_height and result.out_width == layer.out_width
    assert layer.out_channels % result.out_channels == 0


def test_refusals_name_the_step_the_layer_and_the_reason() -> None:
    layer = Layer.dense("layer2.0.conv1", 64, 128, 32, 32, 3, 2)
    cases = {
        Group(3): "group(3) does not apply to layer2.0.conv1: it has 64 input channels, "
        "not divisible by 3.",
        Depthwise(): "depthwise does not apply to layer2.0.conv1: a depthwise convolution maps "
        "each channel to itself, and it maps 64 input to 128 output channels.",
        UnrollGroup(64, 2): "unroll_group(64,2) does not apply to layer2.0.conv1: unrolling 64 "
        "channels leaves none of its 64 inputs or 128 outputs to group.",
        SpatialSplit(3): "spatial_split(3) does not apply to layer2.0.conv1: its 32 rows do not "
        "cut into 3 strips.",
        SpatialSplit(32): "spatial_split(32) does not apply to layer2.0.conv1: strips of 1 rows "
        "do not start on its stride of 2.",
    }
    for step, text in cases.items():
        assert str(step.apply(layer)) == text
    split = SpatialSplit(2).apply(layer)
    assert isinstance(split, Layer)
    assert "already split into 2 convolutions" in str(Bottleneck(2).apply(split))
    assert "already transformed (spatial_split(2))" in str(SplitGroup((1, 2)).apply(split))


def test_misuse_raises_and_the_registry_builds_by_name() -> None:
    for bad in (lambda: Group(0), lambda: Bottleneck(-2), lambda: SpatialSplit(True)):
        with pytest.raises(ValueError, match="must be an integer >= 2"):
            bad()
    with pytest.raises(ValueError, match="non-empty tuple"):
        SplitGroup(())
    # Seen: spatial_split(1) and split_group(1,1) listed among a network's changes.
    for same in (lambda: Group(1), lambda: Bottleneck(1), lambda: SpatialSplit(1)):
        with pytest.raises(ValueError, match="1 would leave the layer as it is"):
            same()
    with pytest.raises(ValueError, match=r"groups \(1, 1\) would leave the layer as it is"):
        SplitGroup((1, 1))
    with pytest.raises(ValueError, match="leave the layer as it is"):
        make_transformation("spatial_split", parts=1)
    assert sorted(TRANSFORMATIONS) == [
        "bottleneck",
        "depthwise",
        "group",
        "spatial_split",
        "split_group",
        "unroll_group",
    ]
    assert make_transformation("group", groups=4) == Group(4)
    assert make_transformation("split_group", groups=(1, 2)).label() == "split_group(1,2)"
    with pytest.raises(UnknownPluginError, match="valid names: bottleneck, depthwise"):
        make_transformation("prune")
    with pytest.raises(TypeError, match="unknown argument"):
        make_transformation("group", factor=2)


def test_transformations_are_pure() -> None:
    layer = Layer.dense("conv", 8, 8, 8, 8)
    before = repr(layer)
    for step in (Group(2), Depthwise(), Bottleneck(2), SplitGroup((1, 2)), SpatialSplit(2)):
        assert isinstance(step.apply(layer), Layer)
    assert repr(layer) == before and layer.is_dense and layer.history == ()
