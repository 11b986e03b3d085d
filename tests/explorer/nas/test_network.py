"""Network descriptions (issue 12): the ResNets' sizes match the authors' PyTorch models, the
ImageNet ResNet-18 is the catalog's presets, and block plans narrow and refuse as they should."""

from __future__ import annotations

import pytest

from explorer.errors import UnknownPluginError
from explorer.nas import (
    NETWORKS,
    Bottleneck,
    Depthwise,
    Group,
    Network,
    Refusal,
    SpatialSplit,
    get_network,
    resnet18_imagenet,
    resnet_cifar,
)
from explorer.workloads import Workload, get_workload, presets


def test_cifar_resnets_have_the_authors_parameter_and_mac_counts() -> None:
    # The counts PyTorch gives for the authors' ResNet18/34 (kuangliu-style CIFAR ResNets):
    # conv weights, batch-norm scale and shift, a 10-way classifier.
    r18, r34 = resnet_cifar(18, 64), resnet_cifar(34, 64)
    assert (r18.params, r34.params) == (11_173_962, 21_282_122)
    assert r18.macs == 555_422_720  # the well-known 0.56 GMACs
    assert len(r18.blocks) == 8 and len(r34.blocks) == 16
    assert [b.shortcut is not None for b in r18.blocks] == [False, False] + [True, False] * 3
    assert r18.blocks[-1].convs[-1].out_height == 4  # 32 -> 16 -> 8 -> 4


def test_the_imagenet_resnet18_is_the_catalog_s_presets() -> None:
    net = resnet18_imagenet()
    assert net.macs == 1_813_566_464 and net.stem_pool  # ~1.8 GMACs, the usual figure
    by_key = {get_workload(name).key(): name for name in presets() if name.startswith("resnet18_")}
    used = [by_key.get(w.key()) for w in net.workloads()]
    assert None not in used
    # Every distinct ResNet-18 layer but c3 (a 1x1 at 56 that ResNet-18 does not have).
    assert sorted(used) == sorted(f"resnet18_c{i}" for i in range(1, 13) if i != 3)


def test_transformed_layers_are_ordinary_workloads() -> None:
    net = resnet_cifar(18, 16)
    plan = ((Group(4),), (Group(4),))
    grouped = net.transform([plan] * 8)
    assert isinstance(grouped, Network)
    for w in grouped.workloads():
        assert Workload.from_json(w.to_json()) == w
        assert w.family == "conv2d" and w.flops() > 0
    keys = {w.key() for w in grouped.workloads()}
    assert any("groups=4" in k for k in keys)
    # The stem and the shortcut projections are not transformed.
    assert "groups" not in grouped.stem.pieces[0].conv.workload().key()
    counts = grouped.conv_counts()
    assert sum(counts.values()) == len(grouped.layers())
    assert grouped.macs < net.macs and grouped.params < net.params


def test_a_bottleneck_narrows_the_block_s_inner_width() -> None:
    net = resnet_cifar(18, 16)
    collapsed = net.transform([((Bottleneck(16),), ())] + [None] * 7)
    assert isinstance(collapsed, Network)
    conv1, conv2 = collapsed.blocks[0].convs
    assert (conv1.out_channels, conv2.in_channels, conv2.out_channels) == (1, 1, 16)
    assert conv1.history == ("bottleneck(16)",) and conv2.history == ("inputs 16->1",)
    assert collapsed.macs < net.macs
    # A bottleneck then a group on the narrowed block (BlockSwap's G*B* blocks).
    both = net.transform([((Bottleneck(2), Group(4)), (Group(4),))] + [None] * 7)
    assert isinstance(both, Network)
    assert [c.pieces[0].conv.groups for c in both.blocks[0].convs] == [4, 4]
    assert both.blocks[0].convs[1].in_channels == 8


def test_block_plans_that_do_not_fit_are_refused_in_one_sentence() -> None:
    net = resnet_cifar(18, 16)
    cases = {
        # the block's output is added to the shortcut
        ((), (Bottleneck(2),)): "bottleneck(2) does not apply to layer1.0.conv2: its output is "
        "added to the block's shortcut, so it must keep its 16 channels.",
        # conv2 would read 8 channels in 3 groups
        ((Bottleneck(2),), (Group(3),)): "group(3) does not apply to layer1.0.conv2: it has 8 "
        "input channels, not divisible by 3.",
    }
    for plan, text in cases.items():
        result = net.transform([plan] + [None] * 7)
        assert isinstance(result, Refusal) and str(result) == text
    # depthwise on the block that doubles its channels
    result = net.transform([None, None, ((Depthwise(),), (Depthwise(),))] + [None] * 5)
    assert isinstance(result, Refusal) and result.layer == "layer2.0.conv1"
    with pytest.raises(ValueError, match="one plan per block"):
        net.transform([None])
    with pytest.raises(ValueError, match="one sequence per convolution"):
        net.transform([((SpatialSplit(2),),)] + [None] * 7)


def test_networks_by_name() -> None:
    assert sorted(NETWORKS) == ["resnet18_cifar", "resnet18_imagenet", "resnet34_cifar"]
    assert get_network("resnet34_cifar", width=8) == resnet_cifar(34, 8)
    with pytest.raises(UnknownPluginError, match="valid names: resnet18_cifar"):
        get_network("vgg16")
    with pytest.raises(TypeError, match="unknown argument"):
        get_network("resnet18_imagenet", width=8)
    with pytest.raises(ValueError, match="depth must be one of"):
        resnet_cifar(50)
