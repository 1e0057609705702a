"""The Dyna loop of DynaWeb (arXiv:2601.22149) on the toy web.

One training step of one arm (``make_train(config) -> train(key, arm)``, all in
``lax.scan``):

1. roll out ``group_size`` real episodes per task with the current policy in the site, and
   ``group_size`` dreamed episodes per task in the world model (``world_model.predict`` of
   the counts so far, mixed with hallucinations at ``model_noise``), in one batch: real
   episodes draw the next observation from the site's exact law, dreams from the model's,
   and the same verifiable success check ends both;
2. the real-only arm trains on its real episodes and counts all their interactions; a
   dreaming arm counts, and logs into the world model's counts, only the first
   ``refresh_episodes`` real episodes of each task and only at refresh steps (every
   ``refresh_every`` steps from step 0) -- the others are drawn and discarded (fixed shapes
   under ``vmap``). A refresh therefore reaches the dreams of the next step; the dreams of
   step 0 run in the empty model (every action predicts "nothing changes") and teach nothing;
3. each dreamed slot is replaced, with probability ``expert_ratio``, by a trajectory drawn
   from the logged expert set (``toy_web.expert_actions`` played in the site once, before
   training);
4. GRPO group advantages over whole trajectories (``advantages.grpo`` on the sparse success
   reward, one group per task) and the sequence-level GSPO loss (``losses.gspo``,
   ``seq-mean-token-mean`` aggregation; ``ppo_clip`` optional) with the current policy as
   the behaviour policy (one update per batch, ratio 1), one Adam step on the tabular policy
   ``logits[task, observation, action]``.

All random draws of a step come from one ``jax.random.uniform`` call (inverse-CDF sampling):
each random call adds compile time, and compilation dominates the cost of a run.

Evaluation is exact: the success probability of the policy on the true site
(``world_model.success_probability``), not a sampled estimate. The policy starts uniform.
A "real interaction" is one step of a live episode in the site (what ``toy_web.step`` flags
as ``info["interaction"]``); the tests check that sampling the exact law and stepping the
environment give the same episodes in distribution.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike

from rlvr_lab import advantages, losses
from rlvr_lab.envs import toy_web
from rlvr_lab.papers.dynaweb import world_model
from rlvr_lab.papers.dynaweb.config import Arm, DynaConfig
from rlvr_lab.utils import LOOP_COMPILE, jit_cpu_options


class Trajectory(NamedTuple):
    obs: jnp.ndarray        # [..., H] observation before each step
    action: jnp.ndarray     # [..., H]
    next_obs: jnp.ndarray   # [..., H]
    valid: jnp.ndarray      # [..., H] the step was taken in a live episode (an interaction)
    success: jnp.ndarray    # [...]


def inverse_cdf(u: jax.Array, probs: jax.Array) -> jax.Array:
    """Index drawn from ``probs`` (last axis) by the uniform number ``u`` (shape ``probs[...,
    0]``): the first index whose cumulative probability exceeds ``u``. Normalising the
    cumulative sum keeps a rounding error from landing on a zero-probability tail."""
    cdf = jnp.cumsum(probs, -1)
    cdf = cdf / cdf[..., -1:]
    return jnp.minimum((u[..., None] >= cdf).sum(-1), probs.shape[-1] - 1).astype(jnp.int32)


def rollout(key: jax.Array, logits: jax.Array, laws: jax.Array, law_index: jax.Array,
            tasks: jax.Array, params: toy_web.EnvParams, horizon: int) -> Trajectory:
    """A flat batch of N episodes from home, stepped together.

    ``logits`` [K, O, A] the policy; episode ``n`` pursues task ``tasks[n]`` and draws its next
    observation from ``laws[law_index[n]]`` ([M, O, A, O]). With the site's exact law
    (``toy_web.transition_tensor``) this is the environment itself, step for step the process
    of ``toy_web.step`` (the tests check both agree); with a world model's law it is a dream.
    The episode rules are those of ``toy_web``: an episode ends on success (the verifiable
    check of the observation), on a terminal observation, or after ``horizon`` steps.
    """
    uniforms = jax.random.uniform(key, (horizon, 2, tasks.shape[0]))
    return rollout_from_uniforms(uniforms, logits, laws, law_index, tasks, params)


def rollout_from_uniforms(uniforms: jax.Array, logits: jax.Array, laws: jax.Array,
                          law_index: jax.Array, tasks: jax.Array,
                          params: toy_web.EnvParams) -> Trajectory:
    """:func:`rollout` driven by given uniform numbers ``[H, 2, N]`` (action, next observation):
    all draws of a step come from one random call, which keeps compilation short."""
    n = tasks.shape[0]
    wins = toy_web.success_obs_mask(params)                 # [K, O]
    terminal = toy_web.terminal_obs_mask(params)
    start = jnp.full(n, toy_web.home_obs(params), jnp.int32)

    def one(carry, u):
        obs, done, success = carry
        action = inverse_cdf(u[0], jax.nn.softmax(logits[tasks, obs], axis=-1))
        nxt = inverse_cdf(u[1], laws[law_index, obs, action])
        live = ~done
        new_obs = jnp.where(live, nxt, obs)
        won = live & wins[tasks, new_obs]
        done = done | won | terminal[new_obs]
        return (new_obs, done, success | won), (obs, action, new_obs, live)

    carry = (start, jnp.zeros(n, bool), jnp.zeros(n, bool))
    (_, _, success), steps = jax.lax.scan(one, carry, uniforms)
    obs, action, nxt, valid = (x.T for x in steps)             # [N, H]
    return Trajectory(obs, action, nxt, valid, success)


def _by_task(traj: Trajectory, num_tasks: int) -> Trajectory:
    """[N, ...] with N = K * G episodes ordered task-major -> [K, G, ...]."""
    return jax.tree.map(lambda x: x.reshape((num_tasks, -1) + x.shape[1:]), traj)


def expert_logits(params: toy_web.EnvParams) -> jax.Array:
    """[K, O, A] a policy that always takes ``toy_web.expert_actions``."""
    table = toy_web.expert_actions(params)
    return jnp.where(jax.nn.one_hot(table, params.num_actions) > 0, 0.0, -jnp.inf)


def collect_expert(key: jax.Array, params: toy_web.EnvParams, episodes: int,
                   horizon: int) -> Trajectory:
    """[K, episodes] logged expert episodes in the real site."""
    tasks = jnp.repeat(jnp.arange(params.num_tasks), episodes)
    law = toy_web.transition_tensor(params)[None]
    traj = rollout(key, expert_logits(params), law, jnp.zeros_like(tasks), tasks, params,
                   horizon)
    return _by_task(traj, params.num_tasks)


def log_probs(logits: jax.Array, traj: Trajectory) -> jax.Array:
    """[K, G, H] log pi(action | task, obs) of each step."""
    logp_all = jax.nn.log_softmax(logits, axis=-1)                  # [K, O, A]
    tasks = jnp.arange(logits.shape[0])[:, None, None]
    return logp_all[tasks, traj.obs, traj.action]


def policy_loss(logits: jax.Array, traj: Trajectory, config: DynaConfig) -> jax.Array:
    """GRPO advantages over whole trajectories + the GSPO (or PPO-clip) sequence loss."""
    K, G, H = traj.obs.shape
    adv = advantages.grpo(traj.success.astype(jnp.float32))          # [K, G], group = task
    logp = log_probs(logits, traj).reshape(K * G, H)
    old = jax.lax.stop_gradient(logp)  # one update per batch: the behaviour policy is pi_theta
    token_loss = losses.get(config.loss)(logp, old, adv.reshape(K * G, 1), traj.valid.reshape(
        K * G, H))
    return losses.aggregate(token_loss, traj.valid.reshape(K * G, H), "seq-mean-token-mean")


def _select(mask, a: Trajectory, b: Trajectory) -> Trajectory:
    """Per slot ``a`` where ``mask`` ([K, G]) else ``b``."""
    def pick(x, y):
        m = mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim))
        return jnp.where(m, x, y)
    return jax.tree.map(pick, a, b)


def exact_success(logits: ArrayLike, true_law: ArrayLike, params: toy_web.EnvParams,
                  horizon: int) -> jax.Array:
    """[K] exact success probability of the policy for each task on the true site."""
    probs = jax.nn.softmax(logits, axis=-1)
    return jax.vmap(lambda p, k: world_model.success_probability(p, true_law, params, k, horizon))(
        probs, jnp.arange(params.num_tasks))


class Metrics(NamedTuple):
    success: jnp.ndarray          # [S, K] exact success per task after each step
    interactions: jnp.ndarray     # [S] cumulative real interactions after each step
    batch_success: jnp.ndarray    # [S] success rate of the training batch (dreamed or real)
    one_step_error: jnp.ndarray   # [S] of the world model the step dreamed in
    horizon_error: jnp.ndarray    # [S] its H-step error under the uniform policy


class Summary(NamedTuple):
    initial_success: jnp.ndarray      # [K] of the uniform policy
    k_errors_uniform: jnp.ndarray     # [H] final model, uniform policy
    k_errors_policy: jnp.ndarray      # [H] final model, final policy (mean over tasks)
    expert_interactions: jnp.ndarray  # scalar: steps in the logged expert set
    expert_success: jnp.ndarray       # scalar: success rate of the logged expert set


def make_train(config: DynaConfig) -> Callable[[jax.Array, Arm], tuple[Metrics, Summary]]:
    """``train(key, arm) -> (Metrics, Summary)``; the site is drawn from ``key``, so arms run
    with one key share the site, the expert set, the hallucination table and every draw."""
    H, G = config.horizon, config.group_size
    optimizer = optax.adam(config.learning_rate)

    def train(key, arm: Arm):
        k_site, k_expert, k_noise, k_loop = jax.random.split(key, 4)
        params = toy_web.generate_site(k_site, config.site)
        K = params.num_tasks
        true_law = toy_web.transition_tensor(params)
        hallucination = world_model.hallucination_table(k_noise, params)
        expert = collect_expert(k_expert, params, config.expert_episodes, H)
        uniform = world_model.uniform_policy(params)
        slot = jnp.arange(G)[None, :]
        tasks = jnp.repeat(jnp.arange(K), G)
        # real and dreamed episodes are one batch: the first K*G follow the site's law
        both_tasks = jnp.concatenate([tasks, tasks])
        both_laws = jnp.repeat(jnp.arange(2), K * G)

        def step(carry, inputs):
            logits, opt_state, counts, interactions = carry
            t, key = inputs
            u = jax.random.uniform(key, (H * 2 * 2 * K * G + 2 * K * G,))
            u_roll = u[:H * 4 * K * G].reshape(H, 2, 2 * K * G)
            u_mix, u_pick = u[H * 4 * K * G:].reshape(2, K, G)
            # the model is refreshed from this step's real episodes before dreaming, but the
            # real episodes and the dreams are drawn together: the refresh only affects the
            # next step's dreams (the first refresh comes from the uniform policy's episodes)
            law = world_model.with_noise(world_model.predict(counts, params), hallucination,
                                         arm.model_noise)
            both = rollout_from_uniforms(u_roll, logits, jnp.stack([true_law, law]), both_laws,
                                         both_tasks, params)
            real = _by_task(jax.tree.map(lambda x: x[:K * G], both), K)
            dream = _by_task(jax.tree.map(lambda x: x[K * G:], both), K)
            refresh = (t % config.refresh_every) == 0
            counted = jnp.where(arm.dream > 0, refresh & (slot < config.refresh_episodes), True)
            counted = jnp.broadcast_to(counted, (K, G))
            logged = real.valid & counted[..., None]
            counts = world_model.update_counts(counts, real.obs, real.action, real.next_obs, logged)
            interactions = interactions + logged.sum()

            pick = jnp.floor(u_pick * config.expert_episodes).astype(jnp.int32)
            drawn = jax.tree.map(lambda x: jnp.take_along_axis(
                x, pick.reshape(pick.shape + (1,) * (x.ndim - 2)), axis=1), expert)
            use_expert = u_mix < arm.expert_ratio
            imagined = _select(use_expert, drawn, dream)
            batch = _select(jnp.broadcast_to(arm.dream > 0, (K, G)), imagined, real)

            loss, grads = jax.value_and_grad(policy_loss)(logits, batch, config)
            updates, opt_state = optimizer.update(grads, opt_state, logits)
            logits = optax.apply_updates(logits, updates)
            metrics = Metrics(
                success=exact_success(logits, true_law, params, H),
                interactions=interactions,
                batch_success=batch.success.mean(),
                one_step_error=world_model.one_step_error(law, true_law, params),
                horizon_error=world_model.k_step_errors(law, true_law, uniform, params, H)[-1])
            return (logits, opt_state, counts, interactions), metrics

        logits = jnp.zeros((K, params.num_obs, params.num_actions), jnp.float32)
        carry = (logits, optimizer.init(logits), world_model.empty_counts(params),
                 jnp.zeros((), jnp.int32))
        keys = jax.random.split(k_loop, config.num_steps)
        (logits, _, counts, _), metrics = jax.lax.scan(
            step, carry, (jnp.arange(config.num_steps), keys))
        final_law = world_model.with_noise(world_model.predict(counts, params), hallucination,
                                           arm.model_noise)
        probs = jax.nn.softmax(logits, axis=-1)
        k_policy = jax.vmap(
            lambda p: world_model.k_step_errors(final_law, true_law, p, params, H))(probs)
        summary = Summary(
            initial_success=exact_success(jnp.zeros_like(logits), true_law, params, H),
            k_errors_uniform=world_model.k_step_errors(final_law, true_law, uniform, params, H),
            k_errors_policy=k_policy.mean(0),
            expert_interactions=expert.valid.sum(),
            expert_success=expert.success.mean())
        return metrics, summary

    return train


def make_run_arms(config: DynaConfig) -> Callable[[jax.Array, Arm], tuple[Metrics, Summary]]:
    """``run(keys [S], arms) -> (Metrics, Summary)`` with leaves ``[S, arms, ...]``: seeds by
    ``vmap`` over keys, arms by ``vmap`` over the stacked ``Arm`` (paired: one key per seed
    for every arm), all in one ``jit``."""
    train = make_train(config)
    # level 1: the world-model rollouts are run-bound (quick dynaweb 12.5 -> 8.7 s vs level 0)
    return jit_cpu_options(jax.vmap(jax.vmap(train, in_axes=(None, 0)), in_axes=(0, None)),
                            options=LOOP_COMPILE)
