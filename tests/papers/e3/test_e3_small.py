"""E3's length penalty (against a float64 port of the authors' ``apply_length_penalty``), the
exact expected all-incorrect fraction, and the small-model driver's pure helpers."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.cures import small
from rlvr_lab.papers.e3 import allocation as e3
from simulations import cures

SETTINGS = settings(max_examples=30, deadline=None)
_apply = jax.jit(e3.apply_length_penalty)
_penalty = jax.jit(e3.length_penalty)


def _penalty_reference(scores, lengths, rank, coeff, threshold):
    """The authors' ``apply_length_penalty`` in float64 NumPy (per rollout: the prompt's rank
    repeated; -100 -> 1; penalty zeroed where rank > threshold; applied where score != 0)."""
    scores = np.array(scores, np.float64)
    rank = np.array(rank, np.float64)
    rank[rank == -100] = 1
    out = scores.copy()
    for i in range(scores.shape[0]):
        for j in range(scores.shape[1]):
            length = float(lengths[i][j])
            b = length * coeff / (length * coeff + 1)
            if rank[i] > threshold:
                b = 0.0
            if scores[i, j] != 0:
                out[i, j] = scores[i, j] - b
    return out


@st.composite
def _batches(draw):
    b, g = 4, 3   # one shape: one compilation (the values carry the cases)
    scores = draw(st.lists(st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=g, max_size=g),
                           min_size=b, max_size=b))
    lengths = draw(st.lists(st.lists(st.integers(0, 4000), min_size=g, max_size=g),
                            min_size=b, max_size=b))
    rank = draw(st.lists(st.sampled_from([-100.0, 0.0, 0.05, 0.1, 0.5, 0.99]), min_size=b,
                         max_size=b))
    coeff = draw(st.sampled_from([0.0, 1e-3, 0.05, 1.0]))
    threshold = draw(st.sampled_from([0.0, 0.1, 0.2, 1.0]))
    return scores, lengths, rank, coeff, threshold


@given(_batches())
@SETTINGS
def test_length_penalty_matches_the_authors_rule(case):
    scores, lengths, rank, coeff, threshold = case
    got = _apply(jnp.asarray(scores, jnp.float32), jnp.asarray(lengths, jnp.int32),
                 jnp.asarray(rank, jnp.float32), coeff, threshold)
    ref = _penalty_reference(scores, lengths, rank, coeff, threshold)
    assert np.all(np.isfinite(np.asarray(got)))
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6, atol=1e-6)


def test_length_penalty_cases():
    # b = mu l / (1 + mu l): 0 at l = 0, 1/2 at mu l = 1, below 1 always
    np.testing.assert_allclose(np.asarray(e3.length_penalty(jnp.array([0, 1000, 10 ** 9]),
                                                            1e-3)), [0.0, 0.5, 1.0], atol=1e-6)
    rewards = jnp.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    lengths = jnp.array([[10, 30, 10], [10, 10, 10], [5, 5, 5]])
    rank = jnp.array([0.0, 0.5, e3.UNSEEN])       # easy, hard, unseen (counts as rank 1)
    out = np.asarray(e3.apply_length_penalty(rewards, lengths, rank, 0.1, 0.1))
    np.testing.assert_allclose(out[0], [1 - 0.5, 1 - 0.75, 0.0])   # longer correct: less
    np.testing.assert_array_equal(out[1:], np.asarray(rewards[1:]))
    # the boundary is inclusive (rank <= threshold), as in the code (rank > threshold: none)
    at = np.asarray(e3.apply_length_penalty(rewards[:1], lengths[:1], jnp.array([0.1]), 0.1,
                                            0.1))
    np.testing.assert_allclose(at, out[:1])
    # mu = 0: unchanged; threshold 1 penalises unseen prompts too (their rank is 1)
    np.testing.assert_array_equal(np.asarray(e3.apply_length_penalty(
        rewards, lengths, rank, 0.0, 1.0)), np.asarray(rewards))
    assert np.asarray(e3.apply_length_penalty(rewards, lengths, rank, 0.1, 1.0))[2, 0] < 1


@given(st.lists(st.integers(0, 10 ** 6), min_size=8, max_size=8), st.floats(1e-4, 1.0))
@SETTINGS
def test_length_penalty_grows_with_length_and_stays_below_one(lengths, mu):
    lengths = np.sort(np.asarray(lengths))
    b = np.asarray(_penalty(jnp.asarray(lengths, jnp.float32), mu), np.float64)
    assert np.all(np.isfinite(b)) and np.all(np.diff(b) >= -1e-7)
    assert np.all((b >= 0) & (b <= 1))
    np.testing.assert_allclose(b, mu * lengths / (1 + mu * lengths), rtol=1e-5, atol=1e-7)


def test_group_normalised_advantage_ignores_a_common_penalty():
    """Why the penalty needs a length spread: {1-b, 0} normalises like {1, 0}."""
    from rlvr_lab import advantages

    r = jnp.array([[1.0, 0.0, 1.0, 0.0]])
    same = e3.apply_length_penalty(r, jnp.full((1, 4), 7), jnp.array([0.0]), 0.05, 0.1)
    spread = e3.apply_length_penalty(r, jnp.array([[5, 7, 9, 7]]), jnp.array([0.0]), 0.05, 0.1)
    a = advantages.grpo(r)
    np.testing.assert_allclose(np.asarray(advantages.grpo(same)), np.asarray(a), atol=1e-5)
    assert np.abs(np.asarray(advantages.grpo(spread)) - np.asarray(a)).max() > 1e-2


def test_expected_all_incorrect_matches_numpy():
    rng = np.random.default_rng(0)
    p = rng.beta(0.3, 0.3, 24)
    # a batch of every prompt: no randomness left, so one draw is exact
    frac, over = e3.expected_all_incorrect(jax.random.key(0), p, [24], [(8, 8), (4, 16)], 3)
    frac, over = frac[0], over[0]
    counts = np.asarray(e3.e3_allocation(e3.e3_ranks(jnp.asarray(p, jnp.float32)), 8 * 24, 4,
                                         16, cap_at_max=True))
    assert counts.sum() == 8 * 24
    np.testing.assert_allclose(frac, [np.mean((1 - p) ** 8), np.mean((1 - p) ** counts)],
                               rtol=1e-5)
    np.testing.assert_allclose(over[1], np.mean(counts > 12), rtol=1e-6)
    assert over[0] == 1.0    # uniform 8 each: every prompt is above n_max - 4 = 4
    with pytest.raises(ValueError, match="batch_sizes"):
        e3.expected_all_incorrect(jax.random.key(0), p, [25], [(4, 12)], 3)


# ----------------------------------------------------------------------------- driver helpers
def test_first_crossing_interpolates():
    x = [0, 10, 20, 30]
    assert small.first_crossing([0.2, 0.4, 0.6, 0.8], x, 0.5) == pytest.approx(15.0)
    assert small.first_crossing([0.6, 0.4], x[:2], 0.5) == 0.0
    assert np.isnan(small.first_crossing([0.1, 0.2], x[:2], 0.5))


def test_paired_ratio_and_degenerate_inputs():
    ratio, low, high = small.paired_ratio([10, 20, 30], [5, 10, 15], cap=100)
    assert ratio == pytest.approx(2.0) and low == pytest.approx(2.0) and high == pytest.approx(2.0)
    ratio, low, high = small.paired_ratio([10, np.nan], [20, 20], cap=40)
    assert ratio == pytest.approx(25 / 20) and np.isfinite(low)
    r, lo, hi = small.paired_ratio([3.0], [1.0], cap=10)
    assert r == 3.0 and lo == -np.inf and hi == np.inf


def test_driver_config_validation():
    cfg = cures.small_config(True)
    with pytest.raises(ValueError, match="g_max"):
        small.DriverConfig(cfg.rl, g_max=4)
    with pytest.raises(ValueError, match="n_high"):
        small.DriverConfig(cfg.rl, n_high=20)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        small.DriverConfig(cfg.rl, steps_per_epoch=0)
