"""The tabular world model: exactness, errors and success probabilities vs float64 NumPy."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from rlvr_lab.envs import toy_web as W
from rlvr_lab.papers.dynaweb import world_model as wm

CFG = W.SiteConfig(num_pages=7, load_fail_prob=0.0, flaky_frac=0.5, max_steps=6)


@jax.jit
def _site_and_law(key):
    p = W.generate_site(key, CFG)
    return p, W.transition_tensor(p)


@pytest.fixture(scope="module")
def site():
    return _site_and_law(jax.random.key(2))


def _all_transitions(p):
    """Every reachable live (observation, action) stepped once in the real environment."""
    rows = np.nonzero(np.asarray(W.reachable_obs_mask(p) & ~W.terminal_obs_mask(p)))[0]
    pairs = np.array([(o, a) for o in rows for a in range(p.num_actions)])

    def next_obs(key, o, a):
        _, s = W.reset_to_task(p, 0)
        s = s.replace(page=o // (p.num_values + 1), field=o % (p.num_values + 1), obs=o)
        return W.step(key, s, a, p)[0]

    nxt = jax.jit(jax.vmap(next_obs))(jax.random.split(jax.random.key(0), len(pairs)),
                                      jnp.asarray(pairs[:, 0]), jnp.asarray(pairs[:, 1]))
    return jnp.asarray(pairs[:, 0]), jnp.asarray(pairs[:, 1]), nxt


def test_model_is_exact_on_a_deterministic_site_after_all_transitions(site):
    p, T = site
    obs, act, nxt = _all_transitions(p)
    counts = wm.update_counts(wm.empty_counts(p), obs, act, nxt, jnp.ones(obs.shape, bool))
    model = wm.predict(counts, p)
    rows = np.asarray(W.reachable_obs_mask(p))
    np.testing.assert_array_equal(np.asarray(model)[rows], np.asarray(T)[rows])
    assert float(wm.one_step_error(model, T, p)) == 0.0
    np.testing.assert_array_equal(wm.k_step_errors(model, T, wm.uniform_policy(p), p, 6), 0.0)


def test_unseen_pairs_predict_no_change_and_masked_transitions_are_ignored(site):
    p, _ = site
    counts = wm.update_counts(wm.empty_counts(p), jnp.array([0, 0]), jnp.array([1, 1]),
                              jnp.array([5, 9]), jnp.array([True, False]))
    model = np.asarray(wm.predict(counts, p))
    assert model[0, 1, 5] == 1.0 and model[0, 1].sum() == 1.0
    assert model[0, 2, 0] == 1.0 and model[3, 0, 3] == 1.0


def _np_k_step(model, true, policy, start, k_max):
    km = np.einsum("oa,oap->op", policy, model)
    kt = np.einsum("oa,oap->op", policy, true)
    dm = dt = start
    out = []
    for _ in range(k_max):
        dm, dt = dm @ km, dt @ kt
        out.append(0.5 * np.abs(dm - dt).sum())
    return np.array(out)


def _np_success(policy, law, win, start, horizon):
    kernel = np.einsum("oa,oap->op", policy, law)
    dist, won = start, 0.0
    for _ in range(horizon):
        dist = dist @ kernel
        won += dist[win].sum()
        dist = np.where(win, 0.0, dist)
    return won


@settings(max_examples=10, deadline=None)
@given(noise=hs.floats(0.0, 1.0), seed=hs.integers(0, 2**16), temp=hs.floats(0.1, 3.0))
def test_errors_and_success_match_float64_numpy(site, noise, seed, temp):
    p, T = site
    k1, k2 = jax.random.split(jax.random.key(seed))
    model = wm.with_noise(T, wm.hallucination_table(k1, p), noise)
    logits = temp * jax.random.normal(k2, (p.num_obs, p.num_actions))
    policy = jax.nn.softmax(logits, -1)
    m64, t64, pi64 = (np.asarray(x, np.float64) for x in (model, T, policy))
    start = np.eye(p.num_obs)[int(W.home_obs(p))]
    np.testing.assert_allclose(_errors(model, T, policy, p), _np_k_step(m64, t64, pi64, start, 6),
                               atol=2e-5)
    rows = np.asarray(W.reachable_obs_mask(p) & ~W.terminal_obs_mask(p))
    tv = 0.5 * np.abs(m64 - t64).sum(-1).mean(-1)
    assert float(wm.one_step_error(model, T, p)) == pytest.approx(tv[rows].mean(), abs=1e-5)
    win = np.asarray(W.success_obs_mask(p))
    for k in range(p.num_tasks):
        assert float(_success(policy, model, p, k)) == pytest.approx(
            _np_success(pi64, m64, win[k], start, 6), abs=2e-5)


_errors = jax.jit(lambda m, t, pi, p: wm.k_step_errors(m, t, pi, p, 6))
_success = jax.jit(lambda pi, law, p, k: wm.success_probability(pi, law, p, k, 6))


def test_hallucination_table_rows(site):
    p, _ = site
    h = np.asarray(wm.hallucination_table(jax.random.key(7), p))
    np.testing.assert_array_equal(h.sum(-1), 1.0)
    assert set(np.unique(h)) <= {0.0, 1.0}
    assert h[:, :, ~np.asarray(W.reachable_obs_mask(p))].sum() == 0
    term = np.nonzero(np.asarray(W.terminal_obs_mask(p)))[0]
    for o in term:
        assert np.all(h[o, :, o] == 1.0)
