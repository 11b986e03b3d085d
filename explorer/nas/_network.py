"""Small network descriptions: ResNets as stacks of convolution layers.

Two families, both built from the authors' ``BasicBlock`` (conv-BN-ReLU, conv-BN, plus the
shortcut, ReLU; ``pytorch/models/resnet.py`` of the NAS-PTE code):

* ``resnet_cifar(depth=18|34, width=64)``: CIFAR-size input (3x32x32, batch 1), a 3x3 stem, four
  stages of ``width, 2*width, 4*width, 8*width`` channels at 32, 16, 8 and 4 pixels, 10
  classes. ``width=64`` is the paper's ResNet-18/34; a smaller width is the same network made
  cheaper (the Fisher Potential of ResNet-18 at width 64 takes seconds on 2 cores).
* ``resnet18_imagenet()``: ImageNet-size input (3x224x224), the 7x7 stride-2 stem, a max pool,
  then four stages at 56, 28, 14 and 7 pixels: exactly the convolutions of the operator catalog's
  ``resnet18_c*`` presets (``explorer.workloads.presets()``), so a tuned preset is a tuned layer.
  Its classifier has 10 outputs (the data here has 10 classes, not ImageNet's 1000).

Transformations change the convolutions of a block's residual branch; the stem, the
shortcut projections and the classifier are left as they are, as in the authors' sampler.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from explorer._registry import Registry
from explorer.nas._layer import Conv, Layer
from explorer.nas._transforms import Refusal, Transformation, apply_sequence, narrow_inputs

if TYPE_CHECKING:
    from explorer.workloads import Workload

BlockPlan = tuple[tuple[Transformation, ...], ...]
"""The transformations of one block: a sequence per convolution of its residual branch."""


@dataclass(frozen=True, slots=True)
class Block:
    """A residual block: ``convs`` in sequence (each followed by batch norm, ReLU between them)
    plus the shortcut (a 1x1 projection when the shape changes, else the identity)."""

    name: str
    convs: tuple[Layer, ...]
    shortcut: Layer | None = None

    @property
    def out_channels(self) -> int:
        return self.convs[-1].out_channels

    def layers(self) -> list[Layer]:
        return [*self.convs, *([self.shortcut] if self.shortcut is not None else [])]

    def transform(self, plan: BlockPlan) -> Block | Refusal:
        """Apply one sequence per convolution, in order. A convolution whose producer was
        narrowed (a bottleneck) first reads the narrower input; the last convolution must keep
        its channel count, since its output is added to the shortcut."""
        if len(plan) != len(self.convs):
            raise ValueError(
                f"{self.name}: a plan needs one sequence per convolution "
                f"({len(self.convs)}), got {len(plan)}"
            )
        convs: list[Layer] = []
        narrowing = ""  # the step that narrowed the previous convolution's output, if one did
        for i, (layer, steps) in enumerate(zip(self.convs, plan, strict=True)):
            if convs and convs[-1].out_channels != layer.in_channels:
                narrowed = narrow_inputs(layer, convs[-1].out_channels, narrowing)
                if isinstance(narrowed, Refusal):
                    return narrowed
                layer = narrowed
            result = apply_sequence(layer, steps)
            if isinstance(result, Refusal):
                return result
            narrowing = next((s.label() for s in steps if s.changes_channels), "")
            if i == len(self.convs) - 1 and result.out_channels != self.out_channels:
                return Refusal(
                    narrowing,
                    layer.name,
                    f"its output is added to the block's shortcut, so it must keep its "
                    f"{self.out_channels} channels",
                )
            convs.append(result)
        return replace(self, convs=tuple(convs))


@dataclass(frozen=True, slots=True)
class Network:
    """A ResNet: a stem, residual blocks, global average pooling and a linear classifier.

    Example:
        >>> net = resnet_cifar(depth=18, width=16)
        >>> len(net.blocks), net.macs, net.params
        (8, 35046656, 701466)
    """

    name: str
    in_channels: int
    height: int
    width: int
    stem: Layer
    blocks: tuple[Block, ...]
    stem_pool: bool = False  # a 3x3 stride-2 max pool after the stem (the ImageNet ResNets)
    num_classes: int = 10

    def layers(self) -> list[Layer]:
        """Every convolution layer: the stem, then each block's convolutions and shortcut."""
        return [self.stem, *(layer for b in self.blocks for layer in b.layers())]

    @property
    def features(self) -> int:
        return self.blocks[-1].out_channels if self.blocks else self.stem.out_channels

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the convolutions and the classifier, batch 1."""
        return sum(layer.macs for layer in self.layers()) + self.features * self.num_classes

    @property
    def params(self) -> int:
        """Parameters as PyTorch counts the authors' model: convolution weights, a batch norm's
        scale and shift per layer output channel, the classifier's weights and biases."""
        convs = sum(layer.params + 2 * layer.out_channels for layer in self.layers())
        return convs + (self.features + 1) * self.num_classes

    def conv_counts(self) -> dict[Conv, int]:
        """Each distinct convolution and how many times one inference runs it."""
        counts: dict[Conv, int] = {}
        for layer in self.layers():
            for conv, n in layer.conv_counts().items():
                counts[conv] = counts.get(conv, 0) + n
        return counts

    def workloads(self) -> list[Workload]:
        """The distinct catalog workloads one inference runs (what a search tunes)."""
        return [conv.workload() for conv in self.conv_counts()]

    def transform(self, plans: Sequence[BlockPlan | None]) -> Network | Refusal:
        """The network with each block's plan applied (``None`` or ``()`` keeps a block).

        Example:
            >>> from explorer.nas import Group
            >>> net = resnet_cifar(depth=18, width=16)
            >>> grouped = net.transform([((Group(4),), (Group(4),))] + [None] * 7)
            >>> grouped.blocks[0].convs[0].history, net.macs > grouped.macs
            (('group(4)',), True)
        """
        if len(plans) != len(self.blocks):
            raise ValueError(
                f"{self.name}: one plan per block ({len(self.blocks)}), got {len(plans)}"
            )
        blocks = []
        for block, plan in zip(self.blocks, plans, strict=True):
            if not plan:
                blocks.append(block)
                continue
            result = block.transform(plan)
            if isinstance(result, Refusal):
                return result
            blocks.append(result)
        return replace(self, blocks=tuple(blocks))

    def summary(self) -> str:
        """The network's name and what changed, block by block (each block's convolutions'
        steps, once when they share them): ``resnet18_cifar(width=8): layer1.0 group(4)``."""
        return f"{self.name}: {self.changes()}"

    def changes(self) -> str:
        """What the transformations changed, block by block, or ``original``."""
        parts = []
        for block in self.blocks:
            steps = dict.fromkeys(" > ".join(c.history) for c in block.convs if c.history)
            if steps:
                parts.append(f"{block.name} {' / '.join(steps)}")
        return "; ".join(parts) or "original"


# -- builders -----------------------------------------------------------------------------------
_STAGES = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3)}
MAX_WIDTH = 512
"""A CIFAR ResNet's first-stage channels at most: 8 times the paper's 64 (its last stage then
has 4096 channels, 150 M weights in each of its convolutions)."""


def _stages(
    depth: int, width: int, size: int, channels: int, prefix: str = "layer"
) -> tuple[Block, ...]:
    if depth not in _STAGES:
        raise ValueError(f"ResNet depth must be one of {sorted(_STAGES)} (got {depth})")
    blocks = []
    for stage, count in enumerate(_STAGES[depth], start=1):
        planes = width * 2 ** (stage - 1)
        for i in range(count):
            stride = 2 if stage > 1 and i == 0 else 1
            name = f"{prefix}{stage}.{i}"
            conv1 = Layer.dense(f"{name}.conv1", channels, planes, size, size, 3, stride)
            out = conv1.out_height
            conv2 = Layer.dense(f"{name}.conv2", planes, planes, out, out, 3, 1)
            shortcut = None
            if stride != 1 or channels != planes:
                shortcut = Layer.dense(f"{name}.shortcut", channels, planes, size, size, 1, stride)
            blocks.append(Block(name, (conv1, conv2), shortcut))
            channels, size = planes, out
    return tuple(blocks)


def resnet_cifar(depth: int = 18, width: int = 64) -> Network:
    """ResNet-18 or -34 at CIFAR size (3x32x32, batch 1, 10 classes), stage widths
    ``width * (1, 2, 4, 8)``."""
    if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= MAX_WIDTH:
        raise ValueError(f"width must be an integer from 1 to {MAX_WIDTH} (got {width!r})")
    stem = Layer.dense("stem", 3, width, 32, 32, 3, 1)
    return Network(
        f"resnet{depth}_cifar(width={width})", 3, 32, 32, stem, _stages(depth, width, 32, width)
    )


def resnet18_imagenet() -> Network:
    """ResNet-18 at ImageNet size (3x224x224, batch 1): the catalog's ``resnet18_c*`` layers."""
    stem = Layer.dense("stem", 3, 64, 224, 224, 7, 2)
    return Network("resnet18_imagenet", 3, 224, 224, stem, _stages(18, 64, 56, 64), stem_pool=True)


NETWORKS: Registry[Callable[..., Network], Network] = Registry(
    "network",
    Network,
    {
        "resnet18_cifar": functools.partial(resnet_cifar, depth=18),
        "resnet34_cifar": functools.partial(resnet_cifar, depth=34),
        "resnet18_imagenet": resnet18_imagenet,
    },
)
"""Every network by name (``get_network("resnet18_cifar", width=16)``)."""


def get_network(name_or_network: str | Network, **kwargs: int) -> Network:
    """A network from its registry name and parameters, or the network given.

    Raises:
        UnknownPluginError: the name is not in ``NETWORKS``.
        TypeError: a parameter the network does not take.
    """
    return NETWORKS.make(name_or_network, **kwargs)
