"""Bandit trainer speed: jitted + vmapped JAX over many seeds vs a plain NumPy per-seed loop.

Both run the same algorithm on the same bank: GRPO advantages (group std), PPO-clip with
``num_iterations`` epochs of ``num_minibatches`` minibatches, token-mean loss, Adam, and the
exact per-step metrics (success probability, entropy). The NumPy loop is vectorised within a
seed (over prompts and rollouts) — the honest baseline a researcher would write — and loops
over seeds, steps, epochs and minibatches in Python.
"""
from __future__ import annotations

import time

import jax
import numpy as np

from rlvr_lab.benchmarks import Measure, benchmark
from rlvr_lab.envs import prompt_bank
from rlvr_lab.envs.prompt_bank import PromptBankConfig
from rlvr_lab.train.bandit import BanditConfig, train_seeds


def bench_config(num_steps: int) -> BanditConfig:
    return BanditConfig(bank=PromptBankConfig(num_prompts=64, vocab_size=16),
                        num_steps=num_steps, batch_size=32, num_generations=8,
                        num_iterations=2, num_minibatches=4, advantage="grpo",
                        loss_type="ppo_clip", loss_agg_mode="token-mean", learning_rate=0.05,
                        eval_ks=(1,))


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def numpy_train(seed: int, config: BanditConfig, logits0, reward_table, correct):
    """Plain NumPy GRPO + PPO-clip + Adam on the prompt bank; returns accuracy per step."""
    rng = np.random.default_rng(seed)
    K, V = logits0.shape
    B, G = config.batch_size, config.num_generations
    eps_lo, eps_hi = config.epsilon, config.epsilon_high or config.epsilon
    lr, b1, b2, adam_eps = config.learning_rate, 0.9, 0.999, 1e-8
    logits = logits0.copy()
    m1, m2, t = np.zeros_like(logits), np.zeros_like(logits), 0
    accuracy = np.empty(config.num_steps)
    for step in range(config.num_steps):
        probs = _softmax(logits)
        accuracy[step] = (probs * correct).sum(-1).mean()
        prompts = np.arange(K) if B == K else rng.permutation(K)[:B]
        cdf = np.cumsum(probs[prompts], -1)
        answers = (rng.random((B, G, 1)) < cdf[:, None, :]).argmax(-1)
        rewards = reward_table[prompts[:, None], answers]
        std = rewards.std(-1, ddof=1, keepdims=True)
        adv = ((rewards - rewards.mean(-1, keepdims=True)) / (std + 1e-6)).ravel()
        flat_prompts = np.repeat(prompts, G)
        flat_answers = answers.ravel()
        old_logp = np.log(probs[flat_prompts, flat_answers])
        n = flat_answers.size
        for _ in range(config.num_iterations):
            for mb in np.split(rng.permutation(n), config.num_minibatches):
                rows = _softmax(logits[flat_prompts[mb]])
                ratio = rows[np.arange(mb.size), flat_answers[mb]] / np.exp(old_logp[mb])
                a = adv[mb]
                active = np.where(a >= 0, ratio <= 1 + eps_hi, ratio >= 1 - eps_lo)
                dlogp = np.where(active, -a * ratio, 0.0) / mb.size
                onehot = np.zeros_like(rows)
                onehot[np.arange(mb.size), flat_answers[mb]] = 1.0
                grad = np.zeros_like(logits)
                np.add.at(grad, flat_prompts[mb], dlogp[:, None] * (onehot - rows))
                t += 1
                m1 = b1 * m1 + (1 - b1) * grad
                m2 = b2 * m2 + (1 - b2) * grad * grad
                logits -= lr * (m1 / (1 - b1 ** t)) / (np.sqrt(m2 / (1 - b2 ** t)) + adam_eps)
    return accuracy


@benchmark("bandit_trainer_vs_numpy")
def bandit_trainer(quick: bool) -> Measure:
    seeds = 256
    steps = 50 if quick else 200
    numpy_seeds = 2 if quick else 4
    config = bench_config(steps)
    bank = prompt_bank.make_bank(config.bank)
    args = [np.asarray(x, np.float64) for x in (bank.logits0, bank.reward_table, bank.correct)]

    start = time.perf_counter()
    for s in range(numpy_seeds):
        numpy_train(s, config, *args)
    numpy_rate = numpy_seeds * steps / (time.perf_counter() - start)

    jax.block_until_ready(train_seeds(config, jax.random.key(0), seeds))  # compile
    start = time.perf_counter()
    jax.block_until_ready(train_seeds(config, jax.random.key(1), seeds))
    jax_rate = seeds * steps / (time.perf_counter() - start)
    return Measure("bandit_trainer_vs_numpy", jax_rate / numpy_rate,
                   f"jit(vmap) JAX {jax_rate:,.0f} seed-steps/s over {seeds} seeds vs plain "
                   f"numpy per-seed loop {numpy_rate:,.0f} seed-steps/s; K=64 V=16 B=32 G=8, "
                   f"2 epochs x 4 minibatches, {steps} steps, {jax.device_count()} "
                   f"{jax.default_backend()} device(s)")
