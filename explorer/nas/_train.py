"""Short training runs on the digits: is the Fisher Potential a good proxy for accuracy here?

NAS-PTE (and BlockSwap before it) relies on the Fisher Potential at initialisation ranking
architectures as their trained accuracy would. The paper measured that on CIFAR-10; here the
data are scikit-learn's digits (``explorer.nas._data``), so the issue asks to measure it again:
train the original and a few legal and illegal variants for a few epochs and compare the
ranks (``rank_correlation``).

The network trained is exactly the one the Fisher Potential scores (same forward pass, same
initialisation for a seed), trained with SGD and momentum on a fixed split of the digits
(``NUM_TEST`` held out). Batch norm has no learned scale and shift (as at initialisation) and
always normalises with the batch's own statistics, at test time too (the test digits go through
in batches of ``batch_size``): there is no running average to keep, and every network is treated
alike.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from explorer.extras import require
from explorer.nas._data import NUM_DIGITS, digits_images
from explorer.nas._fisher import _block, _block_weights, _stem, init_params
from explorer.nas._jax import jax_for
from explorer.nas._network import Network

NUM_TEST = 500
"""Digits held out for the accuracy (the same ones for every network: split under seed 0)."""


@dataclass(frozen=True, slots=True)
class Training:
    """How a network did after ``epochs`` of training: held-out accuracy and the last epoch's
    mean training loss."""

    accuracy: float
    train_loss: float
    epochs: int
    secs: float


def _split(network: Network) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    order = np.random.default_rng(0).permutation(NUM_DIGITS)
    shape = (network.in_channels, network.height, network.width)
    x_test, y_test = digits_images(*shape, order[:NUM_TEST])
    x_train, y_train = digits_images(*shape, order[NUM_TEST:])
    return x_train, y_train, x_test, y_test


def _logits(network: Network, params: Any, x: Any) -> Any:
    jnp = jax_for("training a network").numpy
    out = _stem(network, params["layers"][network.stem.name], x)
    for block in network.blocks:
        out, _ = _block(block, _block_weights(params, block), out, 0.0)
    return jnp.mean(out, axis=(2, 3)) @ params["fc_w"].T + params["fc_b"]


def train(
    network: Network,
    *,
    epochs: int = 3,
    batch_size: int = 64,
    learning_rate: float = 0.05,
    momentum: float = 0.9,
    seed: int = 0,
) -> Training:
    """Train ``network`` from its initialisation under ``seed`` (the Fisher Potential's) and
    return its accuracy on the held-out digits.

    Raises:
        MissingExtraError: JAX or scikit-learn is not installed (the ``nas`` extra).
        ValueError: ``epochs`` or ``batch_size`` out of range (misuse).
    """
    jax = jax_for("training a network")
    jnp = jax.numpy
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
        raise ValueError(f"epochs must be an integer >= 0 (got {epochs!r})")
    if not 2 <= batch_size <= NUM_TEST:
        raise ValueError(f"batch_size must be in [2, {NUM_TEST}] (got {batch_size})")
    start = time.perf_counter()
    x_train, y_train, x_test, y_test = _split(network)
    params = jax.tree_util.tree_map(jnp.asarray, init_params(network, seed))

    def loss_fn(p: Any, x: Any, y: Any) -> Any:
        log_p = jax.nn.log_softmax(_logits(network, p, x), axis=-1)
        return -jnp.mean(jnp.take_along_axis(log_p, y[:, None], axis=1))

    def sgd(p: Any, v: Any, x: Any, y: Any) -> tuple[Any, Any, Any]:
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        v = jax.tree_util.tree_map(lambda vi, g: momentum * vi + g, v, grads)
        p = jax.tree_util.tree_map(lambda pi, vi: pi - learning_rate * vi, p, v)
        return p, v, loss

    step = jax.jit(sgd)
    predict = jax.jit(lambda p, x: jnp.argmax(_logits(network, p, x), axis=-1))
    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    rng = np.random.default_rng(seed)
    # Whole batches only: one compiled shape, and no batch norm over a handful of images.
    num_batches = len(x_train) // batch_size
    train_loss = math.nan
    for _ in range(epochs):
        order = rng.permutation(len(x_train))
        losses = []
        for b in range(num_batches):
            pick = order[b * batch_size : (b + 1) * batch_size]
            params, velocity, loss = step(params, velocity, x_train[pick], y_train[pick])
            losses.append(loss)
        train_loss = float(np.mean([float(v) for v in losses]))
    correct = 0
    for b in range(0, NUM_TEST, batch_size):  # the last batch may be smaller (its own shape)
        correct += int(
            jnp.sum(predict(params, x_test[b : b + batch_size]) == y_test[b : b + batch_size])
        )
    return Training(correct / NUM_TEST, train_loss, epochs, time.perf_counter() - start)


def rank_correlation(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation of two equally long lists (ties get their mean rank).

    Example:
        >>> rank_correlation([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 20.0, 40.0])
        0.8
    """
    stats = require("scipy.stats", "a rank correlation", "nas")
    if len(xs) != len(ys) or len(xs) < 2:
        raise ValueError(f"two lists of equal length >= 2 are needed (got {len(xs)}, {len(ys)})")
    return float(round(stats.spearmanr(xs, ys).statistic, 12))
