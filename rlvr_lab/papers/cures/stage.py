"""CurES rollout stage: which prompts and how many rollouts each, from a Beta posterior.

``rollout="cures"`` in a trainer config, on any :class:`~rlvr_lab.train.rollout.Sampler`.
Options (``rollout_options``):
``sampling`` "uniform" | "cures" (softmax of sqrt(p_hat(1-p_hat)) / ``sampling_temperature``)
| "cures_code" (the authors' t_i = 100 (Acc_i + 1), nearly uniform);
``allocation`` "uniform" (G each) | "neyman" (n_i ∝ sqrt(p_hat(1-p_hat)), at least
``min_per_prompt``, at most ``max_per_prompt`` (default 3G), total exactly B·G);
``init_rollouts`` (4; CurES' stage 0, charged to ``spent`` at the first step; it needs the
policy's exact success probabilities, so on the transformer use 0 — a flat Beta(1, 1) prior);
``decay`` (1.0) of the counts; ``dynamic_filter`` (False) masks all-equal groups without
refilling (same spend). With ``sampling="uniform", allocation="uniform"`` and no
initialisation this is plain GRPO sampling.

The stage state carries counters (``groups``, ``all_incorrect``, ``all_correct``, ``spent``)
so the fraction of all-incorrect groups over a run can be read from the final state.

Note on weighting: the trainer aggregates the loss over rollouts ("token-mean"), so a prompt
with more rollouts weighs more in the update — as in the verl-based CurES code.
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab._registry import check_choice
from rlvr_lab.papers.cures import posterior as post
from rlvr_lab.papers.cures.allocation import cures_allocation
from rlvr_lab.train import rollout as rollout_stages
from rlvr_lab.train.rollout import RolloutStage, Sampler, StageShape

SAMPLINGS = ("uniform", "cures", "cures_code")
ALLOCATIONS = ("uniform", "neyman")


class GroupCounters(NamedTuple):
    """Cumulative counts over a run (read them from the final rollout state)."""

    groups: jnp.ndarray
    all_incorrect: jnp.ndarray
    all_correct: jnp.ndarray
    spent: jnp.ndarray

    @classmethod
    def zeros(cls) -> GroupCounters:
        return cls(*(jnp.zeros((), jnp.float32) for _ in range(4)))

    def add(self, correct: jax.Array, mask: jax.Array, spent: ArrayLike) -> GroupCounters:
        all_c, all_w = rollout_stages.group_outcomes(correct.astype(jnp.float32), mask)
        valid = mask.any(-1)
        return GroupCounters(self.groups + valid.sum(), self.all_incorrect + all_w.sum(),
                             self.all_correct + all_c.sum(), self.spent + spent)


class HasCounters(Protocol):
    """A stage state carrying :class:`GroupCounters` (the CurES and the E3 stage's)."""

    counters: GroupCounters


def all_incorrect_fraction(rollout_state: HasCounters) -> jax.Array:
    """Fraction of all-incorrect groups over a run, from a CurES or E3 stage's final state."""
    c = rollout_state.counters
    return c.all_incorrect / jnp.maximum(c.groups, 1)


class CuresState(NamedTuple):
    posterior: post.BetaPosterior
    initialized: jnp.ndarray
    counters: GroupCounters


def _check_options(shape, sampling, allocation, sampling_temperature, init_rollouts,
                   min_per_prompt, max_per_prompt, decay):
    check_choice("sampling", sampling, SAMPLINGS)
    check_choice("allocation", allocation, ALLOCATIONS)
    if not sampling_temperature > 0:
        raise ValueError(f"sampling_temperature={sampling_temperature!r} must be > 0")
    if int(init_rollouts) < 0 or int(min_per_prompt) < 1:
        raise ValueError(f"init_rollouts={init_rollouts!r} must be >= 0 and "
                         f"min_per_prompt={min_per_prompt!r} >= 1")
    if not 0 <= decay <= 1:
        raise ValueError(f"decay={decay!r} must lie in [0, 1]")
    g_max = 3 * shape.num_generations if max_per_prompt is None else int(max_per_prompt)
    if allocation == "neyman" and not (min_per_prompt <= shape.num_generations <= g_max):
        raise ValueError(f"min_per_prompt={min_per_prompt} <= num_generations="
                         f"{shape.num_generations} <= max_per_prompt={g_max} is required")
    return g_max


def _init(sampler: Sampler, shape: StageShape, *, sampling="cures", allocation="neyman",
          sampling_temperature=0.05, init_rollouts=post.CURES_INIT_ROLLOUTS,
          min_per_prompt=2, max_per_prompt=None, decay=1.0, dynamic_filter=False):
    _check_options(shape, sampling, allocation, sampling_temperature, init_rollouts,
                   min_per_prompt, max_per_prompt, decay)
    if init_rollouts and sampler.success_probability() is None:
        raise ValueError(f"init_rollouts={init_rollouts!r} needs the policy's exact success "
                         "probabilities, which this sampler does not have; use 0")
    return CuresState(post.init_posterior(sampler.num_prompts),
                      jnp.asarray(init_rollouts == 0), GroupCounters.zeros())


def _sample(key, sampler: Sampler, shape: StageShape, state: CuresState, *, sampling="cures",
            allocation="neyman", sampling_temperature=0.05,
            init_rollouts=post.CURES_INIT_ROLLOUTS, min_per_prompt=2, max_per_prompt=None,
            decay=1.0, dynamic_filter=False):
    B, G = shape
    k_init, k_prompt, k_sample = jax.random.split(key, 3)
    posterior, extra = state.posterior, jnp.zeros((), jnp.int32)
    if init_rollouts:
        # CurES stage 0: init_rollouts per prompt under the initial policy, charged once
        fresh, init_spent = post.init_posterior_from_rollouts(
            k_init, sampler.success_probability(), init_rollouts)
        posterior = jax.tree.map(lambda old, new: jnp.where(state.initialized, old, new),
                                 state.posterior, fresh)
        extra = jnp.where(state.initialized, 0, init_spent)
    p_hat = post.posterior_mean(posterior)

    if sampling == "uniform":
        prompts = sampler.choose(k_prompt, B)
    else:
        q = (post.cures_code_prompt_probs(posterior) if sampling == "cures_code"
             else post.cures_prompt_probs(p_hat, sampling_temperature))
        prompts = post.sample_prompts(k_prompt, q, B)

    if allocation == "uniform":
        g_max = G
        counts = jnp.full((B,), G, jnp.int32)
    else:
        g_max = 3 * G if max_per_prompt is None else int(max_per_prompt)
        counts = cures_allocation(p_hat[prompts], B * G, min_per_prompt=int(min_per_prompt),
                                  max_per_prompt=g_max)
    batch = rollout_stages.padded_groups(k_sample, sampler, prompts, counts, g_max)
    correct = batch.correct & batch.mask
    posterior = post.update_posterior(posterior, prompts, correct, batch.mask, decay=decay)
    counters = state.counters.add(correct, batch.mask, batch.spent + extra)
    if dynamic_filter:
        batch = batch._replace(mask=rollout_stages.dynamic_sampling_filter(batch.rewards,
                                                                           batch.mask))
    batch = batch._replace(spent=(batch.spent + extra).astype(jnp.int32))
    return batch, CuresState(posterior, jnp.asarray(True), counters)


STAGE = RolloutStage(_init, _sample)
