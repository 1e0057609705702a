"""Exact expected policy gradients of group estimators on a binary-reward bank (float64).

Setting: prompt ``k`` has a softmax policy ``pi_k`` over V answers and a set of correct
answers with mass ``p_k``; a group of G rollouts is scored 1 / 0. For an estimator that sees
one group at a time and treats rollouts symmetrically (every group estimator of
:mod:`rlvr_lab.advantages` except the batch-level ones), the advantages of a group depend
only on ``k``, the number of correct rollouts: ``S+_k`` is their sum over the correct
rollouts, ``S-_k`` over the wrong ones (:func:`group_sums`, read off the estimator itself on
the G+1 canonical groups). Given ``k``, a correct rollout's answer is distributed as
``pi_C / p`` and a wrong one's as ``pi_W / (1 - p)``, so with ``u = pi_C / p - pi`` (and
``pi_W / (1 - p) - pi = -p / (1 - p) u``) the expected gradient of the loss
``mean_i A_i log pi(a_i)`` for one prompt is

``E[g] = (1/G) sum_k Binom(k; G, p) (S+_k - p / (1 - p) S-_k) u``,

a multiple ``scale(p) * p * u`` of the exact gradient ``p * u`` of ``p`` itself
(:func:`gradient_scale`). Every estimator's expected update for one prompt points the right
way; what differs is ``scale(p)``: 1 for every p is unbiased (RLOO), a constant below 1
shrinks (Dr.GRPO: ``(G-1)/G``), and a ``scale`` that varies with p re-weights prompts, so the
expected update over a bank is no longer the gradient of mean accuracy (GRPO's std).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from scipy import stats as _st

from rlvr_lab import advantages
from rlvr_lab.utils import enable_x64


def group_sums(estimator: str, group: int, **options) -> tuple[np.ndarray, np.ndarray]:
    """``(S+ [G+1], S- [G+1])``: the sums of the estimator's advantages over the correct and
    over the wrong rollouts of a binary group with ``k = 0..G`` correct (float64; computed
    once per estimator and G when no options are given: the study asks for each pair several
    times, and each eager float64 evaluation costs a fraction of a second)."""
    if not options:
        plus, minus = _group_sums_cached(estimator, group)
        return plus.copy(), minus.copy()
    return _group_sums(estimator, group, **options)


@functools.lru_cache(maxsize=256)
def _group_sums_cached(estimator: str, group: int) -> tuple[np.ndarray, np.ndarray]:
    # one compiled program per (estimator, G) instead of one per primitive (eager dispatch):
    # the same float64 sums to rounding, several times faster to build
    return _group_sums(estimator, group, compiled=True)


def _group_sums(estimator: str, group: int, compiled: bool = False,
                **options) -> tuple[np.ndarray, np.ndarray]:
    rewards = (np.arange(group)[None, :] < np.arange(group + 1)[:, None]).astype(np.float64)
    with enable_x64():
        fn = lambda r: advantages.compute(estimator, r, **options).adv  # noqa: E731
        adv = np.asarray((jax.jit(fn) if compiled else fn)(jnp.asarray(rewards)))
    return (adv * rewards).sum(-1), (adv * (1 - rewards)).sum(-1)


def gradient_scale(estimator: str, p: npt.ArrayLike, group: int, **options) -> np.ndarray:
    """``scale(p)``: the estimator's expected gradient over the exact one, per success
    probability ``p`` in (0, 1) (module docstring)."""
    p = np.asarray(p, np.float64)
    plus, minus = group_sums(estimator, group, **options)
    k = np.arange(group + 1)
    weights = _st.binom.pmf(k[None, :], group, p[..., None])          # [..., G+1]
    per_k = plus[None, :] - (p[..., None] / (1 - p[..., None])) * minus[None, :]
    return (weights * per_k).sum(-1) / (group * p)


def direction_error(estimator: str, logits: npt.ArrayLike, correct: npt.ArrayLike,
                    group: int, **options) -> float:
    """``1 - cos`` between the estimator's expected gradient over the bank's prompts and the
    exact gradient of mean success probability (0 when the two are parallel)."""
    logits = np.asarray(logits, np.float64)
    correct = np.asarray(correct, bool)
    pi = np.asarray(jax.nn.softmax(jnp.asarray(logits), axis=-1), np.float64)
    p = np.where(correct, pi, 0).sum(-1)
    exact = np.where(correct, pi, 0) - p[:, None] * pi                # p * u per prompt
    expected = gradient_scale(estimator, p, group, **options)[:, None] * exact
    a, b = expected.ravel(), exact.ravel()
    return float(1 - a @ b / np.sqrt((a @ a) * (b @ b)))


def single_rollout_errors(key: jax.Array, logits: jax.Array, reward_table: jax.Array,
                          baseline: jax.Array, num_draws: int) -> np.ndarray:
    """Per draw, ``|g - grad J|^2 / |grad J|^2`` of the one-rollout-per-prompt gradient with
    ReMax's advantage ``r - baseline`` (:func:`rlvr_lab.advantages.remax`), ``J`` the mean
    expected reward over the prompts. ``baseline [K]``: 0 is plain REINFORCE. One compiled
    program serves every baseline (the baseline is an argument, not a constant)."""
    return np.asarray(_single_rollout_errors(key, jnp.asarray(logits),
                                             jnp.asarray(reward_table),
                                             jnp.asarray(baseline, jnp.float32), num_draws),
                      np.float64)


@functools.partial(jax.jit, static_argnums=4)
def _single_rollout_errors(key, logits, reward_table, baseline, num_draws):
    num_prompts = logits.shape[0]
    pi = jax.nn.softmax(logits, axis=-1)
    exact = pi * (reward_table - (pi * reward_table).sum(-1, keepdims=True)) / num_prompts
    norm = (exact * exact).sum()

    def one(k):
        answers = jax.random.categorical(k, logits)                    # [K]
        rewards = reward_table[jnp.arange(num_prompts), answers][:, None]
        adv = advantages.remax(rewards, baseline=baseline)[:, 0]
        g = adv[:, None] * (jax.nn.one_hot(answers, logits.shape[1]) - pi) / num_prompts
        return ((g - exact) ** 2).sum() / norm

    return jax.lax.map(one, jax.random.split(key, num_draws), batch_size=256)
