"""The Fisher Potential (issue 12): its gradients against finite differences on a tiny network,
determinism under a seed, the legality rule, the minibatch, and the core without JAX."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from explorer.nas import (
    Block,
    Bottleneck,
    FisherPotential,
    Layer,
    Network,
    SpatialSplit,
    SplitGroup,
    UnrollGroup,
    _fisher,
    digits_minibatch,
    fisher_potential,
    init_params,
    is_legal,
    resnet_cifar,
)

jax = pytest.importorskip("jax")
jnp = jax.numpy


def tiny_network() -> Network:
    """Two blocks on a 1x6x6 input, every kind of piece layout in them: split channels
    (split_group), an unrolled channel (unroll_group), a bottleneck and spatial strips."""
    stem = Layer.dense("stem", 1, 4, 6, 6)
    b1 = Block("b1", (Layer.dense("b1.conv1", 4, 4, 6, 6), Layer.dense("b1.conv2", 4, 4, 6, 6)))
    b2 = Block(
        "b2",
        (Layer.dense("b2.conv1", 4, 4, 6, 6, 3, 2), Layer.dense("b2.conv2", 4, 4, 3, 3)),
        Layer.dense("b2.shortcut", 4, 4, 6, 6, 1, 2),
    )
    net = Network("tiny", 1, 6, 6, stem, (b1, b2))
    # (split_group(1,1) would change nothing; four channels let a real split group them)
    plans = [((SplitGroup((1, 2)),), (UnrollGroup(1, 1),)), ((Bottleneck(2),), (SpatialSplit(3),))]
    transformed = net.transform(plans)
    assert isinstance(transformed, Network)
    return transformed


def test_the_gradient_part_matches_finite_differences_on_a_tiny_network() -> None:
    net = tiny_network()
    batch, seed = 4, 3
    with jax.enable_x64(True):
        fp = fisher_potential(net, batch_size=batch, seed=seed, dtype="float64")
        x, labels = digits_minibatch(1, 6, 6, batch, seed)
        params = jax.tree_util.tree_map(jnp.asarray, init_params(net, seed, "float64"))
        xs, ys = jnp.asarray(x, "float64"), jnp.asarray(labels)
        zeros = [np.zeros(s) for s in _fisher.hook_shapes(net, batch)]

        # The whole network as one function of the hooks (no block-by-block chaining).
        @jax.jit
        def loss(hooks):
            return _fisher.loss_and_activations(net, params, xs, ys, hooks)[0]

        loss0, acts = _fisher.loss_and_activations(net, params, xs, ys, zeros)
        eps = 1e-6
        numeric = []
        for b, shape in enumerate(_fisher.hook_shapes(net, batch)):
            grad = np.zeros(shape)
            for idx in np.ndindex(shape):
                plus = [z.copy() for z in zeros]
                minus = [z.copy() for z in zeros]
                plus[b][idx] += eps
                minus[b][idx] -= eps
                grad[idx] = (float(loss(plus)) - float(loss(minus))) / (2 * eps)
            numeric.append(grad)
        _, _, chained = _fisher._chained_gradients(net, params, xs, ys, "float64")
    assert sum(g.size for g in numeric) == 4 * (4 * 36 + 4 * 9)
    for got, want in zip(chained, numeric, strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-9)
    # The Fisher Potential from the finite-difference gradients is the one computed.
    from_numeric = _fisher.fisher_scores(acts, numeric)
    np.testing.assert_allclose(fp.blocks, from_numeric, rtol=1e-6)
    assert fp.total == pytest.approx(sum(from_numeric), rel=1e-6) and fp.total > 0
    assert fp.loss == pytest.approx(float(loss0))


def test_block_by_block_gradients_equal_the_whole_network_s() -> None:
    net = resnet_cifar(18, 4)
    x, labels = digits_minibatch(3, 32, 32, 8, 0)
    params = jax.tree_util.tree_map(jnp.asarray, init_params(net, 0))
    xs, ys = jnp.asarray(x), jnp.asarray(labels)
    hooks = [jnp.zeros(s) for s in _fisher.hook_shapes(net, 8)]
    (loss, acts), grads = jax.value_and_grad(
        lambda h: _fisher.loss_and_activations(net, params, xs, ys, h), has_aux=True
    )(hooks)
    chained_loss, chained_acts, chained = _fisher._chained_gradients(
        net, params, xs, ys, "float32"
    )
    assert chained_loss == pytest.approx(float(loss), rel=1e-5)
    for a, b in zip(chained, grads, strict=True):
        # float32 sums in another order (XLA fuses each block on its own): tiny entries differ
        # by a few percent of themselves, never by more than 1e-4 of the block's largest.
        scale = float(np.abs(np.asarray(b)).max())
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-4 * scale)
    whole = sum(_fisher.fisher_scores(acts, grads))
    assert fisher_potential(net, batch_size=8).total == pytest.approx(whole, rel=1e-3)


def test_deterministic_for_a_fixed_seed() -> None:
    net = resnet_cifar(18, 4)
    a = fisher_potential(net, batch_size=16, seed=0)
    b = fisher_potential(net, batch_size=16, seed=0)
    assert a == b and len(a.blocks) == 8 and a.total == sum(a.blocks)
    c = fisher_potential(net, batch_size=16, seed=1)
    assert c.total != a.total
    # An untrained 10-way classifier: the loss is about ln 10.
    assert 1.8 < a.loss < 2.8


def test_an_illegal_variant_is_refused_and_tau_moves_the_line() -> None:
    # Cutting every block's rows into strips (no halo) lowers the Fisher Potential: measured
    # below 0.92 of the original for 6 seeds x widths 4, 8 and 16 (0.18 to 0.91).
    net = resnet_cifar(18, 4)
    split = net.transform([((SpatialSplit(2),), (SpatialSplit(2),))] * 8)
    assert isinstance(split, Network)
    original = fisher_potential(net, batch_size=32, seed=0)
    candidate = fisher_potential(split, batch_size=32, seed=0)
    ratio = candidate.ratio(original)
    assert ratio < 0.95
    assert not is_legal(candidate, original)  # tau = 1
    assert is_legal(candidate, original, tau=ratio) and not is_legal(
        candidate, original, tau=ratio * 1.001
    )
    assert is_legal(original, original) and is_legal(candidate, original, tau=0.01)
    for bad in (-0.5, 0.0, math.nan, math.inf):  # at 0 anything is legal: refused, not obeyed
        with pytest.raises(ValueError, match="tau must be a finite number above 0"):
            is_legal(candidate, original, tau=bad)


def test_the_ratio_of_a_zero_potential() -> None:
    zero = FisherPotential(0.0, (0.0,), 2.3, 8, 0)
    some = FisherPotential(1e-4, (1e-4,), 2.3, 8, 0)
    assert some.ratio(zero) == math.inf and zero.ratio(zero) == 1.0 and zero.ratio(some) == 0.0


def test_the_minibatch_is_real_digits_shaped_for_the_network() -> None:
    x, y = digits_minibatch(3, 32, 32, 64, seed=0)
    x2, y2 = digits_minibatch(3, 32, 32, 64, seed=0)
    assert x.shape == (64, 3, 32, 32) and x.dtype == np.float32 and y.shape == (64,)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    assert set(np.unique(y)) <= set(range(10)) and len(np.unique(y)) >= 8
    assert np.array_equal(x[:, 0], x[:, 2])  # grey: every channel is the same image
    assert np.array_equal(x[:, :, 0:4, 0:4], np.broadcast_to(x[:, :, :1, :1], (64, 3, 4, 4)))
    assert abs(float(x.mean())) < 0.2 and 0.8 < float(x.std()) < 1.2  # standardised
    _, y3 = digits_minibatch(3, 32, 32, 64, seed=1)
    assert not np.array_equal(y, y3)
    big, _ = digits_minibatch(3, 224, 224, 2, seed=0)
    assert big.shape == (2, 3, 224, 224)
    with pytest.raises(ValueError, match="batch_size"):
        digits_minibatch(3, 32, 32, 0)


def test_the_core_and_networks_work_without_jax_and_the_potential_says_how_to_install() -> None:
    script = textwrap.dedent(
        """
        import sys
        BLOCKED = ("jax", "jaxlib", "sklearn")
        class Absent:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ModuleNotFoundError(f"No module named {name!r}")
        sys.meta_path.insert(0, Absent())
        import explorer, explorer.nas
        from explorer.nas import Group, MissingExtraError, fisher_potential, resnet_cifar
        net = resnet_cifar(18, 8)
        grouped = net.transform([((Group(2),), (Group(2),))] * 8)
        assert grouped.macs < net.macs and grouped.workloads()
        try:
            fisher_potential(grouped)
        except MissingExtraError as exc:
            print(exc)
        assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED]
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    message = out.stdout.strip()
    assert message == (
        "the Fisher Potential needs jax, which is not installed: "
        "pip install 'schedule-explorer[nas]'"
    )


def test_several_initialisations_average_the_single_draws() -> None:
    net = resnet_cifar(18, 4)
    draws = [fisher_potential(net, batch_size=16, seed=s) for s in (3, 4)]
    both = fisher_potential(net, batch_size=16, seed=3, inits=2)
    assert both.inits == 2 and both.seed == 3
    assert both.total == pytest.approx((draws[0].total + draws[1].total) / 2, rel=1e-9)
    assert both.blocks == pytest.approx(
        [(a + b) / 2 for a, b in zip(draws[0].blocks, draws[1].blocks, strict=True)]
    )
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="inits must be an integer >= 1"):
            fisher_potential(net, inits=bad)
