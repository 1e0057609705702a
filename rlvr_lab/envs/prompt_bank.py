"""The prompt bank: K prompts, each answered by one draw from a softmax over V answers.

This is the setting where the theory is exact. Each prompt k has a policy
``pi_k = softmax(logits[k])`` over V answers, a reward table ``R[k, v]`` and a set of correct
answers. Everything a paper's argument needs is available in closed form: per-prompt success
probability ``p_k``, expected reward, population pass@k ``1 - (1 - p_k)^k`` and the exact
policy gradient ``dJ/dlogits[k, v] = pi_kv (R_kv - E_k[R]) / K`` of ``J = mean_k E_k[R]``.

Initial difficulty: the wrong answers get random logits (``logit_scale`` sets how peaked the
distribution over them is), then the correct answers' logits are shifted so that the correct
mass equals a draw ``p0 ~ Beta(difficulty_a, difficulty_b)`` exactly.

Rewards: ``"binary"`` (1 correct, 0 wrong); ``"format"`` (correct: ``correct_reward +
format_reward``; a fraction ``format_fraction`` of the wrong answers are well formatted and
get ``format_reward``; the rest 0); ``"levels"`` (correct: ``correct_reward``; each wrong
answer gets one of ``wrong_levels`` drawn uniformly) — multi-level laws for sign-flip studies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab._registry import check_choice, positive_int
from rlvr_lab.utils import check_number, jit_cpu_options

REWARDS = ("binary", "format", "levels")


@dataclass(frozen=True)
class PromptBankConfig:
    num_prompts: int = 64
    vocab_size: int = 16
    num_correct: int = 1
    difficulty_a: float = 1.0
    difficulty_b: float = 3.0
    logit_scale: float = 1.0
    reward: str = "binary"
    correct_reward: float = 1.0
    format_reward: float = 0.5
    format_fraction: float = 0.5
    wrong_levels: tuple = (0.0,)
    min_p0: float = 1e-3
    seed: int = 0

    def __post_init__(self):
        for name in ("num_prompts", "vocab_size", "num_correct"):
            positive_int(name, getattr(self, name))
        if self.num_correct >= self.vocab_size:
            raise ValueError(f"num_correct={self.num_correct} must be < "
                             f"vocab_size={self.vocab_size}")
        # finite numbers (booleans rejected), one line naming the value and the range
        for name in ("difficulty_a", "difficulty_b"):
            check_number(getattr(self, name), name, "> 0", lambda v: v > 0)
        check_number(self.logit_scale, "logit_scale", ">= 0", lambda v: v >= 0)
        check_choice("reward", self.reward, REWARDS)
        check_number(self.correct_reward, "correct_reward")
        check_number(self.format_reward, "format_reward")
        check_number(self.format_fraction, "format_fraction", "in [0, 1]",
                     lambda v: (v >= 0) & (v <= 1))
        check_number(self.min_p0, "min_p0", "in (0, 0.5)", lambda v: (v > 0) & (v < 0.5))
        if not isinstance(self.wrong_levels, (tuple, list)) or len(self.wrong_levels) < 1:
            raise ValueError(f"wrong_levels={self.wrong_levels!r} must be a tuple holding at "
                             "least one reward value")
        check_number(list(self.wrong_levels), "wrong_levels")
        check_number(self.seed, "seed", ">= 0", lambda v: v >= 0, integer=True)


class PromptBank(NamedTuple):
    """Pytree: initial logits, reward table and correct set, all ``[K, V]``; initial ``p0 [K]``."""

    logits0: jnp.ndarray
    reward_table: jnp.ndarray
    correct: jnp.ndarray
    p0: jnp.ndarray

    @property
    def num_prompts(self) -> int:
        return self.logits0.shape[0]


def make_bank(config: PromptBankConfig = PromptBankConfig(),
              key: jax.Array | None = None) -> PromptBank:
    """Build the bank from ``config.seed`` (or an explicit typed ``key``)."""
    key = jax.random.key(config.seed) if key is None else key
    return _build_bank(config, key)


def _build(config: PromptBankConfig, key: jax.Array) -> PromptBank:
    k_logit, k_p0, k_fmt, k_lvl = jax.random.split(key, 4)
    K, V, C = config.num_prompts, config.vocab_size, config.num_correct
    logits = config.logit_scale * jax.random.normal(k_logit, (K, V))
    correct = jnp.broadcast_to(jnp.arange(V) < C, (K, V))
    p0 = jax.random.beta(k_p0, config.difficulty_a, config.difficulty_b, (K,))
    p0 = jnp.clip(p0, config.min_p0, 1 - config.min_p0)
    logits = set_success_probability(logits, correct, p0)
    reward_table = _reward_table(config, correct, k_fmt, k_lvl)
    return PromptBank(logits, reward_table, correct, success_probability(logits, correct))


# one compiled program per config (run eagerly, its ~20 ops compiled one by one, ~1 s each
# time a trainer or study builds a bank of a new size)
_build_bank = jit_cpu_options(_build, static_argnums=0)


def _reward_table(config, correct, k_fmt, k_lvl):
    shape = correct.shape
    if config.reward == "binary":
        return jnp.where(correct, 1.0, 0.0)
    if config.reward == "format":
        formatted = jax.random.uniform(k_fmt, shape) < config.format_fraction
        wrong = jnp.where(formatted, config.format_reward, 0.0)
        return jnp.where(correct, config.correct_reward + config.format_reward, wrong)
    levels = jnp.asarray(config.wrong_levels, dtype=jnp.float32)
    wrong = levels[jax.random.randint(k_lvl, shape, 0, levels.shape[0])]
    return jnp.where(correct, config.correct_reward, wrong)


def set_success_probability(logits: ArrayLike, correct: ArrayLike, p: ArrayLike) -> jax.Array:
    """Shift the correct answers' logits so each row's correct mass is exactly ``p``."""
    lse_c = jax.nn.logsumexp(jnp.where(correct, logits, -jnp.inf), axis=-1)
    lse_w = jax.nn.logsumexp(jnp.where(correct, -jnp.inf, logits), axis=-1)
    shift = jnp.log(p) - jnp.log1p(-p) - (lse_c - lse_w)
    return logits + jnp.where(correct, shift[:, None], 0.0)


def success_probability(logits: ArrayLike, correct: ArrayLike) -> jax.Array:
    """Per-prompt probability of a correct answer, ``[K]``."""
    return jnp.sum(jnp.where(correct, jax.nn.softmax(logits, axis=-1), 0.0), axis=-1)


def expected_reward(logits: ArrayLike, reward_table: ArrayLike) -> jax.Array:
    """Per-prompt expected reward ``E_k[R]``, ``[K]``."""
    return jnp.sum(jax.nn.softmax(logits, axis=-1) * reward_table, axis=-1)


def exact_policy_gradient(logits: jax.Array, reward_table: ArrayLike,
                          prompt_weights: jax.Array | None = None) -> jax.Array:
    """Gradient of ``J = sum_k w_k E_k[R]`` w.r.t. the logits (``w_k = 1/K`` by default).

    ``dJ/dlogits[k, v] = w_k * pi_kv * (R_kv - E_k[R])``.
    """
    pi = jax.nn.softmax(logits, axis=-1)
    K = logits.shape[0]
    w = jnp.full((K,), 1.0 / K, logits.dtype) if prompt_weights is None else prompt_weights
    return w[:, None] * pi * (reward_table - jnp.sum(pi * reward_table, -1, keepdims=True))


def rewards_of(bank: PromptBank, prompts: jax.Array, answers: ArrayLike) -> jax.Array:
    """Rewards of ``answers [B, G]`` to ``prompts [B]``."""
    return bank.reward_table[prompts[:, None], answers]


def is_correct(bank: PromptBank, prompts: jax.Array, answers: ArrayLike) -> jax.Array:
    return bank.correct[prompts[:, None], answers]
