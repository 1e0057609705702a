"""CurES: which prompts to train on — a Beta posterior per prompt and the prompt samplers.

CurES (the CurES paper and code) keeps, for every prompt of the dataset, the counts
``(Acc, All)`` of correct and total rollouts seen so far, and reads the success probability as
the mean of ``Beta(Acc + 1, All - Acc + 1)``, i.e. ``p_hat = (Acc + 1) / (All + 2)``. The
counts are initialised with 4 rollouts per prompt and updated after every step. Prompts are
then drawn from a softmax over the gradient-scale proxy ``sqrt(p_hat (1 - p_hat))``.

Temperature. The authors' sampler uses a per-prompt temperature ``t_i = 100 (Acc_i + 1)``;
since ``sqrt(p(1-p)) <= 0.5`` the exponent is at most ``0.5 / 100 = 0.005``, so every prompt's
probability lies within a factor ``exp(0.005) ~ 1.005`` of every other's: the "curriculum" is
uniform sampling in practice (probably ``(Acc + 1) * 1e-2`` was meant). We expose the
temperature explicitly (:func:`cures_prompt_probs`) and keep the code form as
:func:`cures_code_prompt_probs`, with :func:`max_probability_ratio` to show the pitfall.

Dynamic sampling (DAPO) and the group filters are core:
:func:`rlvr_lab.train.rollout.dynamic_sampling_filter`.

All functions are pure and jittable; the posterior state is a pytree (a ``NamedTuple``).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike, DTypeLike

CURES_INIT_ROLLOUTS = 4  # rollouts per prompt before training, as in the CurES code
CURES_CODE_TEMPERATURE_SCALE = 100.0  # t_i = 100 (Acc_i + 1) in the CurES sampler


class BetaPosterior(NamedTuple):
    """Per-prompt success counts; the posterior is ``Beta(successes + 1, failures + 1)``.

    ``successes`` (Acc) and ``trials`` (All) are float arrays ``[K]`` so a decayed update
    (forgetting old, off-policy evidence) stays representable.
    """

    successes: jnp.ndarray
    trials: jnp.ndarray


def init_posterior(num_prompts: int, dtype: DTypeLike = jnp.float32) -> BetaPosterior:
    """Empty counts: the uniform ``Beta(1, 1)`` prior for each of ``num_prompts`` prompts."""
    if int(num_prompts) < 1:
        raise ValueError(f"num_prompts={num_prompts} is not allowed; it must be >= 1")
    zeros = jnp.zeros((int(num_prompts),), dtype)
    return BetaPosterior(zeros, zeros)


def _check_decay(decay) -> None:
    if not isinstance(decay, jax.core.Tracer) and not 0.0 <= float(decay) <= 1.0:
        raise ValueError(f"decay={decay} is not allowed; it must lie in [0, 1]")


def update_posterior(state: BetaPosterior, prompt_ids: ArrayLike, successes: ArrayLike,
                     mask: ArrayLike | None = None, *,
                     decay: ArrayLike = 1.0) -> BetaPosterior:
    """Add the rollouts of a batch to the counts of their prompts.

    Args:
      state: current counts.
      prompt_ids: int ``[B]``, the dataset index of each group (repeats are summed).
      successes: ``[B, G]`` bool or float in [0, 1] (binary reward, or ``reward > threshold``).
      mask: optional bool ``[B, G]`` of valid rollouts (variable group sizes).
      decay: multiply the counts of the prompts in the batch by ``decay`` before adding
        (1.0 = the CurES code: all history counts equally; < 1 forgets stale evidence).
    """
    _check_decay(decay)
    successes = jnp.asarray(successes)
    if successes.ndim != 2:
        raise ValueError(f"successes must have shape [B, G]; got shape {successes.shape}")
    prompt_ids = jnp.asarray(prompt_ids)
    if prompt_ids.shape != successes.shape[:1]:
        raise ValueError(f"prompt_ids shape {prompt_ids.shape} does not match "
                         f"{successes.shape[:1]} (one id per group)")
    dtype = state.successes.dtype
    m = jnp.ones(successes.shape, dtype) if mask is None else jnp.asarray(mask, dtype)
    if m.shape != successes.shape:
        raise ValueError(f"mask shape {m.shape} does not match successes shape {successes.shape}")
    hits = (successes.astype(dtype) * m).sum(-1)
    tries = m.sum(-1)
    touched = jnp.zeros_like(state.trials).at[prompt_ids].max(jnp.ones_like(tries))
    keep = 1.0 - touched * (1.0 - jnp.asarray(decay, dtype))
    add = lambda x, v: jnp.zeros_like(x).at[prompt_ids].add(v)  # noqa: E731 (repeats summed)
    return BetaPosterior(state.successes * keep + add(state.successes, hits),
                         state.trials * keep + add(state.trials, tries))


def posterior_mean(state: BetaPosterior) -> jax.Array:
    """``p_hat = (Acc + 1) / (All + 2)``, the mean of ``Beta(Acc + 1, All - Acc + 1)``."""
    return (state.successes + 1.0) / (state.trials + 2.0)


def posterior_variance(state: BetaPosterior) -> jax.Array:
    """Variance ``ab / ((a + b)^2 (a + b + 1))`` of ``Beta(a, b)``, a = Acc+1, b = All-Acc+1."""
    a = state.successes + 1.0
    b = state.trials - state.successes + 1.0
    s = a + b
    return a * b / (s * s * (s + 1.0))


def init_posterior_from_rollouts(key: jax.Array, success_prob: ArrayLike,
                                 num_rollouts: int = CURES_INIT_ROLLOUTS
                                 ) -> tuple[BetaPosterior, int]:
    """CurES stage 0: ``num_rollouts`` rollouts of every prompt before training.

    ``success_prob`` ``[K]`` are the prompts' true success probabilities (exact in the prompt
    bank). Returns ``(state, rollouts_spent)`` with ``rollouts_spent = K * num_rollouts`` so
    the initialisation is charged to the rollout budget.
    """
    if int(num_rollouts) < 0:
        raise ValueError(f"num_rollouts={num_rollouts} is not allowed; it must be >= 0")
    p = jnp.clip(jnp.asarray(success_prob), 0.0, 1.0)
    dtype = p.dtype if jnp.issubdtype(p.dtype, jnp.floating) else jnp.float32
    hits = jax.random.binomial(key, jnp.asarray(num_rollouts, dtype), p.astype(dtype))
    trials = jnp.full(p.shape, num_rollouts, dtype)
    return BetaPosterior(hits.astype(dtype), trials), p.shape[0] * int(num_rollouts)


# ----------------------------------------------------------------------------- samplers
def gradient_scale_proxy(p: ArrayLike) -> jax.Array:
    """``sqrt(p (1 - p))``: the reward std of a prompt, CurES' proxy for its gradient scale."""
    p = jnp.clip(jnp.asarray(p), 0.0, 1.0)
    return jnp.sqrt(p * (1.0 - p))


def uniform_prompt_probs(num_prompts: int, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """Uniform distribution over ``num_prompts`` prompts."""
    return jnp.full((int(num_prompts),), 1.0 / int(num_prompts), dtype)


def _check_temperature(temperature) -> None:
    if isinstance(temperature, jax.core.Tracer):
        return
    t = np.asarray(temperature, dtype=float)
    if np.any(~(t > 0)):
        raise ValueError(f"temperature={t.ravel()[np.flatnonzero(~(t.ravel() > 0))[0]]} is not "
                         f"allowed; it must be > 0 (small = greedy on sqrt(p(1-p)), "
                         f"large = uniform)")


def cures_prompt_probs(p_hat: ArrayLike, temperature: ArrayLike) -> jax.Array:
    """CurES sampling distribution ``q_i = softmax(sqrt(p_i (1 - p_i)) / t_i)``.

    ``temperature`` is a scalar or a per-prompt array. With ``sqrt(p(1-p)) <= 0.5``, useful
    temperatures are of order 0.01-0.1: at ``t = 0.05`` a prompt at p = 0.5 is ``e^10`` times
    more likely than one at p = 0 or 1; at ``t >= 10`` sampling is within 5% of uniform.
    """
    _check_temperature(temperature)
    return jax.nn.softmax(gradient_scale_proxy(p_hat) / temperature)


def cures_code_temperature(state: BetaPosterior) -> jax.Array:
    """The authors' per-prompt temperature ``t_i = 100 (Acc_i + 1)``."""
    return CURES_CODE_TEMPERATURE_SCALE * (state.successes + 1.0)


def cures_code_prompt_probs(state: BetaPosterior) -> jax.Array:
    """CurES sampling exactly as in the authors' sampler (nearly uniform; see module doc)."""
    return cures_prompt_probs(posterior_mean(state), cures_code_temperature(state))


def max_probability_ratio(probs: ArrayLike) -> jax.Array:
    """``max q / min q``: 1 for uniform sampling; ``<= exp(0.005)`` for the code temperature."""
    probs = jnp.asarray(probs)
    return probs.max() / probs.min()


def sample_prompts(key: jax.Array, probs: ArrayLike, batch_size: int, *,
                   replace: bool = False) -> jax.Array:
    """Draw ``batch_size`` prompt ids from ``probs`` (int32 ``[batch_size]``).

    ``replace=False`` (the CurES sampler) draws distinct prompts, proportional to ``probs``
    sequentially (``jax.random.choice``); it needs ``batch_size`` <= the number of prompts
    with non-zero probability.
    """
    probs = jnp.asarray(probs)
    if not replace and int(batch_size) > probs.shape[0]:
        raise ValueError(f"batch_size={batch_size} is not allowed without replacement; "
                         f"it must be <= the number of prompts {probs.shape[0]}")
    ids = jax.random.choice(key, probs.shape[0], (int(batch_size),), replace=replace, p=probs)
    return ids.astype(jnp.int32)
