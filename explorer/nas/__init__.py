"""Neural architecture search as program transformation (NAS-PTE; Turner, Crowley, O'Boyle,
ASPLOS 2021).

Network-level transformations of convolution layers (group, bottleneck, depthwise and the
authors' composite sequences), whose legality is not semantic equivalence but capacity: a
transformed network is legal when its Fisher Potential at initialisation does not fall below
``tau`` times the original's. Every transformed layer is one or more ordinary catalog ``conv2d``
workloads, which the rest of the explorer measures, tunes and stores unchanged.

* ``get_network("resnet18_cifar", width=16)``, ``resnet18_imagenet()``: networks as layers.
* ``TRANSFORMATIONS`` / ``make_transformation``: ``Group``, ``Depthwise``, ``Bottleneck``,
  ``SplitGroup``, ``UnrollGroup``, ``SpatialSplit``; each ``Layer -> Layer | Refusal``.
* ``fisher_potential(network)``, ``is_legal(candidate_fp, original_fp, tau)``: needs the ``nas``
  extra (JAX and scikit-learn): ``pip install 'schedule-explorer[nas]'``. What XLA compiles is
  kept on disk for the next process (``JAX_CACHE_ENV``, ``explorer.nas._jax``).
* ``sample_candidates(network, n, rng)``: random transformation plans with their Fisher
  Potential ratio, MACs, parameters and legality.
* ``nas_search(network, samples=N, budget=T, store=..., measurer=..., target=...)``: the paper's
  search: sample, reject the illegal, tune every distinct convolution (each shape once, cached
  in the store), latency = sum of tuned convolutions, the Pareto front (``explorer nas``).
* ``network_onnx(network)``: a network (transformed or not) as an ONNX model, to build and
  run it whole (``explorer.model``) rather than sum its convolutions; needs the ``model`` extra.
* ``train(network, epochs=3)``, ``rank_correlation``: a short training on the digits, to check
  the Fisher Potential against trained accuracy (``benchmarks/bench_nas.py``).

Example:
    >>> from explorer.nas import Group, get_network
    >>> net = get_network("resnet18_cifar", width=16)
    >>> layer = net.blocks[0].convs[0]
    >>> grouped = Group(4).apply(layer)
    >>> layer.macs // grouped.macs, grouped.pieces[0].conv.workload().key()
    (4, 'conv2d(CI=16,CO=16,H=32,KH=3,KW=3,N=1,W=32,dilation=1,dtype=float32,groups=4,...)')
"""

from __future__ import annotations

from explorer.extras import MissingExtraError
from explorer.nas._data import NUM_DIGITS, digits_minibatch
from explorer.nas._fisher import (
    FisherPotential,
    fisher_potential,
    format_ratio,
    init_params,
    is_legal,
)
from explorer.nas._jax import CACHE_ENV as JAX_CACHE_ENV
from explorer.nas._layer import Conv, Layer, Piece
from explorer.nas._network import (
    NETWORKS,
    Block,
    BlockPlan,
    Network,
    get_network,
    resnet18_imagenet,
    resnet_cifar,
)
from explorer.nas._onnx import layer_onnx, network_onnx
from explorer.nas._sample import (
    KINDS,
    NasCandidate,
    NasSample,
    check_count,
    check_kinds,
    draw_plan,
    sample_candidates,
)
from explorer.nas._search import (
    ConvTuning,
    NasPoint,
    NasProgress,
    NasResult,
    find_tuning,
    nas_search,
    pareto_front,
    tuned_latency,
)
from explorer.nas._train import Training, rank_correlation, train
from explorer.nas._transforms import (
    TRANSFORMATIONS,
    Bottleneck,
    Depthwise,
    Group,
    Refusal,
    SpatialSplit,
    SplitGroup,
    Transformation,
    UnrollGroup,
    apply_sequence,
    make_transformation,
)

__all__ = [
    "JAX_CACHE_ENV",
    "KINDS",
    "NETWORKS",
    "NUM_DIGITS",
    "TRANSFORMATIONS",
    "Block",
    "BlockPlan",
    "Bottleneck",
    "Conv",
    "ConvTuning",
    "Depthwise",
    "FisherPotential",
    "Group",
    "Layer",
    "MissingExtraError",
    "NasCandidate",
    "NasPoint",
    "NasProgress",
    "NasResult",
    "NasSample",
    "Network",
    "Piece",
    "Refusal",
    "SpatialSplit",
    "SplitGroup",
    "Training",
    "Transformation",
    "UnrollGroup",
    "apply_sequence",
    "check_count",
    "check_kinds",
    "digits_minibatch",
    "draw_plan",
    "find_tuning",
    "fisher_potential",
    "format_ratio",
    "get_network",
    "init_params",
    "is_legal",
    "layer_onnx",
    "make_transformation",
    "nas_search",
    "network_onnx",
    "pareto_front",
    "rank_correlation",
    "resnet18_imagenet",
    "resnet_cifar",
    "sample_candidates",
    "train",
    "tuned_latency",
]
