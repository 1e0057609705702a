"""CurES rollout allocation: Neyman allocation ``n_i ∝ sigma_i`` at a fixed total budget.

For a prompt with success probability ``a`` (``b = 1 - a``) and per-rollout score-function
gradients ``g = grad log pi(y)``, the single-rollout policy-gradient term ``(r - a) g`` has
total variance (trace of its covariance; the CurES paper)

    sigma^2 = a b^2 E[|g_c|^2] + a^2 b E[|g_w|^2] - a^2 b^2 |E g_c - E g_w|^2,

with ``g_c`` / ``g_w`` the gradient of a correct / wrong rollout. (Proof: ``r - a`` is ``b``
with probability ``a`` and ``-a`` otherwise, so ``E[(r-a)g] = ab (E g_c - E g_w)`` and
``E|(r-a)g|^2 = a b^2 E|g_c|^2 + a^2 b E|g_w|^2``.) The CurES code works with scalar gradient
norms, where the last term is ``(E g_c - E g_w)^2``; in the prompt bank the exact vector form
is available (:mod:`rlvr_lab.papers.cures.theory`). With ``g_c = g_w = 1`` it reduces to
``sigma = sqrt(a(1 - a))``.

Averaging ``n_i`` rollouts gives variance ``sigma_i^2 / n_i`` per prompt, and the sum over a
batch ``sum_i sigma_i^2 / n_i`` is minimised under ``sum_i n_i = N`` by ``n_i = N sigma_i /
sum_j sigma_j`` (Neyman allocation), with value ``(sum sigma)^2 / N`` against
``B sum sigma^2 / N`` for uniform allocation.

Pitfall of the code form ``round(N sigma_i / sum sigma)`` (:func:`neyman_allocation_code`):
prompts with small ``sigma`` (p_hat near 0 or 1) get 0 rollouts, i.e. are silently dropped,
and the rounded counts need not add up to N. :func:`neyman_allocation` enforces a minimum per
prompt and keeps the budget exactly (water filling + largest remainder).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab.train.budget import proportional_allocation


def rollout_gradient_variance(p: ArrayLike, sq_norm_correct: ArrayLike = 1.0,
                              sq_norm_wrong: ArrayLike = 1.0,
                              mean_gap_sq: ArrayLike = 0.0) -> jax.Array:
    """``a b^2 E|g_c|^2 + a^2 b E|g_w|^2 - a^2 b^2 |E g_c - E g_w|^2`` with ``a = p``.

    Args broadcast: ``p`` success probability (or posterior mean), ``sq_norm_correct`` /
    ``sq_norm_wrong`` the second moments ``E|g|^2`` of correct / wrong rollouts' gradients,
    ``mean_gap_sq`` the squared distance between their mean gradients. Clipped at 0 against
    rounding; 0 at p = 0 or 1.
    """
    a = jnp.clip(jnp.asarray(p), 0.0, 1.0)
    b = 1.0 - a
    var = a * b * b * sq_norm_correct + a * a * b * sq_norm_wrong - a * a * b * b * mean_gap_sq
    return jnp.maximum(var, 0.0)


def neyman_sigma(p: ArrayLike, norm_sq_correct: ArrayLike = 1.0, norm_sq_wrong: ArrayLike = 1.0,
                 norm_correct: ArrayLike | None = None,
                 norm_wrong: ArrayLike | None = None) -> jax.Array:
    """CurES' per-prompt sigma from scalar gradient-norm statistics (the code's form).

    ``norm_sq_*`` are ``E[g^2]`` and ``norm_*`` the means ``E[g]`` of the gradient norms of
    correct / wrong rollouts; missing means are taken as ``sqrt(E[g^2])`` (deterministic
    norms). With all defaults, ``sigma = sqrt(p (1 - p))``.
    """
    mc = jnp.sqrt(jnp.asarray(norm_sq_correct)) if norm_correct is None else norm_correct
    mw = jnp.sqrt(jnp.asarray(norm_sq_wrong)) if norm_wrong is None else norm_wrong
    gap = jnp.asarray(mc) - jnp.asarray(mw)
    return jnp.sqrt(rollout_gradient_variance(p, norm_sq_correct, norm_sq_wrong, gap * gap))


def neyman_allocation(sigma: ArrayLike, budget: ArrayLike, *, min_per_prompt: int = 2,
                      max_per_prompt: int | None = None) -> jax.Array:
    """Rollouts per prompt ``n_i ∝ sigma_i``, ``sum n_i == budget``, ``n_i >= min_per_prompt``.

    The default minimum of 2 keeps every sampled prompt in the batch with a group-relative
    baseline. All-zero ``sigma`` gives the uniform allocation. Jittable; int32 ``[B]``.
    """
    return proportional_allocation(sigma, budget, min_per_prompt=min_per_prompt,
                                   max_per_prompt=max_per_prompt)


def cures_allocation(p_hat: ArrayLike, budget: ArrayLike, *, min_per_prompt: int = 2,
                     max_per_prompt: int | None = None) -> jax.Array:
    """CurES allocation with equal gradient norms: ``n_i ∝ sqrt(p_hat_i (1 - p_hat_i))``."""
    return neyman_allocation(neyman_sigma(p_hat), budget, min_per_prompt=min_per_prompt,
                             max_per_prompt=max_per_prompt)


def neyman_allocation_code(sigma: ArrayLike, budget: ArrayLike) -> jax.Array:
    """The authors' rounding ``round(budget sigma_i / sum sigma)`` — may drop prompts (0
    rollouts) and miss the budget; kept to demonstrate the pitfall. int32 ``[B]``."""
    sigma = jnp.maximum(jnp.asarray(sigma), 0.0)
    total = sigma.sum()
    share = jnp.where(total > 0, sigma / jnp.where(total > 0, total, 1.0), 1.0 / sigma.shape[0])
    return jnp.round(budget * share).astype(jnp.int32)
