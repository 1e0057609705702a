"""The Dyna loop: rollouts, interaction counting, the loss against NumPy, configs, keys."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from rlvr_lab.envs import toy_web as W
from rlvr_lab.papers import dynaweb as D
from rlvr_lab.papers.dynaweb import dyna

SITE = W.SiteConfig(num_pages=6, num_reach_tasks=1, num_form_tasks=1, max_steps=6)
CFG = D.DynaConfig(site=SITE, group_size=4, num_steps=5, refresh_every=2, refresh_episodes=2,
                   expert_episodes=2)
ARMS = D.stack_arms([D.real_arm(), D.dream_arm(), D.dream_arm(expert_ratio=0.5, model_noise=0.3)])


@pytest.fixture(scope="module")
def runs():
    run = D.make_run_arms(CFG)
    keys = jax.random.split(jax.random.key(0), 2)
    return run(keys, ARMS), run(keys, ARMS)


def test_same_key_same_numbers_and_paired_sites(runs):
    (m1, s1), (m2, s2) = runs
    for a, b in zip(jax.tree.leaves((m1, s1)), jax.tree.leaves((m2, s2))):
        np.testing.assert_array_equal(a, b)
    init = np.asarray(s1.initial_success)              # [seeds, arms, tasks]
    np.testing.assert_array_equal(init[:, 0], init[:, 1])   # arms of a seed share the site
    assert not np.array_equal(init[0, 0], init[1, 0])


def test_interaction_counting(runs):
    (m, s), _ = runs
    inter = np.asarray(m.interactions)                  # [seeds, arms, steps], cumulative
    step = np.diff(np.concatenate([np.zeros(inter.shape[:2] + (1,)), inter], -1), axis=-1)
    K, G, H = SITE.num_tasks, CFG.group_size, SITE.max_steps
    # real-only: every step K*G episodes of 1..H real steps each
    assert np.all((step[:, 0] >= K * G) & (step[:, 0] <= K * G * H))
    # dreaming: refresh steps 0, 2, 4 spend K*refresh_episodes episodes, the others nothing
    refresh = np.arange(CFG.num_steps) % CFG.refresh_every == 0
    for arm in (1, 2):
        assert np.all(step[:, arm, ~refresh] == 0)
        n = K * CFG.refresh_episodes
        assert np.all((step[:, arm, refresh] >= n) & (step[:, arm, refresh] <= n * H))
    assert np.all(np.asarray(s.expert_interactions) > 0)


def test_expert_episode_lengths_are_shortest_paths():
    cfg = W.SiteConfig(num_pages=9, load_fail_prob=0.0, max_steps=12)

    @jax.jit
    def lengths(key):
        p = W.generate_site(key, cfg)
        traj = dyna.collect_expert(key, p, 3, cfg.max_steps)
        return traj, W.page_depth(p)[p.task_page], p.task_kind

    for seed in range(3):
        traj, depth, kind = lengths(jax.random.key(seed))
        valid = np.asarray(traj.valid)
        # interactions form a prefix of the horizon and stop at the success
        assert np.all(np.diff(valid.astype(int), axis=-1) <= 0)
        assert np.all(np.asarray(traj.success))
        shortest = np.asarray(depth) + 2 * (np.asarray(kind) == W.FORM_TASK)
        np.testing.assert_array_equal(valid.sum(-1), np.broadcast_to(shortest[:, None], (4, 3)))


def test_rollout_on_the_true_law_matches_stepping_the_environment():
    """Episodes sampled from the exact law and from ``toy_web.step`` agree in distribution:
    success rate and mean length of the uniform policy, 4000 episodes each."""
    p = W.generate_site(jax.random.key(4), W.SiteConfig(load_fail_prob=0.5, flaky_frac=0.6))
    n, H = 4000, 10
    tasks = jnp.zeros(n, jnp.int32) + 1

    @jax.jit
    def by_law(key):
        logits = jnp.zeros((p.num_tasks, p.num_obs, p.num_actions))
        t = dyna.rollout(key, logits, W.transition_tensor(p)[None], jnp.zeros(n, jnp.int32),
                         tasks, p, H)
        return t.success.mean(), t.valid.sum(-1).mean()

    @jax.jit
    def by_step(key):
        k_act, k_step = jax.random.split(key)
        actions = jax.random.randint(k_act, (n, H), 0, p.num_actions)
        step_keys = jax.random.split(k_step, (n, H))

        def episode(acts, keys):
            _, s = W.reset_to_task(p, 1)

            def one(s, x):
                _, s, _, _, info = W.step(x[1], s, x[0], p)
                return s, info["interaction"]
            s, live = jax.lax.scan(one, s, (acts, keys))
            return s.success, live.sum()
        won, length = jax.vmap(episode)(actions, step_keys)
        return won.mean(), length.mean()

    (s1, l1), (s2, l2) = by_law(jax.random.key(1)), by_step(jax.random.key(2))
    se = np.sqrt(2 * max(float(s1) * (1 - float(s1)), 1e-3) / n)
    assert abs(float(s1) - float(s2)) < 5 * se
    assert abs(float(l1) - float(l2)) < 0.25


def _np_loss_grad(logits, obs, act, valid, success):
    """float64 reference: GRPO advantages (std, ddof=1) and the gradient of the GSPO loss at
    ratio 1, -mean_i A_i mean_t grad log pi(a_t | task_i, o_t)."""
    K, G, H = obs.shape
    r = success.astype(np.float64)
    std = r.std(-1, ddof=1, keepdims=True)
    adv = np.where(std > 0, (r - r.mean(-1, keepdims=True)) / (std + 1e-6), 0.0)
    lg = logits.astype(np.float64)
    pi = np.exp(lg - lg.max(-1, keepdims=True))
    pi /= pi.sum(-1, keepdims=True)
    grad = np.zeros_like(lg)
    for k in range(K):
        for g in range(G):
            n = valid[k, g].sum()
            for t in range(H):
                if valid[k, g, t]:
                    e = -pi[k, obs[k, g, t]].copy()
                    e[act[k, g, t]] += 1.0
                    grad[k, obs[k, g, t]] -= adv[k, g] * e / n / (K * G)
    return grad


@settings(max_examples=8, deadline=None)
@given(seed=hs.integers(0, 2**16))
def test_loss_gradient_matches_float64_numpy(seed):
    K, G, H, n_obs, n_act = 2, 4, 5, 6, 3
    rng = np.random.default_rng(seed)
    obs = rng.integers(0, n_obs, (K, G, H))
    act = rng.integers(0, n_act, (K, G, H))
    lengths = rng.integers(1, H + 1, (K, G))
    valid = np.arange(H)[None, None] < lengths[..., None]
    success = rng.random((K, G)) < 0.5
    logits = rng.normal(size=(K, n_obs, n_act)).astype(np.float32)
    traj = dyna.Trajectory(jnp.asarray(obs), jnp.asarray(act), jnp.asarray(obs),
                           jnp.asarray(valid), jnp.asarray(success))
    grad = _grad(jnp.asarray(logits), traj)
    np.testing.assert_allclose(grad, _np_loss_grad(logits, obs, act, valid, success), atol=1e-5)


_grad = jax.jit(jax.grad(lambda lg, tr: dyna.policy_loss(lg, tr, D.DynaConfig())))


@settings(max_examples=20, deadline=None)
@given(probs=hs.lists(hs.floats(0.0, 1.0), min_size=2, max_size=6), u=hs.floats(0.0, 0.999999))
def test_inverse_cdf_never_picks_an_impossible_index(probs, u):
    probs = np.array(probs, np.float32)
    if probs.sum() == 0:
        probs[0] = 1.0
    i = int(dyna.inverse_cdf(jnp.float32(u), jnp.asarray(probs)))
    assert probs[i] > 0


@pytest.mark.parametrize("bad, word", [
    (dict(group_size=1), "group_size"), (dict(refresh_episodes=9), "refresh_episodes"),
    (dict(loss="cispo"), "loss"), (dict(learning_rate=0.0), "learning_rate"),
    (dict(num_steps=0), "num_steps"), (dict(site="big"), "site"),
])
def test_bad_config_is_rejected(bad, word):
    with pytest.raises(ValueError, match=word):
        D.DynaConfig(**bad)


@pytest.mark.parametrize("kwargs, word", [
    (dict(expert_ratio=1.5), "expert_ratio"), (dict(model_noise=-0.1), "model_noise"),
    (dict(expert_ratio=True), "expert_ratio"),
])
def test_bad_arm_is_rejected(kwargs, word):
    with pytest.raises(ValueError, match=word):
        D.dream_arm(**kwargs)
