"""The Fisher Potential of a network at initialisation, in JAX: the legality test of NAS-PTE.

From BlockSwap's code (``BayesWatch/pytorch-blockswap``, ``models/blocks.py``: ``_fisher``), which
the paper's legality rule uses: the network at random initialisation, in training mode (batch
norm uses the minibatch's statistics), scores ONE minibatch with the cross-entropy loss L. For
the activation ``a[n, c, h, w]`` at the end of every residual block's branch (what is added to
the shortcut; BlockSwap hooks the same place) and its gradient ``g = dL/da``::

    per channel  D_c = 0.5 * mean_n( sum_{h,w} a[n, c, h, w] * g[n, c, h, w] )^2
    block score  = sum_c D_c        Fisher Potential = sum over blocks of the block scores

(``gymnastics/proxies/fisher.py`` drops the 0.5; it cancels in the ratios used here.) A
transformed network is legal iff ``FP(candidate) >= tau * FP(original)``, tau = 1 by default.

The gradient with respect to an intermediate activation is taken the functional way: a zero
tensor ``e_b`` is added at each hook (``a_b + e_b``), and ``dL/de_b`` at ``e = 0`` is ``dL/da_b``.

Initialisation is PyTorch's default (the authors' models do not re-initialise): weights uniform
in +-1/sqrt(fan_in) (``kaiming_uniform_(a=sqrt(5))``), batch norm scale 1 and shift 0, classifier
bias uniform in +-1/sqrt(features). Weights are drawn by NumPy from ``seed`` in layer order, so a
seed gives the same network on every machine. The minibatch is ``digits_minibatch`` (scikit-learn's
digits; what that changes against CIFAR-10 is in ``explorer.nas._data``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from explorer.nas._data import digits_minibatch
from explorer.nas._jax import jax_for
from explorer.nas._layer import Layer
from explorer.nas._network import Block, Network

Params = dict[str, Any]
"""Weights by name: ``layers`` (layer name -> one array per piece) and the classifier's
``fc_w`` (classes, features) and ``fc_b`` (classes,)."""

BN_EPS = 1e-5  # PyTorch's BatchNorm2d default


def _jax() -> Any:
    return jax_for("the Fisher Potential")


@dataclass(frozen=True, slots=True)
class FisherPotential:
    """A network's Fisher Potential on one minibatch, and each block's share of it.

    ``loss`` is the minibatch's cross-entropy at initialisation (about ln 10 = 2.3 for an
    untrained 10-class network: a quick sanity check that the forward pass is sound). With
    ``inits`` > 1, every number is the mean over the initialisations and minibatches of seeds
    ``seed`` to ``seed + inits - 1``.
    """

    total: float
    blocks: tuple[float, ...]
    loss: float
    batch_size: int
    seed: int
    inits: int = 1

    def ratio(self, original: FisherPotential) -> float:
        """``self.total / original.total``: at least ``tau`` for a legal candidate."""
        if original.total <= 0.0:
            return math.inf if self.total > 0.0 else 1.0
        return self.total / original.total


def is_legal(candidate: FisherPotential, original: FisherPotential, tau: float = 1.0) -> bool:
    """NAS-PTE's legality rule: ``FP(candidate) >= tau * FP(original)``.

    Raises:
        ValueError: ``tau`` is negative or not finite (misuse).
    """
    return candidate.total >= check_tau(tau) * original.total


def format_ratio(ratio: float) -> str:
    """A Fisher Potential ratio with 3 decimals, cut rather than rounded, so that a candidate
    just below the line never reads as on it (0.9996 is "0.999", not "1.000").

    Example:
        >>> format_ratio(0.99996), format_ratio(1.3551), format_ratio(float("inf"))
        ('0.999', '1.355', 'inf')
    """
    if not math.isfinite(ratio):
        return str(ratio)
    return f"{math.floor(ratio * 1000) / 1000:.3f}"


def check_tau(tau: float) -> float:
    """``tau`` if it is a usable threshold, else ``ValueError`` (misuse, raised before work).

    0 is not one: every Fisher Potential is at least 0, so every network, however little
    capacity it kept, would be legal without a word.
    """
    if (
        isinstance(tau, bool)
        or not isinstance(tau, (int, float))
        or not math.isfinite(tau)
        or tau <= 0
    ):
        raise ValueError(
            f"tau must be a finite number above 0 (got {tau!r}); at 0 every candidate is legal "
            "whatever its Fisher Potential"
        )
    return float(tau)


DTYPES = ("float32", "float64")
"""What the Fisher Potential computes in (float64 in JAX's 64-bit mode, switched on for it)."""


def check_seed(name: str, seed: object) -> None:
    """``ValueError`` naming ``name`` unless ``seed`` is a whole number >= 0 (misuse)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"{name} must be an integer >= 0 (got {seed!r})")


def _check_dtype(dtype: object) -> str:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (got {dtype!r})")
    return str(dtype)


# -- the network as a JAX function ----------------------------------------------------------------
def init_params(network: Network, seed: int = 0, dtype: str = "float32") -> Params:
    """The network's weights at initialisation (NumPy arrays; ``seed`` fixes every value).

    Raises:
        ValueError: ``seed`` is not an integer >= 0, or ``dtype`` not one of ``DTYPES``.
    """
    check_seed("seed", seed)
    dtype = _check_dtype(dtype)
    rng = np.random.default_rng(seed)
    layers: dict[str, list[np.ndarray]] = {}
    for layer in network.layers():
        weights = []
        for p in layer.pieces:
            c = p.conv
            fan_in = c.in_channels // c.groups * c.kernel**2
            bound = 1.0 / math.sqrt(fan_in)
            shape = (c.out_channels, c.in_channels // c.groups, c.kernel, c.kernel)
            weights.append(rng.uniform(-bound, bound, shape).astype(dtype))
        layers[layer.name] = weights
    bound = 1.0 / math.sqrt(network.features)
    fc_w = rng.uniform(-bound, bound, (network.num_classes, network.features)).astype(dtype)
    fc_b = rng.uniform(-bound, bound, (network.num_classes,)).astype(dtype)
    return {"layers": layers, "fc_w": fc_w, "fc_b": fc_b}


def _conv_layer(layer: Layer, weights: Sequence[Any], x: Any) -> Any:
    """The layer's pieces on their slices of ``x``, written into their slices of the output."""
    jax = _jax()
    jnp, lax = jax.numpy, jax.lax
    pad = [(layer.padding, layer.padding)] * 2
    stride = (layer.stride, layer.stride)

    def conv(piece_x: Any, w: Any, groups: int) -> Any:
        return lax.conv_general_dilated(
            piece_x,
            w,
            stride,
            pad,
            dimension_numbers=("NCHW", "OIHW", "NCHW"),
            feature_group_count=groups,
        )

    outs = {}
    for p, w in zip(layer.pieces, weights, strict=True):
        c = p.conv
        part = x[:, p.in_start : p.in_start + c.in_channels, p.row_start : p.row_start + c.height]
        outs[p.out_row_start, p.out_start] = conv(part, w, c.groups)
    if len(outs) == 1:
        return next(iter(outs.values()))
    # The pieces tile the output in bands of rows, each band split on channels (every
    # transformation here keeps that grid): concatenations, cheaper than scattered writes.
    bands: dict[int, list[tuple[int, Any]]] = {}
    for (row, channel), y in sorted(outs.items(), key=lambda item: item[0]):
        bands.setdefault(row, []).append((channel, y))
    rows = [jnp.concatenate([y for _, y in band], axis=1) for band in bands.values()]
    return jnp.concatenate(rows, axis=2)


def _batch_norm(x: Any) -> Any:
    """Training-mode batch norm at initialisation (scale 1, shift 0): the minibatch's per-channel
    mean and biased variance, as PyTorch normalises in ``train()``."""
    jnp = _jax().numpy
    mean = jnp.mean(x, axis=(0, 2, 3), keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=(0, 2, 3), keepdims=True)
    return (x - mean) / jnp.sqrt(var + BN_EPS)


def _stem(network: Network, weights: Sequence[Any], x: Any) -> Any:
    jax = _jax()
    jnp, lax = jax.numpy, jax.lax
    out = jax.nn.relu(_batch_norm(_conv_layer(network.stem, weights, x)))
    if network.stem_pool:  # ImageNet ResNets: 3x3 max pool, stride 2, padding 1
        out = lax.reduce_window(
            out, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), [(0, 0), (0, 0), (1, 1), (1, 1)]
        )
    return out


def _block(block: Block, weights: Sequence[Sequence[Any]], x: Any, hook: Any) -> tuple[Any, Any]:
    """The block's output and its branch output plus ``hook`` (the Fisher activation).
    ``weights`` holds each convolution's piece weights, then the shortcut's."""
    relu = _jax().nn.relu
    branch = x
    for i, layer in enumerate(block.convs):
        branch = _batch_norm(_conv_layer(layer, weights[i], branch))
        if i < len(block.convs) - 1:
            branch = relu(branch)
    act = branch + hook
    shortcut = x
    if block.shortcut is not None:
        shortcut = _batch_norm(_conv_layer(block.shortcut, weights[len(block.convs)], x))
    return relu(act + shortcut), act


def _head(fc_w: Any, fc_b: Any, x: Any, labels: Any) -> Any:
    """Global average pooling, the classifier and the mean cross-entropy."""
    jax = _jax()
    jnp = jax.numpy
    logits = jnp.mean(x, axis=(2, 3)) @ fc_w.T + fc_b
    log_p = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(log_p, labels[:, None], axis=1))


def _block_weights(params: Params, block: Block) -> list[Any]:
    return [params["layers"][layer.name] for layer in block.layers()]


def loss_and_activations(
    network: Network, params: Params, x: Any, labels: Any, hooks: Sequence[Any]
) -> tuple[Any, list[Any]]:
    """The minibatch's mean cross-entropy and every block's branch output, as one function.

    ``hooks`` holds one array per block, shaped like its branch output, added to it (zeros for
    the real network; the gradient with respect to them is the gradient with respect to the
    activations, and a finite difference on them checks it). ``fisher_potential`` computes the
    same gradients block by block (``_chained_gradients``).
    """
    out = _stem(network, params["layers"][network.stem.name], x)
    acts = []
    for block, hook in zip(network.blocks, hooks, strict=True):
        out, act = _block(block, _block_weights(params, block), out, hook)
        acts.append(act)
    return _head(params["fc_w"], params["fc_b"], out, labels), acts


def hook_shapes(network: Network, batch_size: int) -> list[tuple[int, int, int, int]]:
    """The shape of each block's branch output (what ``hooks`` must hold)."""
    shapes = []
    for b in network.blocks:
        last = b.convs[-1]
        shapes.append((batch_size, last.out_channels, last.out_height, last.out_width))
    return shapes


def fisher_scores(acts: Sequence[Any], grads: Sequence[Any]) -> list[float]:
    """Each block's score: ``sum_c 0.5 * mean_n(sum_hw a * g)^2`` (computed in float64)."""
    scores = []
    for a, g in zip(acts, grads, strict=True):
        per_sample = np.sum(np.asarray(a, np.float64) * np.asarray(g, np.float64), axis=(2, 3))
        scores.append(float(np.sum(0.5 * np.mean(per_sample**2, axis=0))))
    return scores


# -- compiled pieces, shared between candidates ---------------------------------------------------
# XLA compiles a whole ResNet-18's forward and backward pass in 1.2-2 s on 2 cores, ten times its
# run time at width 16, and every candidate is a new network. So the backward pass is compiled per
# block instead (a block's structure without its names is the key): the blocks a candidate did not
# change, and every block variant an earlier candidate had, are compiled already, and a sample's
# later candidates mostly run (measured on ResNet-18 width 16, batch 64: the first network 5 s,
# the next 25 about 2.7 s each, the last ten of them 1.8 s). The forward pass runs op by op
# (JAX caches each operation's compilation by shape, and shapes recur between candidates); each
# block's forward pass runs again inside its compiled backward pass.
def _anonymous(layer: Layer, name: str) -> Layer:
    return replace(layer, name=name, history=())


def _structure(block: Block) -> Block:
    convs = tuple(_anonymous(c, f"conv{i}") for i, c in enumerate(block.convs))
    shortcut = None if block.shortcut is None else _anonymous(block.shortcut, "shortcut")
    return Block("", convs, shortcut)


@functools.lru_cache(maxsize=512)
def _block_steps(block: Block) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``forward(weights, x, hook) -> (out, act)`` (op by op) and ``backward(weights, x, hook,
    d_out) -> (d_x, d_hook)`` (compiled)."""
    jax = _jax()

    def backward(weights: Any, x: Any, hook: Any, d_out: Any) -> Any:
        _, vjp = jax.vjp(lambda x_, h_: _block(block, weights, x_, h_)[0], x, hook)
        return vjp(d_out)

    return functools.partial(_block, block), jax.jit(backward)


@functools.lru_cache(maxsize=64)
def _stem_step(network: Network) -> Callable[..., Any]:
    return _jax().jit(functools.partial(_stem, network))  # type: ignore[no-any-return]  # jax.jit is untyped here


@functools.lru_cache(maxsize=1)
def _head_step() -> Callable[..., Any]:
    jax = _jax()
    return jax.jit(jax.value_and_grad(_head, argnums=2))  # type: ignore[no-any-return]  # jax.jit is untyped here


def _chained_gradients(
    network: Network, params: Params, x: Any, labels: Any, dtype: str
) -> tuple[float, list[Any], list[Any]]:
    """Loss, block activations and ``dL/da`` per block: forward block by block, then back."""
    jnp = _jax().numpy
    bare = replace(network, name="", stem=_anonymous(network.stem, "stem"), blocks=())
    out = _stem_step(bare)(params["layers"][network.stem.name], x)
    inputs, acts, hooks = [], [], []
    for block, shape in zip(network.blocks, hook_shapes(network, x.shape[0]), strict=True):
        forward, _ = _block_steps(_structure(block))
        hooks.append(jnp.zeros(shape, dtype))
        inputs.append(out)
        out, act = forward(_block_weights(params, block), out, hooks[-1])
        acts.append(act)
    loss, d_out = _head_step()(params["fc_w"], params["fc_b"], out, labels)
    grads: list[Any] = [None] * len(network.blocks)
    for i in reversed(range(len(network.blocks))):
        block = network.blocks[i]
        _, backward = _block_steps(_structure(block))
        d_out, grads[i] = backward(_block_weights(params, block), inputs[i], hooks[i], d_out)
    return float(loss), acts, grads


def fisher_potential(
    network: Network,
    *,
    batch_size: int = 64,
    seed: int = 0,
    dtype: str = "float32",
    inits: int = 1,
) -> FisherPotential:
    """The Fisher Potential of ``network`` at the initialisation ``seed`` on the minibatch of
    ``batch_size`` digits drawn under ``seed``: deterministic for a fixed seed.

    The paper scores one initialisation on one minibatch, and so does ``inits=1``. On small
    networks that one draw decides a lot (a grouped block scored 0.68 of the original under one
    seed and 1.32 under the next): ``inits=k`` averages k initialisations and minibatches
    (seeds ``seed`` to ``seed + k - 1``), at k times the cost.

    ``dtype="float64"`` computes in float64: JAX's 64-bit mode is switched on for it (JAX
    alone would compute float32 and only warn).

    Raises:
        MissingExtraError: JAX or scikit-learn is not installed (the ``nas`` extra).
        ValueError: ``inits`` < 1, ``seed`` < 0 or ``dtype`` not one of ``DTYPES`` (misuse).
    """
    if isinstance(inits, bool) or not isinstance(inits, int) or inits < 1:
        raise ValueError(f"inits must be an integer >= 1 (got {inits!r})")
    check_seed("seed", seed)
    dtype = _check_dtype(dtype)
    with _jax().enable_x64(dtype == "float64"):
        draws = [_one_draw(network, batch_size, seed + i, dtype) for i in range(inits)]
    blocks = tuple(float(np.mean(b)) for b in zip(*(d[1] for d in draws), strict=True))
    return FisherPotential(
        float(np.mean([d[0] for d in draws])),
        blocks,
        float(np.mean([d[2] for d in draws])),
        batch_size,
        seed,
        inits,
    )


def _one_draw(
    network: Network, batch_size: int, seed: int, dtype: str
) -> tuple[float, list[float], float]:
    """Total, block scores and loss of one initialisation on one minibatch."""
    jax = _jax()
    jnp = jax.numpy
    # Step 1. The same minibatch for every network of a given input size and seed.
    x, labels = digits_minibatch(
        network.in_channels, network.height, network.width, batch_size, seed
    )
    # Step 2. Weights at initialisation.
    params = jax.tree_util.tree_map(jnp.asarray, init_params(network, seed, dtype))
    # Step 3. One forward and backward pass; the hooks' gradients are dL/da.
    loss, acts, grads = _chained_gradients(
        network, params, jnp.asarray(x, dtype), jnp.asarray(labels), dtype
    )
    scores = fisher_scores(acts, grads)
    return float(sum(scores)), scores, loss
