"""One minibatch of real images for the Fisher Potential: scikit-learn's bundled 8x8 digits.

The paper (and BlockSwap, whose Fisher Potential code it uses) scores a network on one
minibatch of CIFAR-10 training images. CIFAR-10 cannot be downloaded here at run time, so the
minibatch comes from the 1,797 handwritten digits that scikit-learn ships inside its wheel
(``sklearn.datasets.load_digits``: 8x8 pixels, 17 grey levels, 10 classes). Each digit is scaled
up by pixel repetition to the largest multiple of 8 that fits the network's input (x4 for 32x32,
x28 for 224x224), centred with zeros around it when the input is not a multiple of 8, copied
into every input channel and standardised with the data set's mean and deviation.

What that changes against CIFAR-10:

* The images are grey and blocky: the three input channels are identical and every 4x4 (at
  32x32) block of pixels is constant, so the stem sees far less colour and texture than on
  CIFAR-10. Activations deeper in the network are correspondingly less varied.
* The task is easier (a linear model reaches about 95% on digits), which is what the loss
  gradient of a randomly initialised network "sees": Fisher Potentials are not comparable in
  absolute value with the paper's, only the ratio of a candidate to its original on the same
  minibatch is used here.
* Like CIFAR-10 it has 10 classes, so the classifier and the cross-entropy are the paper's.

Whether the Fisher Potential still ranks architectures by trained accuracy on this data is an
empirical question the issue asks to measure (training a few variants), not something assumed.
"""

from __future__ import annotations

import functools

import numpy as np

from explorer.extras import require

DIGIT_SIZE = 8
NUM_DIGITS = 1797


@functools.lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    """The images in [0, 1] as (1797, 8, 8) float32, and their labels (0-9)."""
    datasets = require("sklearn.datasets", "a minibatch of digits", "nas")
    bunch = datasets.load_digits()
    images = np.asarray(bunch.images, dtype=np.float32) / 16.0
    return images, np.asarray(bunch.target, dtype=np.int32)


def digits_minibatch(
    channels: int, height: int, width: int, batch_size: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``batch_size`` digits drawn without replacement under ``seed``, shaped for a network
    input: images (N, channels, height, width) float32, standardised, and labels (N,) int32.

    Example:
        >>> x, y = digits_minibatch(3, 32, 32, batch_size=4, seed=0)
        >>> x.shape, x.dtype, y.shape
        ((4, 3, 32, 32), dtype('float32'), (4,))
    """
    if not 1 <= batch_size <= NUM_DIGITS:
        raise ValueError(f"batch_size must be in [1, {NUM_DIGITS}] (got {batch_size})")
    pick = np.random.default_rng(seed).choice(NUM_DIGITS, size=batch_size, replace=False)
    return digits_images(channels, height, width, pick)


def digits_images(
    channels: int, height: int, width: int, indices: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The digits at ``indices``, shaped for a network input (as ``digits_minibatch``)."""
    if min(channels, height, width) < 1:
        raise ValueError(
            f"an input needs channels, height and width >= 1 (got {channels}, {height}, {width})"
        )
    images, labels = _digits()
    # Standardise with the statistics of the digits themselves (the 8x8 images): pixel
    # repetition keeps the mean, and the zero border added below stays a fixed background.
    mean, std = float(images.mean()), float(images.std())
    batch = (images[indices] - mean) / std
    scale = max(1, min(height, width) // DIGIT_SIZE)
    big = np.kron(batch, np.ones((1, scale, scale), dtype=np.float32))  # pixel repetition
    # An input smaller than a digit (a tiny test network) keeps the digit's centre.
    r0, c0 = max(0, (big.shape[1] - height) // 2), max(0, (big.shape[2] - width) // 2)
    big = big[:, r0 : r0 + height, c0 : c0 + width]
    top, left = (height - big.shape[1]) // 2, (width - big.shape[2]) // 2
    out = np.full((len(batch), height, width), -mean / std, dtype=np.float32)  # background 0
    out[:, top : top + big.shape[1], left : left + big.shape[2]] = big
    x = np.repeat(out[:, None], channels, axis=1)
    return np.ascontiguousarray(x, dtype=np.float32), labels[indices]
