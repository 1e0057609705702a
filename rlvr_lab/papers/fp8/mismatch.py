"""Exact train/rollout mismatch over the vocabulary (the low-noise companion of k1/k3/chi^2).

The trainer's per-step metrics (:func:`rlvr_lab.losses.mismatch_metrics`) are Monte-Carlo
estimates on the rollout engine's sampled tokens, ``rho = pi_train / pi_rollout``:
``k3 = mean(rho - log rho - 1)`` and ``chi2 = mean(rho^2) - 1``. Given the prefixes, their
expectations over the next token are exact sums over the vocabulary:

- ``E[k1] = E[k3] = KL(pi_rollout || pi_train) = sum_v p_r (rho - 1 - log rho)``, computed
  term by term (``expm1(d) - d`` with ``d = log rho``, each term >= 0), so rounding never
  makes it negative;
- ``E[chi2] = chi^2(pi_train || pi_rollout) = sum_v p_r (rho - 1)^2``, from
  ``log p_r + 2 log|expm1(d)|`` so large ratios do not overflow before the sum does; a sum
  above the float32 range is returned as the largest float32 (finite).

Sampled ``chi2 = mean(rho^2) - 1`` is unbiased but can be negative on a finite batch (its
terms are not non-negative); ``mean((rho - 1)^2)`` has the same expectation (``E[rho] = 1``
under the rollout policy) and is never negative. The exact sums need no sampling from the
engine, so a block-size sweep can score every quantisation on the *same* prefixes.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab import losses

_BIG = float(jnp.finfo(jnp.float32).max)


def vocab_mismatch(rollout_logits: ArrayLike, train_logits: ArrayLike,
                   mask: ArrayLike | None = None) -> dict:
    """Per-token exact ``kl`` (rollout || train) and ``chi2`` (train || rollout), and their
    masked means ``kl_mean`` / ``chi2_mean``.

    ``*_logits``: ``[..., V]`` unnormalised logits of the rollout engine and the trainer at
    the same positions; ``mask``: ``[...]`` valid positions (None: all). Finite logits give
    finite, non-negative results; identical logits give exactly 0.
    """
    lr = jax.nn.log_softmax(jnp.asarray(rollout_logits, jnp.float32), axis=-1)
    lt = jax.nn.log_softmax(jnp.asarray(train_logits, jnp.float32), axis=-1)
    d = lt - lr                                   # log rho per vocabulary entry
    pr = jnp.exp(lr)
    # p_r (e^d - 1 - d): for d > 1 as p_t - p_r (1 + d) (p_r may underflow to 0 while e^d
    # overflows), else with expm1 (no cancellation for small d)
    small = jnp.minimum(d, 1.0)
    kl_terms = jnp.where(d > 1.0, jnp.exp(lt) - pr * (1.0 + d), pr * (jnp.expm1(small) - small))
    kl = jnp.maximum(kl_terms, 0.0).sum(-1)
    # log|expm1(d)| = max(d, 0) + log(-expm1(-|d|)) (-inf where d = 0: a zero term)
    log_abs = jnp.maximum(d, 0.0) + jnp.log(-jnp.expm1(-jnp.abs(d)))
    chi2 = jnp.exp(lr + 2.0 * log_abs).sum(-1)
    kl, chi2 = _finite(kl), _finite(chi2)
    return {"kl": kl, "chi2": chi2, "kl_mean": _finite(losses.masked_mean(kl, mask)),
            "chi2_mean": _finite(losses.masked_mean(chi2, mask))}


def _finite(x):
    return jnp.minimum(jnp.nan_to_num(x, nan=0.0, posinf=_BIG), _BIG)
