"""E3 (rollout allocation and temperature) as a rollout stage, and E3's entropy-targeting loop.

``rollout="e3"`` in a trainer config, on any :class:`~rlvr_lab.train.rollout.Sampler`: E3's
rank-based allocation. Prompts are drawn uniformly, ranks come from each prompt's mean reward
so far, recomputed once per epoch (``steps_per_epoch``, default K // B), the range widening
per epoch from [G, G] by ``n_update`` to [``n_low``, ``n_high``]. Budget B·G.
``cap_at_max`` defaults to True here (groups are padded to ``n_high``); the authors' code
does not cap the floor term (see :mod:`rlvr_lab.papers.e3.allocation`). The state carries
the same counters as the CurES stage (:func:`rlvr_lab.papers.cures.stage.all_incorrect_fraction`).

:func:`make_temperature_train` is a separate, small training loop for E3's temperature rule
on the prompt bank (each prompt a softmax over V answers, sampled at temperature T), since
the bank trainer's temperature is static.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from rlvr_lab import advantages, metrics
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.models import tabular
from rlvr_lab.papers.cures.stage import GroupCounters
from rlvr_lab.papers.e3 import allocation as e3_alloc
from rlvr_lab.train.config import (boolean, choice, instance_of, open_unit_interval, option,
                                   positive, positive_int, rl_config, unit_interval)
from rlvr_lab.train import core
from rlvr_lab.train import rollout as rollout_stages
from rlvr_lab.train.rollout import RolloutStage, Sampler, StageShape


class E3State(NamedTuple):
    reward_sum: jnp.ndarray
    reward_count: jnp.ndarray
    rank: jnp.ndarray
    step: jnp.ndarray
    counters: GroupCounters


def _init(sampler: Sampler, shape: StageShape, *, n_update=2, n_low=4, n_high=12,
          steps_per_epoch=None, cap_at_max=True):
    e3_alloc.e3_schedule(0, shape.num_generations, n_update=n_update, n_low=n_low,
                         n_high=n_high)  # validates the range
    k = sampler.num_prompts
    zeros = jnp.zeros((k,), jnp.float32)
    return E3State(zeros, zeros, zeros, jnp.zeros((), jnp.int32), GroupCounters.zeros())


def _sample(key, sampler: Sampler, shape: StageShape, state, *, n_update=2, n_low=4, n_high=12,
               steps_per_epoch=None, cap_at_max=True):
    B, G = shape
    spe = max(sampler.num_prompts // B, 1) if steps_per_epoch is None else int(steps_per_epoch)
    k_prompt, k_sample = jax.random.split(key)
    epoch = state.step // spe
    n_min = jnp.maximum(G - epoch * n_update, n_low)
    n_max = jnp.minimum(G + epoch * n_update, n_high)
    prompts = sampler.choose(k_prompt, B)
    counts = e3_alloc.e3_counts(state.rank[prompts], B * G, n_min, n_max,
                                cap_at_max=cap_at_max)
    g_max = max(n_high, G)
    batch = rollout_stages.padded_groups(k_sample, sampler, prompts, counts, g_max)
    m = batch.mask.astype(jnp.float32)
    reward_sum = state.reward_sum.at[prompts].add((batch.rewards * m).sum(-1))
    reward_count = state.reward_count.at[prompts].add(m.sum(-1))
    end_of_epoch = (state.step + 1) % spe == 0
    new_rank = e3_alloc.e3_ranks(reward_sum / jnp.maximum(reward_count, 1), reward_count > 0)
    rank = jnp.where(end_of_epoch, new_rank, state.rank)
    counters = state.counters.add(batch.correct & batch.mask, batch.mask, batch.spent)
    return batch, E3State(reward_sum, reward_count, rank, state.step + 1, counters)


STAGE = RolloutStage(_init, _sample)


# ----------------------------------------------------------------------------- E3 temperature
TEMPERATURE_RULES = ("fixed", "e3")


@rl_config
class TemperatureConfig:
    """E3 temperature study on the prompt bank (one answer = one token of a V-way softmax).

    ``rule``: "fixed" (T stays ``init_temperature``) or "e3" (entropy targeting, target = the
    entropy at the first step, cosine-annealed to ``annealing_factor`` of it over the last
    ``annealing_ratio`` of training when ``annealing``). Policy-gradient update (GRPO
    advantages, on-policy) of ``log softmax(logits / T)``, Adam.
    """

    bank: PromptBankConfig = option(PromptBankConfig(), instance_of(PromptBankConfig))
    steps: int = option(200, positive_int)
    num_prompts: int = option(32, positive_int)
    num_generations: int = option(8, positive_int)
    learning_rate: float = option(0.05, positive)
    init_temperature: float = option(1.0, positive)
    rule: str = option("e3", choice(*TEMPERATURE_RULES))
    annealing: bool = option(True, boolean)
    annealing_ratio: float = option(0.4, unit_interval)
    annealing_factor: float = option(0.9, open_unit_interval)
    pass_k: int = option(8, positive_int)

    def __post_init__(self):
        if self.num_prompts > self.bank.num_prompts:
            raise ValueError(f"num_prompts={self.num_prompts} must be <= bank.num_prompts="
                             f"{self.bank.num_prompts}")
        if self.bank.vocab_size < 3:
            raise ValueError(f"bank.vocab_size={self.bank.vocab_size} must be >= 3 "
                             f"(the rule divides by ln V + ln ln V)")

    num_steps = property(lambda self: self.steps)
    batch_size = property(lambda self: self.num_prompts)


def make_temperature_train(config: TemperatureConfig
                           ) -> Callable[..., tuple[jax.Array, dict[str, jax.Array]]]:
    """``train(key, e3_rule=None) -> (logits, metrics)``; metrics ``[num_steps]``: ``temperature``,
    ``entropy`` (mean over the batch of the sampling policy's entropy, the quantity the rule
    reads), ``bank_entropy`` (same over all prompts), ``target_entropy``, ``accuracy`` and
    ``pass@k`` (exact, at the sampling temperature), ``accuracy_at_1`` and ``pass@k_at_1``
    (exact, at temperature 1: one common temperature for every rule),
    ``all_incorrect_frac``."""
    bank = prompt_bank.make_bank(config.bank)
    B, G, V = config.num_prompts, config.num_generations, config.bank.vocab_size
    opt = optax.adam(config.learning_rate)

    def step(carry, inp):
        logits, opt_state, temperature, target, use_e3 = carry
        key, t = inp
        k_prompt, k_sample = jax.random.split(key)
        prompts = rollout_stages.choose_prompts(k_prompt, bank.num_prompts, B)
        batch = rollout_stages.generate(k_sample, logits, bank, prompts, G, temperature)
        adv = advantages.grpo(batch.rewards)

        def loss_fn(logits, minibatch):
            logp = tabular.answer_log_prob(logits[minibatch["prompts"]], minibatch["answers"],
                                           temperature)
            return -(minibatch["adv"] * logp).mean(), {}

        # one on-policy step over the whole batch
        logits, opt_state, _ = core.update(
            key, logits, opt_state, {"prompts": prompts, "answers": batch.answers, "adv": adv},
            loss_fn, opt, num_epochs=1, num_minibatches=1)
        h_batch = tabular.entropy(logits[prompts], temperature).mean()
        p = rollout_stages.BankSampler(logits, bank, temperature).success_probability()
        # the code records the entropy of the first step as the target, then adapts
        target = jnp.where(t == 0, h_batch, target)
        goal = (e3_alloc.e3_target_entropy(t, target, config.steps,
                                           annealing_ratio=config.annealing_ratio,
                                           annealing_factor=config.annealing_factor)
                if config.annealing else target)
        new_t = e3_alloc.e3_temperature_update(temperature, h_batch, goal, V)
        new_t = jnp.where(use_e3 & (t > 0), new_t, temperature)
        _, all_w = rollout_stages.group_outcomes(batch.rewards)
        # the same policy read at one common temperature (1), to compare rules fairly
        p1 = rollout_stages.BankSampler(logits, bank, 1.0).success_probability()
        out = {"temperature": temperature, "entropy": h_batch,
               "bank_entropy": tabular.entropy(logits, temperature).mean(),
               "target_entropy": goal, "accuracy": p.mean(),
               f"pass@{config.pass_k}": metrics.pass_at_k_exact(p, config.pass_k).mean(),
               "accuracy_at_1": p1.mean(),
               f"pass@{config.pass_k}_at_1": metrics.pass_at_k_exact(p1, config.pass_k).mean(),
               "all_incorrect_frac": all_w.mean()}
        return (logits, opt_state, new_t, target, use_e3), out

    def train(key, e3_rule=None):
        """``e3_rule`` (a bool, may be traced) overrides ``config.rule``, so both rules can
        share one compilation."""
        use_e3 = jnp.asarray(config.rule == "e3" if e3_rule is None else e3_rule)
        t0 = jnp.asarray(config.init_temperature, jnp.float32)
        carry = (bank.logits0, opt.init(bank.logits0), t0, jnp.zeros((), jnp.float32), use_e3)
        keys = jax.random.split(key, config.steps)
        (logits, *_), metrics = jax.lax.scan(step, carry, (keys, jnp.arange(config.steps)))
        return logits, metrics

    return train
