"""Extra advantage estimators for the MC-GRPO study (registered by :mod:`rlvr_lab.papers.mc_grpo`).

``grpo_drop_one`` is the compute-matched baseline of the MC-GRPO repository: the group holds
G+1 rollouts like MC-GRPO, the baseline is the mean of all G+1 rewards (the same information
the median uses), and one rollout — the last valid one; rollouts are i.i.d., so a fixed index
is a uniformly random one — is excluded from the loss, so G rollouts are backpropagated, the
same update cost as MC-GRPO and as plain G-rollout GRPO.
"""
from __future__ import annotations

import jax.numpy as jnp

from rlvr_lab import advantages

__all__ = ["grpo_drop_one"]


def grpo_drop_one(rewards, mask=None, *, scale: str = "std", eps: float = 1e-6):
    """GRPO advantages over all valid rollouts; the last valid rollout is left out of the loss.

    ``scale`` as in :func:`rlvr_lab.advantages.grpo` ("std" | "none" | "batch"). Returns
    ``(adv [B, G+1], keep [B, G+1])`` like ``mc_grpo``; ``keep`` is False at the dropped
    rollout and at masked entries. A group with one valid rollout keeps it with A=0.
    """
    adv = advantages.grpo(rewards, mask, scale=scale, eps=eps)
    rewards = jnp.asarray(rewards)
    valid = (jnp.ones(rewards.shape, bool) if mask is None else jnp.asarray(mask, bool))
    index = jnp.arange(rewards.shape[-1])[None, :]
    last = jnp.max(jnp.where(valid, index, -1), axis=-1, keepdims=True)
    n = valid.sum(-1, keepdims=True)
    keep = valid & ~((index == last) & (n >= 2))
    return advantages.Advantages(adv, keep)
