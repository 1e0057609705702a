"""A tabular world model of the toy web and its exact errors against the true simulator.

The model keeps counts ``C[o, a, o']`` of logged real transitions and predicts the empirical
law ``C[o, a, :] / sum C[o, a, :]``; a pair ``(o, a)`` never seen predicts "nothing changes"
(``o' = o``), the prior a browser would give an unknown button. Terminal observations are
absorbing (the episode ends there; their rows are never learned). Termination and success of
a dreamed step follow from the predicted observation: a terminal observation ends the dream,
and the task's verifiable check (``toy_web.is_success``) is applied to it, as the real
environment does -- so the model predicts success and termination through the observation.

Errors are exact because the true law ``T = toy_web.transition_tensor(params)`` is known:

* one-step error: mean over the reachable live observations and all actions of
  ``TV(M(. | o, a), T(. | o, a))``;
* k-step error: ``TV`` between the laws of the observation after ``k`` steps from home, with
  the same policy acting in the model and in the true site (no task stop, terminal
  observations absorbing), for ``k = 1 .. k_max``.

A controlled model error ``noise`` mixes in a hallucination table ``Q`` (each live ``(o, a)``
jumps to one observation drawn once per site): ``M_noise = (1 - noise) M + noise Q``.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from rlvr_lab.envs import toy_web


def empty_counts(params: toy_web.EnvParams) -> jax.Array:
    return jnp.zeros((params.num_obs, params.num_actions, params.num_obs), jnp.float32)


def update_counts(counts: jax.Array, obs: jax.Array, actions: jax.Array, next_obs: jax.Array,
                  mask: jax.Array) -> jax.Array:
    """Add the transitions ``obs -> next_obs`` under ``actions`` where ``mask`` (any shapes,
    all equal) to the counts."""
    return counts.at[obs.ravel(), actions.ravel(), next_obs.ravel()].add(
        mask.ravel().astype(counts.dtype))


def predict(counts: jax.Array, params: toy_web.EnvParams) -> jax.Array:
    """[O, A, O] the model's law of the next observation (module doc)."""
    n_obs, n_act = params.num_obs, params.num_actions
    n = counts.sum(-1, keepdims=True)
    stay = jnp.broadcast_to(jnp.eye(n_obs)[:, None, :], (n_obs, n_act, n_obs))
    learned = counts / jnp.maximum(n, 1.0)
    live = ~toy_web.terminal_obs_mask(params)[:, None, None]
    return jnp.where((n > 0) & live, learned, stay)


def hallucination_table(key: jax.Array, params: toy_web.EnvParams) -> jax.Array:
    """[O, A, O] one-hot: each live ``(o, a)`` jumps to a reachable observation drawn uniformly
    (terminal rows stay absorbing)."""
    n_obs, n_act = params.num_obs, params.num_actions
    allowed = toy_web.reachable_obs_mask(params)
    u = jax.random.uniform(key, (n_obs, n_act))
    target = jax.vmap(jax.vmap(lambda x: toy_web.uniform_choice(x, allowed)))(u)
    terminal = toy_web.terminal_obs_mask(params)
    target = jnp.where(terminal[:, None], jnp.arange(n_obs)[:, None], target)
    return jax.nn.one_hot(target, n_obs)


def with_noise(model: ArrayLike, hallucination: ArrayLike, noise: ArrayLike) -> jax.Array:
    """``(1 - noise) * model + noise * hallucination``."""
    return (1.0 - noise) * model + noise * hallucination


def total_variation(p: ArrayLike, q: ArrayLike) -> jax.Array:
    return 0.5 * jnp.abs(p - q).sum(-1)


def one_step_error(model: ArrayLike, true: ArrayLike, params: toy_web.EnvParams) -> jax.Array:
    """Mean TV over reachable live observations x actions (module doc)."""
    rows = toy_web.reachable_obs_mask(params) & ~toy_web.terminal_obs_mask(params)
    tv = total_variation(model, true).mean(-1)
    return jnp.where(rows, tv, 0.0).sum() / rows.sum()


def policy_kernel(law: ArrayLike, policy_probs: ArrayLike) -> jax.Array:
    """``K[o, o'] = sum_a pi(a | o) law[o, a, o']``."""
    return jnp.einsum("oa,oap->op", policy_probs, law)


def k_step_errors(model: ArrayLike, true: ArrayLike, policy_probs: ArrayLike,
                  params: toy_web.EnvParams, k_max: int) -> jax.Array:
    """[k_max] TV between the step-k observation laws from home in the model and in the site."""
    start = jax.nn.one_hot(toy_web.home_obs(params), params.num_obs)
    km, kt = policy_kernel(model, policy_probs), policy_kernel(true, policy_probs)

    def one(carry, _):
        dm, dt = carry
        dm, dt = dm @ km, dt @ kt
        return (dm, dt), total_variation(dm, dt)

    _, errs = jax.lax.scan(one, (start, start), None, length=k_max)
    return errs


def uniform_policy(params: toy_web.EnvParams) -> jax.Array:
    return jnp.full((params.num_obs, params.num_actions), 1.0 / params.num_actions)


def success_probability(policy_probs: ArrayLike, law: ArrayLike, params: toy_web.EnvParams,
                        task: ArrayLike, horizon: int) -> jax.Array:
    """Exact probability that ``policy_probs`` ([O, A], for this task) succeeds on ``task``
    within ``horizon`` steps when the next observation follows ``law`` ([O, A, O])."""
    start = jax.nn.one_hot(toy_web.home_obs(params), params.num_obs)
    kernel = policy_kernel(law, policy_probs)
    win = toy_web.is_success(jnp.arange(params.num_obs), task, params)

    def one(carry, _):
        dist, won = carry
        dist = dist @ kernel
        won = won + jnp.where(win, dist, 0.0).sum()
        return (jnp.where(win, 0.0, dist), won), None

    (_, won), _ = jax.lax.scan(one, (start, jnp.zeros(())), None, length=horizon)
    return won
