"""Exact vocabulary mismatch (KL, chi^2) against a float64 NumPy reference, with properties."""
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlvr_lab.papers.fp8 import mismatch


def _reference(rollout_logits, train_logits):
    """float64: KL(p_r || p_t) = sum p_r log(p_r / p_t), chi^2 = sum p_t^2 / p_r - 1."""
    def log_softmax(z):
        z = np.asarray(z, np.float64)
        z = z - z.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))
    lr, lt = log_softmax(rollout_logits), log_softmax(train_logits)
    kl = (np.exp(lr) * (lr - lt)).sum(-1)
    chi2 = np.exp(2 * lt - lr).sum(-1) - 1
    return kl, chi2


logits_st = hnp.arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(2, 9)),
                       elements=st.floats(-8, 8, width=32))


@settings(max_examples=60, deadline=None)
@given(a=logits_st, data=st.data())
def test_matches_the_float64_reference(a, data):
    noise = data.draw(hnp.arrays(np.float32, a.shape, elements=st.floats(-2, 2, width=32)))
    b = a + noise
    got = mismatch.vocab_mismatch(a, b)
    kl, chi2 = _reference(a, b)
    np.testing.assert_allclose(got["kl"], kl, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got["chi2"], chi2, rtol=1e-4, atol=1e-6)
    assert np.all(np.asarray(got["kl"]) >= 0) and np.all(np.asarray(got["chi2"]) >= 0)


@settings(max_examples=30, deadline=None)
@given(a=logits_st)
def test_identical_or_shifted_logits_give_exactly_zero(a):
    for b in (a, a + np.float32(3.0)):  # a constant shift is the same distribution
        got = mismatch.vocab_mismatch(a, b)
        if b is a:
            np.testing.assert_array_equal(got["kl"], 0)
            np.testing.assert_array_equal(got["chi2"], 0)
        else:
            np.testing.assert_allclose(got["kl"], 0, atol=1e-6)
            np.testing.assert_allclose(got["chi2"], 0, atol=1e-5)


def test_small_mismatch_keeps_its_precision():
    # d ~ 1e-4: KL ~ d^2 / 2 would vanish in (rho - 1) - log rho computed naively
    a = np.zeros((1, 5), np.float32)
    b = np.array([[1e-3, 0, 0, 0, 0]], np.float32)
    got = mismatch.vocab_mismatch(a, b)
    kl, chi2 = _reference(a, b)
    np.testing.assert_allclose(got["kl"], kl, rtol=1e-3)
    np.testing.assert_allclose(got["chi2"], chi2, rtol=1e-3)


def test_extreme_logits_stay_finite():
    # the rollout engine gives a token ~e^-200 that the trainer likes: huge ratios
    a = np.array([[0.0, -200.0, 0.0]], np.float32)
    b = np.array([[0.0, 0.0, 0.0]], np.float32)
    got = mismatch.vocab_mismatch(a, b)
    kl, _ = _reference(a, b)
    np.testing.assert_allclose(got["kl"], kl, rtol=1e-4)
    assert float(got["chi2"][0]) == float(jnp.finfo(jnp.float32).max)  # documented clamp
    for v in got.values():
        assert np.all(np.isfinite(np.asarray(v)))


def test_masked_means_and_the_sampled_estimators_expectation():
    key = jax.random.key(0)
    a = jax.random.normal(key, (3, 4, 6))
    b = a + 0.3 * jax.random.normal(jax.random.fold_in(key, 1), a.shape)
    mask = jnp.array([[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]], bool)
    got = mismatch.vocab_mismatch(a, b, mask)
    kl, chi2 = _reference(np.asarray(a), np.asarray(b))
    m = np.asarray(mask)
    np.testing.assert_allclose(got["kl_mean"], kl[m].mean(), rtol=1e-4)
    np.testing.assert_allclose(got["chi2_mean"], chi2[m].mean(), rtol=1e-4)
    # the trainer's sampled per-token k3 = rho - log rho - 1 and chi2 term rho^2 - 1, averaged
    # over every next token weighted by p_rollout, give the exact sums: their expectations
    lr = np.asarray(jax.nn.log_softmax(a, -1), np.float64)
    lt = np.asarray(jax.nn.log_softmax(b, -1), np.float64)
    rho = np.exp(lt - lr)
    np.testing.assert_allclose(got["kl"], (np.exp(lr) * (rho - np.log(rho) - 1)).sum(-1),
                               rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(got["chi2"], (np.exp(lr) * (rho ** 2 - 1)).sum(-1),
                               rtol=1e-3, atol=1e-6)
