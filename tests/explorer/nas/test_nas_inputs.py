"""The NAS API under bad input (issue 21): every refusal is one sentence naming the argument the
caller gave, before any work; what is accepted is computed as asked."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.nas import (
    KINDS,
    draw_plan,
    fisher_potential,
    get_network,
    init_params,
    is_legal,
    sample_candidates,
)
from explorer.nas._network import MAX_WIDTH


@settings(max_examples=200, deadline=None)
@given(
    width=st.integers(-10, 10**12)
    | st.floats(allow_nan=True)
    | st.booleans()
    | st.text(max_size=3)
    | st.none()
)
def test_a_width_is_a_whole_number_in_range_or_refused_naming_width(width) -> None:
    """Seen: width=2.5 blamed the groups of a convolution, width=True was accepted."""
    try:
        net = get_network("resnet18_cifar", width=width)
    except ValueError as exc:
        assert str(exc) == f"width must be an integer from 1 to {MAX_WIDTH} (got {width!r})"
        return
    assert type(width) is int and 1 <= width <= MAX_WIDTH
    assert net.stem.out_channels == width


def test_draws_never_make_a_change_that_changes_nothing() -> None:
    """Seen: spatial_split(1) and split_group(1,1) listed among a network's changes (the
    constructors now refuse them: a draw of one would raise here)."""
    net = get_network("resnet18_cifar", width=8)
    rng = np.random.default_rng(0)
    for _ in range(300):
        for block in net.blocks:
            for steps in draw_plan(block, rng, KINDS):
                assert all(s.label() not in ("spatial_split(1)", "split_group(1)") for s in steps)


jax = pytest.importorskip("jax")
NET = get_network("resnet18_cifar", width=2)


def test_seeds_are_checked_by_name_not_by_numpy() -> None:
    """Seen: seed=-1 gave NumPy's "expected non-negative integer"."""
    for call, name in (
        (lambda: fisher_potential(NET, batch_size=4, seed=-1), "seed"),
        (lambda: init_params(NET, seed=-1), "seed"),
        (lambda: sample_candidates(NET, 1, 0, batch_size=4, seed=-1), "seed"),
        (lambda: sample_candidates(NET, 1, -1, batch_size=4), "rng"),
    ):
        with pytest.raises(ValueError, match=f"^{name} must be an integer >= 0 \\(got -1\\)$"):
            call()


def test_samples_are_counted_and_tau_0_is_refused() -> None:
    with pytest.raises(ValueError, match="n must be an integer from 0 to"):
        sample_candidates(NET, -1, 0, batch_size=4)
    fp = fisher_potential(NET, batch_size=4)
    for call in (
        lambda: is_legal(fp, fp, tau=0),
        lambda: sample_candidates(NET, 1, 0, batch_size=4, tau=0.0),
    ):
        with pytest.raises(ValueError, match="at 0 every candidate is legal"):
            call()


def test_float64_is_computed_in_float64() -> None:
    """Seen: dtype="float64" silently computed float32 (JAX's 64-bit mode was off)."""
    assert not jax.config.jax_enable_x64
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # JAX warns when it truncates float64 to float32
        wide = fisher_potential(NET, batch_size=4, dtype="float64")
    narrow = fisher_potential(NET, batch_size=4)
    assert wide.total == pytest.approx(narrow.total, rel=1e-4) and wide.total != narrow.total
    assert not jax.config.jax_enable_x64  # switched on for the computation only
    params = init_params(NET, dtype="float64")
    assert params["fc_w"].dtype == np.float64
    for dtype in ("float16", "banana", None):
        with pytest.raises(ValueError, match="dtype must be one of float32, float64"):
            fisher_potential(NET, batch_size=4, dtype=dtype)
