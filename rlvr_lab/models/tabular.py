"""The tabular softmax policy: one row of logits per prompt, one "token" per answer.

The parameters are the logits themselves (``[K, V]``); a temperature divides them when
sampling, as in an LLM's decoding.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab import metrics


def log_policy(logits: ArrayLike, temperature: ArrayLike = 1.0) -> jax.Array:
    """Log-probabilities ``log softmax(logits / T)`` over the last axis."""
    return jax.nn.log_softmax(logits / temperature, axis=-1)


def sample(key: jax.Array, logits: jax.Array, num_samples: int,
           temperature: ArrayLike = 1.0) -> jax.Array:
    """Draw ``num_samples`` answers per row: ``logits [B, V]`` -> answers ``[B, num_samples]``.

    Inverse-CDF sampling: one uniform per draw instead of V Gumbels (``jax.random.categorical``),
    which makes the random-bit generation, the bottleneck of the vmapped trainer on CPU,
    V times cheaper.
    """
    cdf = jnp.cumsum(jax.nn.softmax(logits / temperature, axis=-1), axis=-1)
    u = jax.random.uniform(key, (logits.shape[0], num_samples), dtype=cdf.dtype)
    # the last bin takes u beyond the (rounded) total mass
    draws = jnp.sum(u[:, :, None] * cdf[:, -1:, None] >= cdf[:, None, :], axis=-1)
    return jnp.minimum(draws, logits.shape[-1] - 1)


def answer_log_prob(logits: ArrayLike, answers: ArrayLike,
                    temperature: ArrayLike = 1.0) -> jax.Array:
    """``log pi(answers)`` for ``logits [B, V]`` and ``answers [B, G]`` -> ``[B, G]``."""
    return jnp.take_along_axis(log_policy(logits, temperature), answers, axis=-1)


def entropy(logits: ArrayLike, temperature: ArrayLike = 1.0) -> jax.Array:
    """Per-row entropy of ``softmax(logits / T)``."""
    return metrics.entropy(logits / temperature)


def kl_divergence(logits: ArrayLike, ref_logits: ArrayLike) -> jax.Array:
    """Exact ``KL(pi || pi_ref)`` per row."""
    logp, logq = log_policy(logits), log_policy(ref_logits)
    return jnp.sum(jnp.exp(logp) * (logp - logq), axis=-1)
