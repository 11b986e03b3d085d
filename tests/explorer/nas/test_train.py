"""Short training on the digits (issue 12: is the Fisher Potential a proxy for accuracy here?)."""

from __future__ import annotations

import pytest

from explorer.nas import resnet_cifar
from explorer.nas._train import NUM_TEST, rank_correlation, train

pytest.importorskip("jax")


def test_training_learns_the_digits_and_is_deterministic() -> None:
    net = resnet_cifar(18, 2)
    untrained = train(net, epochs=0)
    assert untrained.accuracy < 0.3  # chance is 0.1
    trained = train(net, epochs=2, seed=1)
    assert trained.accuracy > 0.5 and trained.train_loss < 2.0 and trained.epochs == 2
    assert train(net, epochs=2, seed=1).accuracy == trained.accuracy
    assert (trained.accuracy * NUM_TEST).is_integer()


def test_misuse_is_refused() -> None:
    net = resnet_cifar(18, 2)
    with pytest.raises(ValueError, match="epochs must be an integer >= 0"):
        train(net, epochs=-1)
    with pytest.raises(ValueError, match="batch_size must be in"):
        train(net, batch_size=1)
    with pytest.raises(ValueError, match="equal length"):
        rank_correlation([1.0], [2.0])
    assert rank_correlation([1, 2, 3], [3, 2, 1]) == -1.0
