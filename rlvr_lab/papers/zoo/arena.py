"""Every (estimator, policy loss, G) arm and seed of the zoo in one compiled training loop.

The bank's tabular policy (:mod:`rlvr_lab.envs.prompt_bank`), Adam on the logits, and the
update core of every trainer (:func:`rlvr_lab.train.core.update`). One step spends the same
number of rollouts at every group size: ``ROLLOUTS_PER_STEP / G`` prompts of ``G`` rollouts
each, drawn into a fixed ``[B_max, G_max]`` buffer whose unused rows and columns are masked
(every estimator and aggregation of rlvr_lab treats a masked rollout as absent). The
estimator and the loss are picked by traced indices (``lax.switch``), so all arms, group
sizes and seeds run under one ``vmap`` and one compilation.

Each step takes ``num_epochs`` full-batch optimiser steps on the same rollouts: from the
second on the policy is off its behaviour policy, which is where the losses' clips, gates and
covariance rules act (one on-policy step would make them all the plain policy gradient).
Each loss runs with its own defaults (its paper's), aggregated by ``token-mean``.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rlvr_lab import advantages, losses
from rlvr_lab.envs import prompt_bank
from rlvr_lab.models import tabular
from rlvr_lab.train import core
from rlvr_lab.utils import jit_cpu_options

ESTIMATORS = ("grpo", "dr_grpo", "rloo", "reinforce_plus_plus", "reinforce_plus_plus_baseline",
              "opo", "gpg", "grpo_passk")
LOSSES = ("vanilla", "gpg", "clip_cov", "kl_cov", "geo_mean", "sapo", "cispo", "gspo")
GROUPS = (2, 4, 8)
ROLLOUTS_PER_STEP = 64


class Arm(NamedTuple):
    """An estimator and a policy loss, by registered name."""

    estimator: str
    loss: str

    @property
    def label(self) -> str:
        return f"{self.estimator} + {self.loss}"


def arms() -> tuple[Arm, ...]:
    """Every estimator with verl's ``vanilla`` PPO loss, every loss with GRPO's advantages,
    and GPG as its paper runs it (its advantages and its plain policy-gradient loss)."""
    return (tuple(Arm(e, "vanilla") for e in ESTIMATORS)
            + tuple(Arm("grpo", loss) for loss in LOSSES[1:]) + (Arm("gpg", "gpg"),))


class ArenaConfig(NamedTuple):
    bank: prompt_bank.PromptBankConfig
    steps: int
    learning_rate: float = 0.05
    num_epochs: int = 4


def branches(arms: tuple[Arm, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The estimators and losses ``arms`` use, in the order of :data:`ESTIMATORS` and
    :data:`LOSSES`: a run compiles only these branches (under ``vmap`` a switch on a batched
    index computes every branch), so a subset of the arms costs a subset of the time."""
    return (tuple(e for e in ESTIMATORS if any(a.estimator == e for a in arms)),
            tuple(n for n in LOSSES if any(a.loss == n for a in arms)))


def _estimate(index, rewards, mask, names=ESTIMATORS):
    fns = [lambda r, m, n=name: advantages.compute(n, r, m).adv for name in names]
    return jax.lax.switch(index, fns, rewards, mask)


def _token_loss(index, log_prob, old, adv, mask, names=LOSSES):
    fns = [lambda lp, o, a, m, n=name: core.policy_loss(n, core.LossOptions())(lp, o, a, m)
           for name in names]
    return jax.lax.switch(index, fns, log_prob, old, adv, mask)


def make_train(config: ArenaConfig, estimators=ESTIMATORS, loss_names=LOSSES):
    """``train(key, estimator_index, loss_index, group) -> accuracy [steps + 1]`` (the exact
    mean success probability over the bank before each step and after the last; the indices
    point into ``estimators`` and ``loss_names``)."""
    bank = prompt_bank.make_bank(config.bank)
    num_prompts, vocab = bank.logits0.shape
    g_max, b_max = max(GROUPS), ROLLOUTS_PER_STEP // min(GROUPS)
    optimizer = optax.adam(config.learning_rate)

    def accuracy(logits):
        return prompt_bank.success_probability(logits, bank.correct).mean()

    def train(key, est, loss, group):
        rows = jnp.arange(b_max) < ROLLOUTS_PER_STEP // group
        mask = rows[:, None] & (jnp.arange(g_max)[None, :] < group)

        def step(carry, k):
            logits, opt_state = carry
            k_prompts, k_answers = jax.random.split(k)
            prompts = jax.random.choice(k_prompts, num_prompts, (b_max,), replace=False)
            answers = jax.random.categorical(k_answers, logits[prompts][:, None, :],
                                             shape=(b_max, g_max))
            rewards = prompt_bank.rewards_of(bank, prompts, answers)
            adv = _estimate(est, rewards, mask, estimators).reshape(-1, 1).astype(jnp.float32)
            old = tabular.answer_log_prob(logits[prompts], answers).reshape(-1, 1)
            keep = mask.reshape(-1, 1)

            def loss_fn(params, _):
                logp = tabular.answer_log_prob(params[prompts], answers).reshape(-1, 1)
                token = _token_loss(loss, logp, old, adv, keep, loss_names)
                total = losses.aggregate(token, keep, "token-mean")
                return total, {}

            logits, opt_state, _ = core.update(
                k, logits, opt_state, jnp.zeros((1,)), loss_fn, optimizer,
                num_epochs=config.num_epochs, num_minibatches=1)
            return (logits, opt_state), accuracy(logits)

        init = (bank.logits0, optimizer.init(bank.logits0))
        _, acc = jax.lax.scan(step, init, jax.random.split(key, config.steps))
        return jnp.concatenate([accuracy(bank.logits0)[None], acc])

    return train


def run(config: ArenaConfig, key: jax.Array, num_seeds: int,
        only: tuple[Arm, ...] | None = None) -> np.ndarray:
    """Accuracy curves ``[arm, G, seed, steps + 1]`` of :func:`arms` (or of ``only``) at
    :data:`GROUPS`; seed ``s`` uses the same key in every arm and at every G (paired)."""
    all_arms = arms() if only is None else tuple(only)
    estimators, loss_names = branches(all_arms)
    est = jnp.asarray([estimators.index(a.estimator) for a in all_arms])
    loss = jnp.asarray([loss_names.index(a.loss) for a in all_arms])
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(num_seeds))
    train = make_train(config, estimators, loss_names)
    over_seeds = jax.vmap(train, in_axes=(0, None, None, None))
    over_groups = jax.vmap(over_seeds, in_axes=(None, None, None, 0))
    over_arms = jax.vmap(over_groups, in_axes=(None, 0, 0, None))
    curves = jit_cpu_options(over_arms)(keys, est, loss, jnp.asarray(GROUPS))
    return np.asarray(curves, np.float64)
