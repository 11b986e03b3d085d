"""A convolution layer of a network, as one or more catalog ``conv2d`` workloads.

A dense layer is one convolution. The authors' composite transformations (NAS-PTE section 7.3)
turn it into several convolutions that each read a slice of the layer's input (a range of
channels, a strip of rows) and write a slice of its output, the slices concatenated: a
``Piece`` is one of them. Every piece is an ordinary catalog workload
(``get_workload("conv2d", ..., groups=G)`` at batch 1), so measuring, tuning and storing a
transformed layer is measuring, tuning and storing its pieces' workloads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from explorer.workloads import out_size

if TYPE_CHECKING:  # the catalog imports TVM; describing a network does not need it
    from explorer.workloads import Workload


@dataclass(frozen=True, slots=True)
class Conv:
    """One 2-D convolution at batch 1 (NCHW, square kernel, same stride and padding on both
    axes): the parameters of a catalog ``conv2d`` workload.

    Example:
        >>> c = Conv(in_channels=16, out_channels=32, height=8, width=8, groups=4)
        >>> c.macs, c.params, (c.out_height, c.out_width)
        (73728, 1152, (8, 8))
    """

    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel: int = 3
    stride: int = 1
    padding: int = 1
    groups: int = 1

    def __post_init__(self) -> None:
        for name in ("in_channels", "out_channels", "height", "width", "kernel", "stride"):
            if getattr(self, name) < 1:
                raise ValueError(f"Conv.{name} must be at least 1 (got {getattr(self, name)})")
        if self.padding < 0 or self.groups < 1:
            raise ValueError(f"Conv: padding >= 0 and groups >= 1 (got {self})")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(f"Conv: groups={self.groups} must divide both channel counts")
        if self.out_height < 1 or self.out_width < 1:
            raise ValueError(f"Conv: the kernel does not fit the padded input ({self})")

    @property
    def out_height(self) -> int:
        return out_size(self.height, self.kernel, self.stride, self.padding)

    @property
    def out_width(self) -> int:
        return out_size(self.width, self.kernel, self.stride, self.padding)

    @property
    def params(self) -> int:
        """Weights: each output channel sees its group's ``in_channels / groups`` channels."""
        return self.out_channels * (self.in_channels // self.groups) * self.kernel**2

    @property
    def macs(self) -> int:
        """Multiply-accumulates: every weight is used once per output pixel."""
        return self.params * self.out_height * self.out_width

    def workload(self) -> Workload:
        """The catalog workload that computes this convolution (``groups`` left out at 1, so a
        dense layer has the same key as the catalog's presets)."""
        from explorer.workloads import get_workload

        return get_workload(
            "conv2d",
            N=1,
            CI=self.in_channels,
            H=self.height,
            W=self.width,
            CO=self.out_channels,
            KH=self.kernel,
            KW=self.kernel,
            stride=self.stride,
            padding=self.padding,
            dilation=1,
            groups=self.groups,
        )

    def label(self) -> str:
        g = f" g{self.groups}" if self.groups > 1 else ""
        return (
            f"{self.in_channels}->{self.out_channels} {self.kernel}x{self.kernel}/{self.stride}"
            f" @{self.height}x{self.width}{g}"
        )


@dataclass(frozen=True, slots=True)
class Piece:
    """One convolution of a layer: it reads ``conv.in_channels`` input channels from
    ``in_start`` and ``conv.height`` input rows from ``row_start``, and writes
    ``conv.out_channels`` output channels from ``out_start`` over its output rows (from
    ``row_start // stride``)."""

    conv: Conv
    in_start: int = 0
    out_start: int = 0
    row_start: int = 0

    @property
    def out_row_start(self) -> int:
        return self.row_start // self.conv.stride


@dataclass(frozen=True, slots=True)
class Layer:
    """A convolution layer: what it computes shape-wise (its interface) and the pieces that
    compute it. Transformations return new layers; ``history`` names the ones applied.

    Example:
        >>> layer = Layer.dense("conv", 16, 16, 8, 8)
        >>> layer.macs, layer.params, layer.is_dense
        (147456, 2304, True)
    """

    name: str
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel: int
    stride: int
    padding: int
    pieces: tuple[Piece, ...]
    history: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_tiling(self)

    @classmethod
    def dense(
        cls,
        name: str,
        in_channels: int,
        out_channels: int,
        height: int,
        width: int,
        kernel: int = 3,
        stride: int = 1,
        padding: int | None = None,
    ) -> Layer:
        """One ordinary convolution (padding ``kernel // 2`` unless given: a "same" conv)."""
        pad = kernel // 2 if padding is None else padding
        conv = Conv(in_channels, out_channels, height, width, kernel, stride, pad)
        return cls(
            name, in_channels, out_channels, height, width, kernel, stride, pad, (Piece(conv),)
        )

    # -- shape ----------------------------------------------------------------------------------
    @property
    def out_height(self) -> int:
        return out_size(self.height, self.kernel, self.stride, self.padding)

    @property
    def out_width(self) -> int:
        return out_size(self.width, self.kernel, self.stride, self.padding)

    @property
    def is_dense(self) -> bool:
        """One ungrouped convolution over the whole input (nothing transformed its structure)."""
        return len(self.pieces) == 1 and self.pieces[0].conv.groups == 1

    # -- cost -----------------------------------------------------------------------------------
    @property
    def macs(self) -> int:
        return sum(p.conv.macs for p in self.pieces)

    @property
    def params(self) -> int:
        return sum(p.conv.params for p in self.pieces)

    def workloads(self) -> list[Workload]:
        """The catalog workloads of the pieces, each once, in piece order (split pieces of
        equal shape are one workload: tuned once, timed once per piece)."""
        seen: dict[Conv, None] = dict.fromkeys(p.conv for p in self.pieces)
        return [c.workload() for c in seen]

    def conv_counts(self) -> dict[Conv, int]:
        """How many pieces run each distinct convolution (latency = sum of count x time)."""
        counts: dict[Conv, int] = {}
        for p in self.pieces:
            counts[p.conv] = counts.get(p.conv, 0) + 1
        return counts

    # -- derivation -----------------------------------------------------------------------------
    def derive(
        self,
        pieces: tuple[Piece, ...],
        step: str,
        *,
        in_channels: int | None = None,
        out_channels: int | None = None,
    ) -> Layer:
        """This layer with new pieces (and, for a bottleneck, a new channel interface), the step
        appended to its history."""
        return replace(
            self,
            pieces=pieces,
            history=(*self.history, step),
            in_channels=self.in_channels if in_channels is None else in_channels,
            out_channels=self.out_channels if out_channels is None else out_channels,
        )

    def summary(self) -> str:
        steps = " > ".join(self.history) or "dense"
        return f"{self.name}: {steps} ({len(self.pieces)} conv{'s' * (len(self.pieces) > 1)})"


def _check_tiling(layer: Layer) -> None:
    """The pieces must write every output element exactly once and read inside the input: a
    transformation that breaks this is a bug in the transformation, not a refusal."""
    OH, OW = layer.out_height, layer.out_width
    shared = (layer.kernel, layer.stride, layer.padding, layer.width)
    boxes = []
    for p in layer.pieces:
        c = p.conv
        fits = (
            (c.kernel, c.stride, c.padding, c.width) == shared
            and 0 <= p.in_start <= layer.in_channels - c.in_channels
            and 0 <= p.row_start <= layer.height - c.height
            and p.row_start % c.stride == 0
            and 0 <= p.out_start <= layer.out_channels - c.out_channels
            and p.out_row_start + c.out_height <= OH
            and c.out_width == OW
        )
        if not fits:
            raise ValueError(f"{layer.name}: {p} does not fit the layer's interface")
        boxes.append(
            (
                p.out_start,
                p.out_start + c.out_channels,
                p.out_row_start,
                p.out_row_start + c.out_height,
            )
        )
    overlap = any(
        a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
    )
    area = sum((b[1] - b[0]) * (b[3] - b[2]) for b in boxes)
    # Bands of rows, each cut on channels only (what every transformation makes): the pieces'
    # outputs are then assembled by concatenation.
    bands = {(b[2], b[3]) for b in boxes}
    is_grid = all(a == b or a[1] <= b[0] or b[1] <= a[0] for a in bands for b in bands)
    if overlap or not is_grid or area != layer.out_channels * OH:
        raise ValueError(
            f"{layer.name}: the pieces do not tile the {layer.out_channels}x{OH} output "
            "in bands of rows"
        )
