"""Exact gradient analysis behind CurES on the prompt bank (tabular softmax per prompt).

Prompt i has logits ``z_i`` (``[V]``), policy ``pi_i = softmax(z_i)``, a correct set C and
success probability ``p_i = pi_i(C)``. A rollout y has score ``g = grad_z log pi(y) = e_y - pi``.
Everything below is closed form (checked against enumeration and Monte Carlo in the tests):

* exact gradient ``grad p = pi_C - p pi`` (``pi_C`` = pi restricted to C);
* the moments entering CurES' sigma: ``E|g_c|^2 = sum_{y in C} pi_y (1 - 2 pi_y + |pi|^2) / p``
  (same over the wrong set with ``1 - p``), ``|E g_c - E g_w|^2 = |pi_C / p - pi_W / (1-p)|^2``;
  ``sigma^2`` = variance of ``(r - p) g``
  (:func:`rlvr_lab.papers.cures.allocation.rollout_gradient_variance`).

(b) Allocation. With the per-prompt mean over ``n_i`` rollouts and the oracle baseline ``p``,
the stochastic gradient of ``sum_i p_i`` has total variance ``sum_i sigma_i^2 / n_i``
(:func:`allocation_variance`); Monte Carlo with the oracle, leave-one-out (RLOO) and
group-mean baselines is :func:`mc_allocation_variance`.

(a) Prompt sampling. With B prompts drawn from q per step and each drawn prompt moved along its
own gradient, the expected first-order improvement of ``J = mean_i p_i`` is
``(lr B / K) sum_i q_i |grad p_i|^2`` (:func:`sampling_gain`) — linear in q, so the best
single step puts the batch on the prompts with the largest ``|grad p_i|^2``. For a logit
softmax ``|grad p|^2 = p^2 ((1-p)^2 + sum_{wrong} pi_y^2)`` ~ ``(p(1-p))^2``: it vanishes at
both ends and is much more peaked than CurES' proxy ``sqrt(p(1-p))``. For unbiased
(importance-weighted) SGD, the second moment ``(1/K^2) sum_i m_i / q_i`` with
``m_i = |grad p_i|^2 + sigma_i^2 / G`` is minimised by ``q_i ∝ sqrt(m_i)``
(:func:`optimal_is_distribution`), which sets the SGD convergence rate bound;
:func:`is_efficiency` is the ratio of that optimum to the value under another q.
:func:`mean_field_descent` runs the expected (noise-free) dynamics under a prompt-sampling
rule to measure steps to a target accuracy.
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from jax.typing import ArrayLike

from rlvr_lab.papers.cures.allocation import rollout_gradient_variance
from rlvr_lab.utils import jit_cpu_options


class GradientMoments(NamedTuple):
    """Per-prompt exact quantities, each ``[K]``."""

    p: jnp.ndarray
    grad_sq: jnp.ndarray          # |grad_z p|^2
    sq_norm_correct: jnp.ndarray  # E[|g|^2 | correct]
    sq_norm_wrong: jnp.ndarray    # E[|g|^2 | wrong]
    mean_gap_sq: jnp.ndarray      # |E[g | correct] - E[g | wrong]|^2
    sigma_sq: jnp.ndarray         # Var[(r - p) g] (trace)


def bank_gradient_moments(logits: ArrayLike, correct: ArrayLike) -> GradientMoments:
    """Exact gradient moments of every prompt; ``logits``, ``correct`` ``[K, V]``.

    Prompts with ``p = 0`` or ``1`` (numerically) get 0 for the conditional moments of the
    empty side, and ``sigma^2 = 0``: finite, never NaN.
    """
    pi = jax.nn.softmax(jnp.asarray(logits), axis=-1)
    c = jnp.asarray(correct, bool)
    pc = jnp.where(c, pi, 0.0)
    pw = pi - pc
    p = pc.sum(-1)
    q = pw.sum(-1)
    s = (pi * pi).sum(-1, keepdims=True)
    sq = 1.0 - 2.0 * pi + s  # |e_y - pi|^2
    safe_p = jnp.where(p > 0, p, 1.0)
    safe_q = jnp.where(q > 0, q, 1.0)
    ec2 = jnp.where(p > 0, (pc * sq).sum(-1) / safe_p, 0.0)
    ew2 = jnp.where(q > 0, (pw * sq).sum(-1) / safe_q, 0.0)
    gap = pc / safe_p[:, None] - pw / safe_q[:, None]
    gap_sq = jnp.where((p > 0) & (q > 0), (gap * gap).sum(-1), 0.0)
    grad = pc - p[:, None] * pi
    return GradientMoments(p, (grad * grad).sum(-1), ec2, ew2, gap_sq,
                           rollout_gradient_variance(p, ec2, ew2, gap_sq))


def exact_success_gradient(logits: ArrayLike, correct: ArrayLike) -> jax.Array:
    """``grad_z p_i = pi_C - p_i pi`` for every prompt, ``[K, V]``."""
    pi = jax.nn.softmax(jnp.asarray(logits), axis=-1)
    pc = jnp.where(correct, pi, 0.0)
    return pc - pc.sum(-1, keepdims=True) * pi


# ----------------------------------------------------------------------------- (b) allocation
def allocation_variance(sigma_sq: ArrayLike, counts: ArrayLike) -> jax.Array:
    """``sum_i sigma_i^2 / n_i`` (oracle baseline); a prompt with ``n_i = 0`` and
    ``sigma_i > 0`` makes it infinite (that prompt's gradient is missing)."""
    sigma_sq = jnp.asarray(sigma_sq)
    n = jnp.asarray(counts)
    term = jnp.where(sigma_sq > 0, sigma_sq / jnp.where(n > 0, n, 1), 0.0)
    term = jnp.where((n <= 0) & (sigma_sq > 0), jnp.inf, term)
    return term.sum()


def neyman_variance(sigma_sq: ArrayLike, budget: ArrayLike) -> jax.Array:
    """The unconstrained Neyman optimum ``(sum sigma)^2 / N`` (a lower bound)."""
    return jnp.sqrt(jnp.asarray(sigma_sq)).sum() ** 2 / budget


BASELINES = ("oracle", "rloo", "mean")


def mc_allocation_variance(rng: np.random.Generator, logits: npt.ArrayLike,
                           correct: npt.ArrayLike, counts: npt.ArrayLike, *,
                           draws: int = 2000, baseline: str = "oracle") -> float:
    """Monte Carlo total variance of the per-prompt mean gradient estimate, summed over
    prompts, in float64 NumPy.

    ``baseline``: "oracle" (``r - p``), "rloo" (``r_j - mean of the others``, unbiased) or
    "mean" (``r_j - group mean``, Dr.GRPO; biased by ``(n-1)/n``, so this is its variance
    around its own mean). Prompts with ``n_i < 2`` are skipped for "rloo"/"mean".
    """
    if baseline not in BASELINES:
        raise ValueError(f"baseline={baseline!r} is not allowed; choose one of {BASELINES}")
    logits = np.asarray(logits, np.float64)
    correct = np.asarray(correct, bool)
    counts = np.asarray(counts, int)
    total = 0.0
    for z, c, n in zip(logits, correct, counts):
        pi = np.exp(z - z.max())
        pi /= pi.sum()
        p = pi[c].sum()
        r = c.astype(np.float64)
        if n < 1 or (baseline != "oracle" and n < 2):
            continue
        k = rng.multinomial(n, pi, size=draws).astype(np.float64)  # answer counts [draws, V]
        score = np.eye(len(pi)) - pi  # row y: e_y - pi
        if baseline == "oracle":
            coef = k * (r - p)
        else:
            hits = k @ r  # successes per draw
            if baseline == "rloo":
                coef = k * (n * r[None, :] - hits[:, None]) / (n - 1)
            else:
                coef = k * (r[None, :] - hits[:, None] / n)
        est = coef @ score / n  # [draws, V]
        total += ((est - est.mean(0)) ** 2).sum(-1).mean()
    return float(total)


# ----------------------------------------------------------------------------- (a) sampling
def sampling_gain(q: ArrayLike, grad_sq: ArrayLike) -> jax.Array:
    """Expected first-order improvement per drawn prompt, ``sum_i q_i |grad p_i|^2``
    (times ``lr B / K`` for a step of B draws)."""
    return (jnp.asarray(q) * jnp.asarray(grad_sq)).sum()


def top_batch_distribution(score: ArrayLike, batch_size: int) -> jax.Array:
    """The greedy optimum of a linear gain: uniform over the ``batch_size`` largest scores."""
    score = jnp.asarray(score)
    idx = jnp.argsort(-score)[:batch_size]
    return jnp.zeros_like(score).at[idx].set(1.0 / batch_size)


def is_second_moment(q: ArrayLike, m: ArrayLike) -> jax.Array:
    """``sum_i m_i / q_i`` (times 1/K^2): second moment of the importance-weighted estimate."""
    q = jnp.asarray(q)
    m = jnp.asarray(m)
    return jnp.where(m > 0, m / jnp.where(q > 0, q, 1.0), 0.0).sum() + jnp.where(
        (q <= 0) & (m > 0), jnp.inf, 0.0).sum()


def optimal_is_distribution(m: ArrayLike) -> jax.Array:
    """``q_i ∝ sqrt(m_i)``, the minimiser of :func:`is_second_moment` on the simplex."""
    r = jnp.sqrt(jnp.maximum(jnp.asarray(m), 0.0))
    return jnp.where(r.sum() > 0, r / jnp.where(r.sum() > 0, r.sum(), 1.0), 1.0 / r.shape[0])


def is_efficiency(q: ArrayLike, m: ArrayLike) -> jax.Array:
    """``min_q' M(q') / M(q) = (sum sqrt m)^2 / sum(m / q)`` in (0, 1]; 1 = optimal."""
    best = jnp.sqrt(jnp.maximum(jnp.asarray(m), 0.0)).sum() ** 2
    return best / is_second_moment(q, m)


def mean_field_descent(logits: ArrayLike, correct: ArrayLike, rule: Callable, *, lr: float,
                       batch_size: int, num_steps: int) -> jax.Array:
    """Expected dynamics ``z_i += lr B q_i grad p_i`` with ``q = rule(p, grad_sq)`` recomputed
    every step from the exact ``p``. Returns the mean accuracy ``[num_steps + 1]``.
    One compilation per (rule, settings, shapes): pass the same ``rule`` object to reuse it."""
    return _mean_field_descent(jnp.asarray(logits), jnp.asarray(correct), rule, lr, batch_size,
                               num_steps)


@functools.partial(jit_cpu_options, static_argnums=(2, 3, 4, 5))
def _mean_field_descent(logits, correct, rule, lr, batch_size, num_steps):
    def step(z, _):
        grad = exact_success_gradient(z, correct)
        p = jnp.where(correct, jax.nn.softmax(z, -1), 0.0).sum(-1)
        q = rule(p, (grad * grad).sum(-1))
        return z + lr * batch_size * q[:, None] * grad, p.mean()

    z, acc = jax.lax.scan(step, logits, None, length=num_steps)
    p_end = jnp.where(correct, jax.nn.softmax(z, -1), 0.0).sum(-1).mean()
    return jnp.concatenate([acc, p_end[None]])


def steps_to_target(curve: npt.ArrayLike, target: float) -> int:
    """First index where ``curve >= target``; ``len(curve)`` (not reached) otherwise."""
    curve = np.asarray(curve)
    hit = np.flatnonzero(curve >= target)
    return int(hit[0]) if hit.size else len(curve)
