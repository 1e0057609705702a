"""CurES and E3 rollout stages for the bandit trainer, and E3's entropy-targeting loop.

Importing this module registers two rollout stages (``BanditConfig.rollout``):

``"cures"`` — which prompts and how many rollouts each, from a Beta posterior per prompt
  (:mod:`rlvr_lab.curriculum`). Options (``BanditConfig.rollout_options``):
  ``sampling`` "uniform" | "cures" (softmax of sqrt(p_hat(1-p_hat)) / ``sampling_temperature``)
  | "cures_code" (the authors' t_i = 100 (Acc_i + 1), nearly uniform);
  ``allocation`` "uniform" (G each) | "neyman" (n_i ∝ sqrt(p_hat(1-p_hat)), at least
  ``min_per_prompt``, at most ``max_per_prompt`` (default 3G), total exactly B·G);
  ``init_rollouts`` (4; CurES' stage 0, charged to ``spent`` at the first step);
  ``decay`` (1.0) of the counts; ``dynamic_filter`` (False) masks all-equal groups without
  refilling (same spend). With ``sampling="uniform", allocation="uniform"`` and no
  initialisation this is plain GRPO sampling.

``"e3"`` — E3's rank-based allocation: prompts drawn uniformly, ranks from each prompt's mean
  reward so far, recomputed once per epoch (``steps_per_epoch``, default K // B), the range
  widening per epoch from [G, G] by ``n_update`` to [``n_low``, ``n_high``]. Budget B·G.
  ``cap_at_max`` defaults to True here (groups are padded to ``n_high``); the authors' code
  does not cap the floor term (see :mod:`rlvr_lab.allocation.e3`).

Both stages carry counters in their state (``groups``, ``all_incorrect``, ``all_correct``,
``spent``) so the fraction of all-incorrect groups over a run can be read from the final
state (the trainer records no per-stage metrics).

Note on weighting: the trainer aggregates the loss over rollouts ("token-mean"), so a prompt
with more rollouts weighs more in the update — as in the verl-based CurES and E3 code.

:func:`make_temperature_train` is a separate, small training loop for E3's temperature rule
on the prompt bank (each prompt a softmax over V answers, sampled at temperature T), since
the bandit trainer's temperature is static.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rlvr_lab import advantages, curriculum
from rlvr_lab._registry import check_choice
from rlvr_lab.allocation import cures as cures_alloc
from rlvr_lab.allocation import e3 as e3_alloc
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.models import tabular
from rlvr_lab.train import rollout as rollout_stages

SAMPLINGS = ("uniform", "cures", "cures_code")
ALLOCATIONS = ("uniform", "neyman")


class GroupCounters(NamedTuple):
    """Cumulative counts over a run (read them from the final rollout state)."""

    groups: jnp.ndarray
    all_incorrect: jnp.ndarray
    all_correct: jnp.ndarray
    spent: jnp.ndarray

    @classmethod
    def zeros(cls):
        return cls(*(jnp.zeros((), jnp.float32) for _ in range(4)))

    def add(self, correct, mask, spent):
        all_c, all_w = curriculum.group_outcomes(correct.astype(jnp.float32), mask)
        valid = mask.any(-1)
        return GroupCounters(self.groups + valid.sum(), self.all_incorrect + all_w.sum(),
                             self.all_correct + all_c.sum(), self.spent + spent)


class CuresState(NamedTuple):
    posterior: curriculum.BetaPosterior
    initialized: jnp.ndarray
    counters: GroupCounters


def _success_probability(logits, bank, temperature):
    return jnp.sum(jnp.where(bank.correct, jnp.exp(tabular.log_policy(logits, temperature)), 0.0),
                   axis=-1)


def _padded_groups(key, logits, bank, prompts, counts, g_max, temperature):
    """``g_max`` answers per prompt, the first ``counts[i]`` valid; ``spent = sum counts``."""
    batch = rollout_stages.generate(key, logits, bank, prompts, g_max, temperature)
    mask = jnp.arange(g_max)[None, :] < counts[:, None]
    return batch._replace(mask=mask, spent=counts.sum().astype(jnp.int32))


def _check_cures_options(sampling, allocation, sampling_temperature, init_rollouts,
                         min_per_prompt, decay):
    check_choice("sampling", sampling, SAMPLINGS)
    check_choice("allocation", allocation, ALLOCATIONS)
    if not sampling_temperature > 0:
        raise ValueError(f"sampling_temperature={sampling_temperature!r} must be > 0")
    if int(init_rollouts) < 0 or int(min_per_prompt) < 1:
        raise ValueError(f"init_rollouts={init_rollouts!r} must be >= 0 and "
                         f"min_per_prompt={min_per_prompt!r} >= 1")
    if not 0 <= decay <= 1:
        raise ValueError(f"decay={decay!r} must lie in [0, 1]")


def _cures_init(bank, config, *, sampling="cures", allocation="neyman",
                sampling_temperature=0.05, init_rollouts=curriculum.CURES_INIT_ROLLOUTS,
                min_per_prompt=2, max_per_prompt=None, decay=1.0, dynamic_filter=False):
    _check_cures_options(sampling, allocation, sampling_temperature, init_rollouts,
                         min_per_prompt, decay)
    g_max = 3 * config.num_generations if max_per_prompt is None else int(max_per_prompt)
    if allocation == "neyman" and not (min_per_prompt <= config.num_generations <= g_max):
        raise ValueError(f"min_per_prompt={min_per_prompt} <= num_generations="
                         f"{config.num_generations} <= max_per_prompt={g_max} is required")
    return CuresState(curriculum.init_posterior(bank.num_prompts),
                      jnp.asarray(init_rollouts == 0), GroupCounters.zeros())


def _cures_sample(key, logits, bank, config, state, *, sampling="cures", allocation="neyman",
                  sampling_temperature=0.05, init_rollouts=curriculum.CURES_INIT_ROLLOUTS,
                  min_per_prompt=2, max_per_prompt=None, decay=1.0, dynamic_filter=False):
    B, G = config.batch_size, config.num_generations
    k_init, k_prompt, k_sample = jax.random.split(key, 3)
    # CurES stage 0: init_rollouts per prompt under the initial policy, charged once
    p_now = _success_probability(logits, bank, config.temperature)
    fresh, init_spent = curriculum.init_posterior_from_rollouts(k_init, p_now, init_rollouts)
    posterior = jax.tree.map(lambda old, new: jnp.where(state.initialized, old, new),
                             state.posterior, fresh)
    extra = jnp.where(state.initialized, 0, init_spent)
    p_hat = curriculum.posterior_mean(posterior)

    if sampling == "uniform":
        prompts = rollout_stages.choose_prompts(k_prompt, bank.num_prompts, B)
    else:
        q = (curriculum.cures_code_prompt_probs(posterior) if sampling == "cures_code"
             else curriculum.cures_prompt_probs(p_hat, sampling_temperature))
        prompts = curriculum.sample_prompts(k_prompt, q, B)

    if allocation == "uniform":
        g_max = G
        counts = jnp.full((B,), G, jnp.int32)
    else:
        g_max = 3 * G if max_per_prompt is None else int(max_per_prompt)
        counts = cures_alloc.cures_allocation(p_hat[prompts], B * G,
                                              min_per_prompt=int(min_per_prompt),
                                              max_per_prompt=g_max)
    batch = _padded_groups(k_sample, logits, bank, prompts, counts, g_max, config.temperature)
    correct = prompt_bank.is_correct(bank, prompts, batch.answers)
    posterior = curriculum.update_posterior(posterior, prompts, correct, batch.mask,
                                            decay=decay)
    counters = state.counters.add(correct, batch.mask, batch.spent + extra)
    if dynamic_filter:
        batch = batch._replace(mask=curriculum.dynamic_sampling_filter(batch.rewards, batch.mask))
    batch = batch._replace(spent=(batch.spent + extra).astype(jnp.int32))
    return batch, CuresState(posterior, jnp.asarray(True), counters)


class E3State(NamedTuple):
    reward_sum: jnp.ndarray
    reward_count: jnp.ndarray
    rank: jnp.ndarray
    step: jnp.ndarray
    counters: GroupCounters


def _e3_init(bank, config, *, n_update=2, n_low=4, n_high=12, steps_per_epoch=None,
             cap_at_max=True):
    e3_alloc.e3_schedule(0, config.num_generations, n_update=n_update, n_low=n_low,
                         n_high=n_high)  # validates the range
    k = bank.num_prompts
    zeros = jnp.zeros((k,), jnp.float32)
    return E3State(zeros, zeros, zeros, jnp.zeros((), jnp.int32), GroupCounters.zeros())


def _e3_sample(key, logits, bank, config, state, *, n_update=2, n_low=4, n_high=12,
               steps_per_epoch=None, cap_at_max=True):
    B, G = config.batch_size, config.num_generations
    spe = max(bank.num_prompts // B, 1) if steps_per_epoch is None else int(steps_per_epoch)
    k_prompt, k_sample = jax.random.split(key)
    epoch = state.step // spe
    n_min = jnp.maximum(G - epoch * n_update, n_low)
    n_max = jnp.minimum(G + epoch * n_update, n_high)
    prompts = rollout_stages.choose_prompts(k_prompt, bank.num_prompts, B)
    counts = e3_alloc.e3_counts(state.rank[prompts], B * G, n_min, n_max,
                                cap_at_max=cap_at_max)
    g_max = max(n_high, G)
    batch = _padded_groups(k_sample, logits, bank, prompts, counts, g_max, config.temperature)
    m = batch.mask.astype(jnp.float32)
    reward_sum = state.reward_sum.at[prompts].add((batch.rewards * m).sum(-1))
    reward_count = state.reward_count.at[prompts].add(m.sum(-1))
    end_of_epoch = (state.step + 1) % spe == 0
    new_rank = e3_alloc.e3_ranks(reward_sum / jnp.maximum(reward_count, 1), reward_count > 0)
    rank = jnp.where(end_of_epoch, new_rank, state.rank)
    correct = prompt_bank.is_correct(bank, prompts, batch.answers)
    counters = state.counters.add(correct, batch.mask, batch.spent)
    return batch, E3State(reward_sum, reward_count, rank, state.step + 1, counters)


def _register(name, stage):
    if name not in rollout_stages._STAGES:
        rollout_stages.register(name, stage)


_register("cures", rollout_stages.RolloutStage(_cures_init, _cures_sample))
_register("e3", rollout_stages.RolloutStage(_e3_init, _e3_sample))


def all_incorrect_fraction(rollout_state):
    """Fraction of all-incorrect groups over a run, from a stage's final state."""
    c = rollout_state.counters
    return c.all_incorrect / jnp.maximum(c.groups, 1)


# ----------------------------------------------------------------------------- E3 temperature
TEMPERATURE_RULES = ("fixed", "e3")


@dataclass(frozen=True)
class TemperatureConfig:
    """E3 temperature study on the prompt bank (one answer = one token of a V-way softmax).

    ``rule``: "fixed" (T stays ``init_temperature``) or "e3" (entropy targeting, target = the
    entropy at the first step, cosine-annealed to ``annealing_factor`` of it over the last
    ``annealing_ratio`` of training when ``annealing``). Policy-gradient update (GRPO
    advantages, on-policy) of ``log softmax(logits / T)``, Adam.
    """

    bank: PromptBankConfig = field(default_factory=PromptBankConfig)
    num_steps: int = 200
    batch_size: int = 32
    num_generations: int = 8
    learning_rate: float = 0.05
    init_temperature: float = 1.0
    rule: str = "e3"
    annealing: bool = True
    annealing_ratio: float = 0.4
    annealing_factor: float = 0.9
    pass_k: int = 8

    def __post_init__(self):
        for name in ("num_steps", "batch_size", "num_generations", "pass_k"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name}={v!r} must be a positive integer")
        if self.batch_size > self.bank.num_prompts:
            raise ValueError(f"batch_size={self.batch_size} must be <= bank.num_prompts="
                             f"{self.bank.num_prompts}")
        if self.bank.vocab_size < 3:
            raise ValueError(f"bank.vocab_size={self.bank.vocab_size} must be >= 3 "
                             f"(the rule divides by ln V + ln ln V)")
        check_choice("rule", self.rule, TEMPERATURE_RULES)
        for name in ("learning_rate", "init_temperature"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)!r} must be > 0")
        if not 0 <= self.annealing_ratio <= 1 or not 0 < self.annealing_factor <= 1:
            raise ValueError(f"annealing_ratio={self.annealing_ratio!r} must lie in [0, 1] and "
                             f"annealing_factor={self.annealing_factor!r} in (0, 1]")

    def replace(self, **changes) -> "TemperatureConfig":
        return dataclasses.replace(self, **changes)


def make_temperature_train(config: TemperatureConfig):
    """``train(key) -> (logits, metrics)``; metrics ``[num_steps]``: ``temperature``,
    ``entropy`` (mean over the batch of the sampling policy's entropy, the quantity the rule
    reads), ``bank_entropy`` (same over all prompts), ``target_entropy``, ``accuracy`` and
    ``pass@k`` (exact, at the sampling temperature), ``all_incorrect_frac``."""
    bank = prompt_bank.make_bank(config.bank)
    B, G, V = config.batch_size, config.num_generations, config.bank.vocab_size
    opt = optax.adam(config.learning_rate)

    def loss_fn(logits, prompts, answers, adv, temperature):
        logp = tabular.answer_log_prob(logits[prompts], answers, temperature)
        return -(adv * logp).mean()

    grad_fn = jax.grad(loss_fn)

    def step(carry, inp):
        logits, opt_state, temperature, target = carry
        key, t = inp
        k_prompt, k_sample = jax.random.split(key)
        prompts = rollout_stages.choose_prompts(k_prompt, bank.num_prompts, B)
        batch = rollout_stages.generate(k_sample, logits, bank, prompts, G, temperature)
        adv = advantages.grpo(batch.rewards)
        grads = grad_fn(logits, prompts, batch.answers, adv, temperature)
        updates, opt_state = opt.update(grads, opt_state, logits)
        logits = optax.apply_updates(logits, updates)
        h_batch = tabular.entropy(logits[prompts], temperature).mean()
        p = _success_probability(logits, bank, temperature)
        # the code records the entropy of the first step as the target, then adapts
        target = jnp.where(t == 0, h_batch, target)
        goal = (e3_alloc.e3_target_entropy(t, target, config.num_steps,
                                           annealing_ratio=config.annealing_ratio,
                                           annealing_factor=config.annealing_factor)
                if config.annealing else target)
        new_t = e3_alloc.e3_temperature_update(temperature, h_batch, goal, V)
        new_t = temperature if config.rule == "fixed" else jnp.where(t == 0, temperature, new_t)
        _, all_w = curriculum.group_outcomes(batch.rewards)
        out = {"temperature": temperature, "entropy": h_batch,
               "bank_entropy": tabular.entropy(logits, temperature).mean(),
               "target_entropy": goal, "accuracy": p.mean(),
               f"pass@{config.pass_k}": (-jnp.expm1(config.pass_k * jnp.log1p(-p))).mean(),
               "all_incorrect_frac": all_w.mean()}
        return (logits, opt_state, new_t, target), out

    def train(key):
        t0 = jnp.asarray(config.init_temperature, jnp.float32)
        carry = (bank.logits0, opt.init(bank.logits0), t0, jnp.zeros((), jnp.float32))
        keys = jax.random.split(key, config.num_steps)
        (logits, *_), metrics = jax.lax.scan(step, carry, (keys, jnp.arange(config.num_steps)))
        return logits, metrics

    return train
