"""Rollout stages for the bandit trainer: which prompts, how many rollouts, which samples.

A stage is a :class:`RolloutStage` registered by name. Under ``jit`` shapes are fixed, so a
stage returns groups padded to ``[B, G_max]`` with a validity ``mask``, plus the number of
rollouts it actually generated (``spent``) so that budgets can be compared honestly.

``init(bank, config, **options) -> state`` and
``sample(key, logits, bank, config, state, **options) -> (Rollout, state)``;
``options`` come from ``BanditConfig.rollout_options``. Register a new stage from your own
module with :func:`register`.
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from rlvr_lab._registry import Registry
from rlvr_lab.curriculum import informative_groups
from rlvr_lab.envs import prompt_bank
from rlvr_lab.models import tabular


class Rollout(NamedTuple):
    prompts: jnp.ndarray        # [B] int prompt indices
    answers: jnp.ndarray        # [B, G_max] int
    rewards: jnp.ndarray        # [B, G_max] float
    mask: jnp.ndarray           # [B, G_max] bool, valid rollouts
    behav_log_prob: jnp.ndarray  # [B, G_max] log-prob under the sampling policy
    spent: jnp.ndarray          # scalar: rollouts generated to produce this batch


class RolloutStage(NamedTuple):
    init: Callable[..., Any]
    sample: Callable[..., tuple]


_STAGES: Registry = Registry("rollout stage")


def register(name: str, stage: RolloutStage) -> RolloutStage:
    return _STAGES.register(name, stage)


def get(name: str) -> RolloutStage:
    _load_extensions()
    return _STAGES.get(name)


def names() -> list[str]:
    _load_extensions()
    return _STAGES.names()


# modules that register more stages on import; loaded on first lookup so names like "dars"
# work in a config without importing the module by hand
EXTENSION_MODULES = ("rlvr_lab.train.dars", "rlvr_lab.train.curriculum_stage")


def _load_extensions():
    import importlib
    import importlib.util

    for mod in EXTENSION_MODULES:
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod)


def shuffle(key, n: int):
    """A uniformly random permutation of ``range(n)`` without sorting.

    Each element's position is its rank among 32-bit random keys (ties broken by index, so
    the ranks are always distinct), then one scatter inverts the ranks. For the small n used
    here (prompts, groups) the O(n^2) comparisons are 2-3x cheaper under vmap on CPU than
    ``jax.random.permutation``'s sorts, the slowest ops of the trainer.
    """
    bits = jax.random.bits(key, (n,), jnp.uint32)
    idx = jnp.arange(n)
    before = (bits[None, :] < bits[:, None]) | ((bits[None, :] == bits[:, None])
                                                & (idx[None, :] < idx[:, None]))
    return jnp.zeros(n, idx.dtype).at[before.sum(-1)].set(idx)


def choose_prompts(key, num_prompts: int, batch_size: int):
    """``batch_size`` distinct prompt indices, uniformly (all prompts in order if B == K)."""
    if batch_size == num_prompts:
        return jnp.arange(num_prompts)
    return shuffle(key, num_prompts)[:batch_size]


def generate(key, logits, bank, prompts, num_samples: int, temperature=1.0) -> Rollout:
    """Sample ``num_samples`` answers for each prompt and score them."""
    rows = logits[prompts]
    answers = tabular.sample(key, rows, num_samples, temperature)
    rewards = prompt_bank.rewards_of(bank, prompts, answers)
    logp = tabular.answer_log_prob(rows, answers, temperature)
    mask = jnp.ones(answers.shape, bool)
    return Rollout(prompts, answers, rewards, mask, logp,
                   jnp.asarray(answers.size, jnp.int32))


def _no_state(bank, config, **options):
    return ()


def _uniform(key, logits, bank, config, state, **options):
    k_prompt, k_sample = jax.random.split(key)
    prompts = choose_prompts(k_prompt, bank.num_prompts, config.batch_size)
    return generate(k_sample, logits, bank, prompts, config.num_generations,
                    config.temperature), state


def _dynamic_sampling(key, logits, bank, config, state, *, max_rounds: int = 3, **options):
    """DAPO dynamic sampling: draw up to ``max_rounds`` batches of B prompts, keep the first B
    groups whose rewards are not all equal; if too few, the rest stay masked out. ``spent``
    counts only the rounds needed to fill the batch (all of them when it never fills)."""
    B, G = config.batch_size, config.num_generations
    keys = jax.random.split(key, max_rounds)

    def one_round(k):
        k_prompt, k_sample = jax.random.split(k)
        prompts = choose_prompts(k_prompt, bank.num_prompts, B)
        return generate(k_sample, logits, bank, prompts, G, config.temperature)

    rounds = jax.vmap(one_round)(keys)
    flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]),
                        rounds._replace(spent=jnp.zeros((max_rounds, 1))))
    good = informative_groups(flat.rewards, flat.mask)
    order = jnp.argsort(~good, stable=True)[:B]
    chosen_good = good[order]
    n_good_before = jnp.cumsum(good)
    # rounds needed: the round holding the B-th informative group, or all rounds
    last = jnp.where(n_good_before[-1] >= B, jnp.argmax(n_good_before >= B), good.shape[0] - 1)
    spent = ((last // B) + 1) * B * G
    out = Rollout(flat.prompts[order], flat.answers[order], flat.rewards[order],
                  flat.mask[order] & chosen_good[:, None], flat.behav_log_prob[order],
                  spent.astype(jnp.int32))
    return out, state


register("uniform", RolloutStage(_no_state, _uniform))
register("dynamic_sampling", RolloutStage(_no_state, _dynamic_sampling))
