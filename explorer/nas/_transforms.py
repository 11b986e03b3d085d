"""Neural architecture transformations of a convolution layer (Turner, Crowley, O'Boyle,
"Neural Architecture Search as Program Transformation Exploration", ASPLOS 2021).

Each transformation is a pure function ``Layer -> Layer | Refusal``. In loop-nest terms (the
paper's view): ``group(G)`` makes the input-channel range of the reduction depend on the
output-channel block; ``depthwise`` is ``group`` with G = channels; ``bottleneck(B)`` shrinks the
output-channel loop's domain by B (the block's next convolution then reads B times fewer input
channels). The composite sequences are the authors' ``Seq1``-``Seq3`` (``pytorch/models/convs.py``,
"sequences in section 7.3 of the paper"):

* ``split_group(g_1, ..., g_sf)`` (Seq1, split + group): sf convolutions each make
  ``C_out / sf`` output channels from *all* input channels with their own group count g_i;
  the outputs are concatenated on channels.
* ``unroll_group(u, g)`` (Seq2, "unroll" + group): a dense convolution makes the first u output
  channels from all inputs; a convolution with g groups makes the other ``C_out - u`` from the
  input channels after the first u.
* ``spatial_split(sf)`` (Seq3): the input's rows are cut into sf strips, each convolved with its
  own weights and zero-padded on its own (no halo), the outputs concatenated on rows.

A transformation that does not fit a layer (channels not divisible by G, a strip smaller than
the kernel) is a ``Refusal`` with the reason in one sentence: data, like a failed measurement.
A transformation built with impossible parameters (``Group(0)``) is misuse: ``ValueError``.
Whether a transformed *network* is legal is a separate question, answered by its Fisher
Potential (``explorer.nas.fisher_potential``).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import ClassVar

from explorer._registry import Registry
from explorer.nas._layer import Layer, Piece
from explorer.workloads import out_size


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a transformation does not apply: ``str()`` is one sentence naming the step, the
    layer and the reason."""

    step: str
    layer: str
    reason: str

    def __str__(self) -> str:
        return f"{self.step} does not apply to {self.layer}: {self.reason}."


class Transformation(abc.ABC):
    """A pure rewrite of a convolution layer.

    Contract: ``apply`` never mutates its argument and never raises for a layer it does not fit;
    it returns a ``Refusal`` saying why. The returned layer computes the same output shape, except
    for ``Bottleneck``, which narrows the output channels (``changes_channels``).
    """

    name: ClassVar[str]
    changes_channels: ClassVar[bool] = False

    @abc.abstractmethod
    def label(self) -> str:
        """The step as written in a layer's history: ``group(4)``."""

    @abc.abstractmethod
    def apply(self, layer: Layer) -> Layer | Refusal:
        """The transformed layer, or why this transformation does not fit it."""

    def __str__(self) -> str:
        return self.label()


def _positive(owner: str, name: str, value: int, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        nothing = "; 1 would leave the layer as it is" if value == 1 and minimum == 2 else ""
        raise ValueError(
            f"{owner}: {name} must be an integer >= {minimum} (got {value!r}){nothing}"
        )


def _needs_dense(step: Transformation, layer: Layer) -> Refusal | None:
    if layer.is_dense:
        return None
    return Refusal(
        step.label(),
        layer.name,
        f"it is already transformed ({' > '.join(layer.history)}) and {step.name} rewrites "
        "one ungrouped convolution",
    )


def _channels(count: int, kind: str, many: bool) -> str:
    return f"{'a convolution' if many else 'it'} has {count} {kind} channels"


@dataclass(frozen=True, slots=True)
class Group(Transformation):
    """Split every convolution's channels into ``groups`` independent groups (MACs and weights
    divided by ``groups``)."""

    name: ClassVar[str] = "group"
    groups: int = 2

    def __post_init__(self) -> None:
        _positive("Group", "groups", self.groups, minimum=2)

    def label(self) -> str:
        return f"group({self.groups})"

    def apply(self, layer: Layer) -> Layer | Refusal:
        G = self.groups
        pieces = []
        many = len(layer.pieces) > 1
        for p in layer.pieces:
            c = p.conv
            for total, kind in ((c.in_channels, "input"), (c.out_channels, "output")):
                per_group = total // c.groups
                if per_group % G:
                    per = " per group" if c.groups > 1 else ""
                    return Refusal(
                        self.label(),
                        layer.name,
                        f"{_channels(per_group, kind, many)}{per}, not divisible by {G}",
                    )
            pieces.append(replace(p, conv=replace(c, groups=c.groups * G)))
        return layer.derive(tuple(pieces), self.label())


@dataclass(frozen=True, slots=True)
class Depthwise(Transformation):
    """Group with one channel per group: each output channel is its input channel filtered."""

    name: ClassVar[str] = "depthwise"

    def label(self) -> str:
        return "depthwise"

    def apply(self, layer: Layer) -> Layer | Refusal:
        pieces = []
        for p in layer.pieces:
            c = p.conv
            if c.in_channels != c.out_channels:
                return Refusal(
                    self.label(),
                    layer.name,
                    f"a depthwise convolution maps each channel to itself, and "
                    f"{'a convolution' if len(layer.pieces) > 1 else 'it'} maps "
                    f"{c.in_channels} input to {c.out_channels} output channels",
                )
            pieces.append(replace(p, conv=replace(c, groups=c.in_channels)))
        return layer.derive(tuple(pieces), self.label())


@dataclass(frozen=True, slots=True)
class Bottleneck(Transformation):
    """Shrink the output-channel loop by ``factor``: the layer makes ``C_out / factor``
    channels. Inside a residual block this narrows the block's inner width (the next
    convolution reads the narrower output: ``narrow_inputs``); the block's last convolution
    cannot be narrowed, its output is added to the shortcut."""

    name: ClassVar[str] = "bottleneck"
    changes_channels: ClassVar[bool] = True
    factor: int = 2

    def __post_init__(self) -> None:
        _positive("Bottleneck", "factor", self.factor, minimum=2)

    def label(self) -> str:
        return f"bottleneck({self.factor})"

    def apply(self, layer: Layer) -> Layer | Refusal:
        B = self.factor
        if len(layer.pieces) > 1:
            return Refusal(
                self.label(),
                layer.name,
                f"it is already split into {len(layer.pieces)} convolutions "
                "(narrow a layer before splitting it)",
            )
        (p,) = layer.pieces
        c = p.conv
        if c.out_channels % B:
            return Refusal(
                self.label(),
                layer.name,
                f"its {c.out_channels} output channels are not divisible by {B}",
            )
        narrow = c.out_channels // B
        if narrow % c.groups:
            return Refusal(
                self.label(),
                layer.name,
                f"{narrow} output channels would not split into its {c.groups} groups",
            )
        conv = replace(c, out_channels=narrow)
        return layer.derive((replace(p, conv=conv),), self.label(), out_channels=narrow)


def narrow_inputs(layer: Layer, in_channels: int, because: str) -> Layer | Refusal:
    """``layer`` reading ``in_channels`` input channels: the other half of a bottleneck (the
    input-channel loop of the consumer shrinks with the producer's output loop)."""
    if not layer.is_dense:
        return Refusal(
            because, layer.name, "its inputs can only be narrowed before it is transformed"
        )
    (p,) = layer.pieces
    conv = replace(p.conv, in_channels=in_channels)
    step = f"inputs {layer.in_channels}->{in_channels}"
    return layer.derive((replace(p, conv=conv),), step, in_channels=in_channels)


@dataclass(frozen=True, slots=True)
class SplitGroup(Transformation):
    """The authors' Seq1 (split + group): ``len(groups)`` convolutions, the i-th making
    ``C_out / len(groups)`` channels from all inputs in ``groups[i]`` groups."""

    name: ClassVar[str] = "split_group"
    groups: tuple[int, ...] = (1, 2)

    def __post_init__(self) -> None:
        if not isinstance(self.groups, tuple) or not self.groups:
            raise ValueError(f"SplitGroup: groups must be a non-empty tuple (got {self.groups!r})")
        for g in self.groups:
            _positive("SplitGroup", "every group count", g)
        if set(self.groups) == {1}:
            raise ValueError(
                f"SplitGroup: groups {self.groups} would leave the layer as it is (dense slices "
                "of a convolution are the convolution): one count must be above 1"
            )

    def label(self) -> str:
        return f"split_group({','.join(map(str, self.groups))})"

    def apply(self, layer: Layer) -> Layer | Refusal:
        refusal = _needs_dense(self, layer)
        if refusal is not None:
            return refusal
        sf = len(self.groups)
        CI, CO = layer.in_channels, layer.out_channels
        if CO % sf:
            return Refusal(
                self.label(), layer.name, f"its {CO} output channels do not split into {sf}"
            )
        part = CO // sf
        (base,) = layer.pieces
        pieces = []
        for i, g in enumerate(self.groups):
            if CI % g or part % g:
                return Refusal(
                    self.label(),
                    layer.name,
                    f"split {i} ({CI} inputs to {part} outputs) does not divide into {g} groups",
                )
            conv = replace(base.conv, out_channels=part, groups=g)
            pieces.append(Piece(conv, in_start=0, out_start=i * part))
        return layer.derive(tuple(pieces), self.label())


@dataclass(frozen=True, slots=True)
class UnrollGroup(Transformation):
    """The authors' Seq2 ("unroll" + group): a dense convolution makes the first ``unroll``
    output channels from every input; one with ``groups`` groups maps the input channels after
    the first ``unroll`` to the remaining outputs."""

    name: ClassVar[str] = "unroll_group"
    unroll: int = 1
    groups: int = 2

    def __post_init__(self) -> None:
        _positive("UnrollGroup", "unroll", self.unroll)
        _positive("UnrollGroup", "groups", self.groups)

    def label(self) -> str:
        return f"unroll_group({self.unroll},{self.groups})"

    def apply(self, layer: Layer) -> Layer | Refusal:
        refusal = _needs_dense(self, layer)
        if refusal is not None:
            return refusal
        u, g = self.unroll, self.groups
        CI, CO = layer.in_channels, layer.out_channels
        if u >= min(CI, CO):
            return Refusal(
                self.label(),
                layer.name,
                f"unrolling {u} channels leaves none of its {CI} inputs or {CO} outputs to group",
            )
        if (CI - u) % g or (CO - u) % g:
            return Refusal(
                self.label(),
                layer.name,
                f"the remaining {CI - u} inputs and {CO - u} outputs do not split into {g} groups",
            )
        (base,) = layer.pieces
        unrolled = Piece(replace(base.conv, out_channels=u))
        grouped = Piece(
            replace(base.conv, in_channels=CI - u, out_channels=CO - u, groups=g),
            in_start=u,
            out_start=u,
        )
        return layer.derive((unrolled, grouped), self.label())


@dataclass(frozen=True, slots=True)
class SpatialSplit(Transformation):
    """The authors' Seq3: every convolution's input rows cut into ``parts`` strips, each with
    its own weights and its own zero padding (no halo exchange: the rows next to a cut see
    zeros, so the layer computes something new, not the same convolution tiled)."""

    name: ClassVar[str] = "spatial_split"
    parts: int = 2

    def __post_init__(self) -> None:
        _positive("SpatialSplit", "parts", self.parts, minimum=2)

    def label(self) -> str:
        return f"spatial_split({self.parts})"

    def apply(self, layer: Layer) -> Layer | Refusal:
        sf = self.parts
        pieces: list[Piece] = []
        for p in layer.pieces:
            c = p.conv
            rows = f"{c.height} rows"
            if c.height % sf:
                return Refusal(self.label(), layer.name, f"its {rows} do not cut into {sf} strips")
            strip = c.height // sf
            if strip % c.stride:
                return Refusal(
                    self.label(),
                    layer.name,
                    f"strips of {strip} rows do not start on its stride of {c.stride}",
                )
            strip_out = out_size(strip, c.kernel, c.stride, c.padding)
            if strip_out < 1 or strip_out * sf != c.out_height:
                return Refusal(
                    self.label(),
                    layer.name,
                    f"strips of {strip} rows do not make its {c.out_height} output rows "
                    f"({c.kernel}x{c.kernel} kernel, padding {c.padding})",
                )
            conv = replace(c, height=strip)
            pieces.extend(
                replace(p, conv=conv, row_start=p.row_start + j * strip) for j in range(sf)
            )
        return layer.derive(tuple(pieces), self.label())


TRANSFORMATIONS: Registry[type[Transformation], Transformation] = Registry(
    "transformation",
    Transformation,
    {t.name: t for t in (Group, Depthwise, Bottleneck, SplitGroup, UnrollGroup, SpatialSplit)},
)
"""Every transformation by name (``make_transformation("group", groups=4)``)."""


def make_transformation(
    name_or_instance: str | Transformation, **kwargs: int | tuple[int, ...]
) -> Transformation:
    """A transformation from its registry name and parameters, or the instance given.

    Raises:
        UnknownPluginError: the name is not in ``TRANSFORMATIONS``.
        TypeError: a parameter the transformation does not take.
        ValueError: a parameter out of range (``groups=0``).
    """
    return TRANSFORMATIONS.make(name_or_instance, **kwargs)


def apply_sequence(layer: Layer, steps: Iterable[Transformation]) -> Layer | Refusal:
    """Apply ``steps`` in order; the first refusal ends the sequence and is returned.

    Example:
        >>> layer = Layer.dense("conv", 16, 16, 8, 8)
        >>> out = apply_sequence(layer, [Group(2), SpatialSplit(2)])
        >>> out.history, len(out.pieces), out.macs * 2 == layer.macs
        (('group(2)', 'spatial_split(2)'), 2, True)
        >>> print(apply_sequence(layer, [Group(3)]))
        group(3) does not apply to conv: it has 16 input channels, not divisible by 3.
    """
    for step in steps:
        result = step.apply(layer)
        if isinstance(result, Refusal):
            return result
        layer = result
    return layer


__all__ = [
    "TRANSFORMATIONS",
    "Bottleneck",
    "Depthwise",
    "Group",
    "Refusal",
    "SpatialSplit",
    "SplitGroup",
    "Transformation",
    "UnrollGroup",
    "apply_sequence",
    "make_transformation",
    "narrow_inputs",
]
