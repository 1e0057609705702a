"""Bandit trainer speed: jitted + vmapped JAX over many seeds vs a plain NumPy per-seed loop.

Both run the same algorithm on the same bank: B prompts drawn without replacement, G
inverse-CDF samples each, GRPO advantages (group std), ``num_iterations`` epochs over the
groups reshuffled into ``num_minibatches`` minibatches, PPO-clip with token-mean loss, Adam.
``tests/core/test_bandit.py`` replays the trainer's own rollouts and minibatches through
:func:`numpy_update` (with SGD) and ends at the trainer's logits, and checks :class:`NumpyAdam`
against ``optax.adam``, so the two sides are the same algorithm. The NumPy loop is vectorised
within a seed (over prompts and rollouts; one softmax row per group, whose rollouts share the
prompt), the honest baseline a researcher would write, and loops over seeds, steps, epochs and
minibatches in Python. Both record the exact accuracy at every step and nothing else (the
trainer's ``metrics=("accuracy",)``).

The line has no goal: its earlier one, 100x over the NumPy loop, is retired (issue 46; the
line says what bounds the ratio, :data:`RETIRED_GOAL`, and ``docs/performance.md`` has the
ablations behind it).

The same run also times ``optax.adam`` alone: the trainer's dense updates of the same
``[seeds, K*V]`` logits with a fixed gradient, no rollouts. No trainer of this algorithm
that keeps optax's Adam can beat that time, so numpy's time over it is the ceiling of the
ratio on this machine, printed next to it.
"""
from __future__ import annotations

import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rlvr_lab.benchmarks import Measure, benchmark, best_time
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.train.bandit import BanditConfig, train_seeds


def bench_config(num_steps: int) -> BanditConfig:
    return BanditConfig(bank=PromptBankConfig(num_prompts=64, vocab_size=16),
                        steps=num_steps, num_prompts=32, num_generations=8,
                        num_iterations=2, num_minibatches=4, advantage="grpo",
                        policy_loss="ppo_clip", loss_agg_mode="token-mean", learning_rate=0.05,
                        eval_ks=(1,), metrics=("accuracy",))


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


class NumpySGD:
    """``optax.sgd`` on one array, updated in place."""

    def __init__(self, params, learning_rate):
        self.lr = learning_rate

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        params -= self.lr * grad


class NumpyAdam:
    """``optax.adam`` (b1=0.9, b2=0.999, eps=1e-8) on one array, updated in place."""

    def __init__(self, params, learning_rate, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps, self.t = learning_rate, b1, b2, eps, 0
        self.m1, self.m2 = np.zeros_like(params), np.zeros_like(params)

    def step(self, params: np.ndarray, grad: np.ndarray) -> None:
        self.t += 1
        self.m1 *= self.b1
        self.m1 += (1 - self.b1) * grad
        self.m2 *= self.b2
        self.m2 += (1 - self.b2) * grad * grad
        step = np.sqrt(self.m2 / (1 - self.b2 ** self.t))
        step += self.eps
        params -= self.lr * (self.m1 / (1 - self.b1 ** self.t)) / step


def numpy_update(logits: np.ndarray, optimizer: NumpySGD | NumpyAdam, prompts: np.ndarray,
                 answers: np.ndarray, old_logp: np.ndarray, adv: np.ndarray,
                 config: BanditConfig) -> None:
    """One PPO-clip (token-mean) optimizer step on a minibatch of whole groups, in place.

    ``prompts [g]`` (distinct), ``answers``, ``old_logp``, ``adv`` ``[g, G]``; temperature 1,
    no KL term. A group's rollouts share their prompt's softmax row.
    """
    eps_lo, eps_hi = config.epsilon, config.epsilon_high or config.epsilon
    g, vocab = len(prompts), logits.shape[1]
    probs = _softmax(logits[prompts])
    ratio = np.take_along_axis(probs, answers, 1) / np.exp(old_logp)
    # d loss / d logp of -min(r A, clip(r) A), averaged over the minibatch's rollouts
    active = np.where(adv >= 0, ratio <= 1 + eps_hi, ratio >= 1 - eps_lo)
    dlogp = np.where(active, -adv * ratio, 0.0) / answers.size
    # d logp(a) / d row = onehot(a) - probs, summed over the group's rollouts
    rows = np.bincount((np.arange(g)[:, None] * vocab + answers).ravel(), dlogp.ravel(),
                       g * vocab).reshape(g, vocab)
    rows -= dlogp.sum(1, keepdims=True) * probs
    grad = np.zeros_like(logits)
    grad[prompts] = rows
    optimizer.step(logits, grad)


def numpy_train(seed: int, config: BanditConfig, logits0: np.ndarray, reward_table: np.ndarray,
                correct: np.ndarray) -> np.ndarray:
    """Plain NumPy GRPO + PPO-clip + Adam on the prompt bank; returns accuracy per step."""
    rng = np.random.default_rng(seed)
    K, V = logits0.shape
    B, G = config.num_prompts, config.num_generations
    logits = logits0.copy()
    adam = NumpyAdam(logits, config.learning_rate)
    accuracy = np.empty(config.steps)
    for step in range(config.steps):
        probs = _softmax(logits)
        accuracy[step] = (probs * correct).sum(-1).mean()
        prompts = np.arange(K) if B == K else rng.permutation(K)[:B]
        cdf = np.cumsum(probs[prompts], -1)
        answers = (rng.random((B, G, 1)) < cdf[:, None, :]).argmax(-1)
        rewards = reward_table[prompts[:, None], answers]
        std = rewards.std(-1, ddof=1, keepdims=True)
        adv = (rewards - rewards.mean(-1, keepdims=True)) / (std + 1e-6)
        old_logp = np.log(np.take_along_axis(probs[prompts], answers, -1))
        for _ in range(config.num_iterations):
            for groups in np.split(rng.permutation(B), config.num_minibatches):
                numpy_update(logits, adam, prompts[groups], answers[groups], old_logp[groups],
                             adv[groups], config)
    return accuracy


def adam_only(config: BanditConfig, num_seeds: int) -> Callable[[], jax.Array]:
    """The trainer's optax Adam updates of ``num_seeds`` flat ``[K*V]`` logits with a fixed
    gradient (no rollouts, no loss), one compiled scan; returns a function that runs it."""
    updates = config.steps * config.num_iterations * config.num_minibatches
    size = config.bank.num_prompts * config.bank.vocab_size
    optimizer = optax.adam(config.learning_rate)

    def run(grad):
        def one(carry, _):
            params, state = carry
            step, state = optimizer.update(grad, state, params)
            return (optax.apply_updates(params, step), state), None

        params = jnp.zeros_like(grad)
        return jax.lax.scan(one, (params, optimizer.init(params)), length=updates)[0][0]

    grad = jax.random.normal(jax.random.key(0), (num_seeds, size))
    compiled = jax.jit(run)
    return lambda: jax.block_until_ready(compiled(grad))


# the goal this line had (100x over the NumPy loop) and why it is retired (issue 46)
RETIRED_GOAL = ("goal of 100 x retired: at this size the ratio is bound by fixed per-step cost, "
                "not arithmetic: XLA:CPU runs the per-seed arrays' 8- and 16-long minor axes as "
                "short scalar loops and dispatches many tiny ops per step inside the compiled "
                "scan (no host round trip), so the rollout and exact accuracy alone take more "
                "than the ~3 us per seed-step that 100 x allows; more would need a second, "
                "seed-minor core (stages, estimators, losses, update)")


@benchmark("bandit_trainer_vs_numpy")
def bandit_trainer(quick: bool) -> Measure:
    seeds = 256
    steps = 50 if quick else 200
    numpy_seeds = 2 if quick else 4
    config = bench_config(steps)
    bank = prompt_bank.make_bank(config.bank)
    args = [np.asarray(x, np.float64) for x in (bank.logits0, bank.reward_table, bank.correct)]

    # best of 3 on both sides, so a burst of other load on a shared machine hits neither
    numpy_time = best_time(lambda: [numpy_train(s, config, *args) for s in range(numpy_seeds)])
    numpy_rate = numpy_seeds * steps / numpy_time
    jax.block_until_ready(train_seeds(config, jax.random.key(0), seeds))  # compile
    jax_time = best_time(lambda: jax.block_until_ready(train_seeds(config, jax.random.key(1),
                                                                   seeds)))
    jax_rate = seeds * steps / jax_time
    adam = adam_only(config, seeds)
    adam()  # compile
    adam_rate = seeds * steps / best_time(adam)
    return Measure("bandit_trainer_vs_numpy", jax_rate / numpy_rate,
                   f"jit(vmap) JAX {jax_rate:,.0f} seed-steps/s over {seeds} seeds "
                   f"({1e6 / jax_rate:.1f} us/seed-step) vs plain numpy per-seed loop "
                   f"{numpy_rate:,.0f} seed-steps/s ({1e6 / numpy_rate:.0f} us); K=64 V=16 "
                   f"B=32 G=8, 2 epochs x 4 minibatches, Adam, {steps} steps, exact accuracy "
                   f"recorded every step; optax.adam's dense updates alone take "
                   f"{1e6 / adam_rate:.1f} us/seed-step (ratio ceiling {adam_rate / numpy_rate:.0f}"
                   f" x); best of 3; {jax.device_count()} "
                   f"{jax.default_backend()} device(s), XLA threads on {os.cpu_count()} "
                   f"cores, numpy 1 thread; {RETIRED_GOAL}")
