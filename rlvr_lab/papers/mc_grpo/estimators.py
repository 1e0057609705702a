"""Extra advantage estimators for the MC-GRPO study (registered by :mod:`rlvr_lab.papers.mc_grpo`).

MC-GRPO (arXiv:2601.22582) samples G+1 rollouts, centres them on the median and drops the
median rollout (the pivot) from the loss, so G rollouts are backpropagated. Its compute-matched
comparisons also sample G+1 and backpropagate G:

- ``grpo_drop_one``: mean and std over all G+1 rewards; one rollout -- the last valid one;
  rollouts are i.i.d., so a fixed index is a uniformly random one -- left out of the loss.
- ``grpo_drop_min_abs``: the baseline of the authors' code (``mc=False`` with the extra
  rollout): mean and std over all G+1 rewards, and the rollout with the **smallest |reward|**
  (the first such index) left out of the loss. With rewards >= 0 this drops a lowest-reward
  rollout, i.e. mostly a negative-advantage one: the kept G are biased upwards.
- ``mc_grpo_rescaled``: the authors' MC-GRPO: :func:`rlvr_lab.advantages.mc_grpo` followed by
  :func:`rescale_nonzero`, which multiplies each group's non-zero advantages by
  ``n / #non-zero`` (``n`` = the group's valid rollouts, G+1; the pivot is one of the zeros),
  "to compensate for zero-advantage samples that do not contribute".

:func:`drop_min_abs_keep` and :func:`rescale_nonzero` are the two pieces, usable on their own
(``rescale=True`` adds the rescale to ``grpo_drop_min_abs`` too, an option the authors' code
does not use). Degenerate inputs: a group with fewer than two valid rollouts has A = 0 and
keeps its rollout (as ``grpo_drop_one``); a group with no non-zero advantage is unchanged by
the rescale; masked entries are 0 and not kept. Never NaN.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab import advantages

__all__ = ["grpo_drop_one", "drop_min_abs_keep", "grpo_drop_min_abs", "rescale_nonzero",
           "mc_grpo_rescaled", "NONZERO_ATOL"]

NONZERO_ATOL = 1e-6   # the authors' torch.isclose(a, 0, atol=1e-6) test for "zero advantage"


def _valid(rewards, mask):
    rewards = jnp.asarray(rewards)
    return jnp.ones(rewards.shape, bool) if mask is None else jnp.asarray(mask, bool)


def grpo_drop_one(rewards: ArrayLike, mask: ArrayLike | None = None, *, scale: str = "std",
                  eps: float = 1e-6) -> advantages.Advantages:
    """GRPO advantages over all valid rollouts; the last valid rollout is left out of the loss.

    ``scale`` as in :func:`rlvr_lab.advantages.grpo` ("std" | "none" | "batch"). Returns
    ``(adv [B, G+1], keep [B, G+1])`` like ``mc_grpo``; ``keep`` is False at the dropped
    rollout and at masked entries. A group with one valid rollout keeps it with A=0.
    """
    adv = advantages.grpo(rewards, mask, scale=scale, eps=eps)
    rewards = jnp.asarray(rewards)
    valid = _valid(rewards, mask)
    index = jnp.arange(rewards.shape[-1])[None, :]
    last = jnp.max(jnp.where(valid, index, -1), axis=-1, keepdims=True)
    n = valid.sum(-1, keepdims=True)
    keep = valid & ~((index == last) & (n >= 2))
    return advantages.Advantages(adv, keep)


def drop_min_abs_keep(rewards: ArrayLike, mask: ArrayLike | None = None) -> jax.Array:
    """``keep [B, G+1]``: the valid rollouts minus, in groups of two or more, the first valid
    index with the smallest ``|reward|`` (the authors' ``rewards.abs().min(dim=1)``)."""
    rewards = jnp.asarray(rewards)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must have shape [B, G]; got shape {rewards.shape}")
    valid = _valid(rewards, mask)
    mag = jnp.where(valid, jnp.abs(rewards), jnp.inf)
    first = jnp.argmin(mag, axis=-1)   # argmin returns the first minimum
    index = jnp.arange(rewards.shape[-1])[None, :]
    n = valid.sum(-1, keepdims=True)
    return valid & ~((index == first[:, None]) & (n >= 2))


def rescale_nonzero(adv: ArrayLike, mask: ArrayLike | None = None, *,
                    atol: float = NONZERO_ATOL) -> jax.Array:
    """Each group's non-zero advantages times ``n / #non-zero``.

    ``n`` counts the group's valid entries (all G+1, the pivot or dropped rollout included, as
    the authors rescale before filtering); "non-zero" is ``|a| > atol``. Groups without a
    non-zero advantage and masked entries are returned unchanged (masked entries as 0).
    """
    adv = jnp.asarray(adv)
    if adv.ndim != 2:
        raise ValueError(f"advantages must have shape [B, G]; got shape {adv.shape}")
    if not atol >= 0:
        raise ValueError(f"atol={atol!r} must be >= 0")
    valid = _valid(adv, mask)
    nonzero = valid & (jnp.abs(adv) > atol)
    count = nonzero.sum(-1, keepdims=True).astype(adv.dtype)
    n = valid.sum(-1, keepdims=True).astype(adv.dtype)
    factor = jnp.where(count > 0, n / jnp.maximum(count, 1), jnp.ones_like(count))
    return jnp.where(valid, jnp.where(nonzero, adv * factor, adv), jnp.zeros_like(adv))


def grpo_drop_min_abs(rewards: ArrayLike, mask: ArrayLike | None = None, *, scale: str = "std",
                      eps: float = 1e-4, rescale: bool = False) -> advantages.Advantages:
    """The authors' compute-matched baseline: GRPO over all G+1 valid rollouts
    (``(r - mean) / (std + eps)``, sample std, eps 1e-4 as their code), the smallest-|reward|
    rollout left out of the loss (:func:`drop_min_abs_keep`); ``rescale`` applies
    :func:`rescale_nonzero` (not in the authors' baseline)."""
    adv = advantages.grpo(rewards, mask, scale=scale, eps=eps)
    if rescale:
        adv = rescale_nonzero(adv, mask)
    return advantages.Advantages(adv, drop_min_abs_keep(rewards, mask))


def mc_grpo_rescaled(rewards: ArrayLike, mask: ArrayLike | None = None, *, scale: str = "mad",
                     eps: float = 1e-3, rescale: bool = True) -> advantages.Advantages:
    """The authors' MC-GRPO: median-centred, ``scale`` ("mad" as their code, "std", "none"),
    pivot dropped (:func:`rlvr_lab.advantages.mc_grpo`), then :func:`rescale_nonzero`."""
    adv, keep = advantages.mc_grpo(rewards, mask, scale=scale, eps=eps)
    if rescale:
        adv = rescale_nonzero(adv, mask)
    return advantages.Advantages(adv, keep)
