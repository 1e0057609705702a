"""BroRL's large-N rollouts as a rollout stage: a ProRL-style phase at ``n_small`` rollouts per
prompt, then the group size switches to ``num_generations`` (the broadened N).

``rollout="brorl_schedule"`` with ``rollout_options=(("n_small", 16), ("switch_step", 100))``
on any :class:`~rlvr_lab.train.rollout.Sampler`. Before the switch the groups are padded to
``[B, num_generations]`` with ``mask=False``; the draws are the uniform stage's with
``num_generations = n_small`` (same keys), so a run that switches shares its first phase with
one that does not. The state is the step counter.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from rlvr_lab.train.rollout import Rollout, RolloutStage, Sampler, StageShape


def _init(sampler, shape, **options):
    return jnp.zeros((), jnp.int32)           # step counter (not batched under vmap)


def _pad_groups(r: Rollout, width: int) -> Rollout:
    """Pad every ``[B, n, ...]`` leaf to ``[B, width, ...]``; padded rollouts are invalid."""
    def pad(x):
        widths = [(0, 0), (0, width - x.shape[1])] + [(0, 0)] * (x.ndim - 2)
        return jnp.pad(x, widths)
    return jax.tree.map(pad, r._replace(spent=None, prompts=None))._replace(
        prompts=r.prompts, spent=r.spent)


def _sample(key, sampler: Sampler, shape: StageShape, step, *, n_small: int = 16,
            switch_step: int = 0):
    """``n_small`` rollouts per prompt before ``switch_step``, ``num_generations`` after."""
    n_big = shape.num_generations
    if not 1 <= n_small <= n_big:
        raise ValueError(f"n_small={n_small!r} must be in [1, num_generations={n_big}]")
    k_prompt, k_sample = jax.random.split(key)
    prompts = sampler.choose(k_prompt, shape.batch_size)

    def small(_):
        return _pad_groups(sampler.sample(k_sample, prompts, n_small), n_big)

    def big(_):
        return sampler.sample(k_sample, prompts, n_big)

    return jax.lax.cond(step < switch_step, small, big, None), step + 1


STAGE = RolloutStage(_init, _sample)
