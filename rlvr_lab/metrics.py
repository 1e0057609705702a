"""Evaluation metrics: unbiased pass@k, token entropy, probability mass on the correct set."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _is_concrete(*xs) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def pass_at_k(n, c, k):
    """Unbiased pass@k ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021), vectorised.

    ``n`` samples of which ``c`` are correct; broadcasts over arrays. Exact cases: ``c == 0``
    gives 0 and ``n - c < k`` gives 1. Requires ``0 <= c <= n`` and ``1 <= k <= n``: concrete
    inputs outside that raise ValueError; traced ones give NaN there.
    The ratio is evaluated as a sum of ``min(k, c)`` log1p terms (no cancelling log-gammas), in
    the default float dtype (float64 when x64 is on).
    """
    n, c, k = jnp.asarray(n), jnp.asarray(c), jnp.asarray(k)
    if _is_concrete(n, c, k):
        nn, cc, kk = np.broadcast_arrays(np.asarray(n), np.asarray(c), np.asarray(k))
        bad = (cc < 0) | (cc > nn) | (kk < 1) | (kk > nn)
        if np.any(bad):
            i = np.flatnonzero(bad.ravel())[0]
            raise ValueError(
                f"pass_at_k needs 0 <= c <= n and 1 <= k <= n; got n={nn.ravel()[i]}, "
                f"c={cc.ravel()[i]}, k={kk.ravel()[i]}")
    return _pass_at_k(n, c, k)


@jax.jit
def _pass_at_k(n, c, k):
    dtype = jnp.result_type(float)
    nf, cf, kf = jnp.broadcast_arrays(*(x.astype(dtype) for x in (n, c, k)))
    invalid = (cf < 0) | (cf > nf) | (kf < 1) | (kf > nf)
    certain = (nf - cf < kf) | (cf == 0) | invalid
    # C(n-c,k)/C(n,k) = prod_{j<k} (1 - c/(n-j)) = prod_{j<c} (1 - k/(n-j)): take the shorter
    by_k = kf <= cf
    terms = jnp.where(certain, 0, jnp.where(by_k, kf, cf))
    step = jnp.where(by_k, cf, kf)

    def body(state):
        j, log_ratio = state
        factor = jnp.log1p(-step / jnp.maximum(nf - j, 1))
        return j + 1, log_ratio + jnp.where(j < terms, factor, 0)

    _, log_ratio = jax.lax.while_loop(
        lambda state: state[0] < jnp.max(terms, initial=0), body,
        (jnp.zeros((), dtype), jnp.zeros(nf.shape, dtype)))
    value = jnp.where(nf - cf < kf, 1.0, -jnp.expm1(log_ratio))
    value = jnp.where(cf == 0, 0.0, value)
    return jnp.where(invalid, jnp.nan, value).astype(dtype)


def pass_at_k_exact(p, k):
    """Population pass@k of a prompt with success probability ``p``: ``1 - (1 - p)^k``."""
    p = jnp.asarray(p)
    k = jnp.asarray(k)
    # k = 0 draws never succeed; the guard also avoids 0 * log(0) at p = 1
    return jnp.where(k == 0, 0.0, -jnp.expm1(k * jnp.log1p(-jnp.clip(p, 0, 1))))


def entropy(logits, axis=-1):
    """Entropy ``-sum p log p`` of softmax(logits) along ``axis`` (0 log 0 = 0)."""
    logp = jax.nn.log_softmax(logits, axis=axis)
    p = jnp.exp(logp)
    # zero log p (not p log p) where p = 0: the product's gradient then stays finite for
    # -inf logits (0 * -inf in the untaken branch made the whole gradient NaN)
    return -jnp.sum(p * jnp.where(p > 0, logp, 0.0), axis=axis)


def mean_token_entropy(logits, mask=None):
    """Mean entropy over valid positions: ``logits [..., V]``, ``mask`` ``logits.shape[:-1]``."""
    h = entropy(logits)
    m = jnp.ones(h.shape, bool) if mask is None else jnp.asarray(mask, bool)
    mf = m.astype(h.dtype)
    # where, not h * mask: a NaN entropy at a padded position (an all -inf row) must stay out
    return jnp.where(m, h, 0.0).sum() / jnp.maximum(mf.sum(), 1)


def correct_mass(logits, correct):
    """Probability mass that softmax(logits) puts on the boolean ``correct`` set, per row."""
    p = jax.nn.softmax(logits, axis=-1)
    return jnp.sum(jnp.where(correct, p, 0.0), axis=-1)
