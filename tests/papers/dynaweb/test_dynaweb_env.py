"""The toy web's transition and success rules, site generation and determinism."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from rlvr_lab.envs import toy_web as W

L, V = 3, 3
CLICK0, CLICK1, CLICK2 = 0, 1, 2
TYPE0, TYPE1, TYPE2 = L, L + 1, L + 2
SUBMIT, BACK = L + V, L + V + 1


STEP = jax.jit(W.step)
GENERATE = jax.jit(W.generate_site, static_argnums=1)


def hand_site(load_fail_prob=0.0, max_steps=10):
    """home(0) -> form(1), purchase(2); form(1) -> nav(3); nav(3) -> flaky nav(4).
    Tasks: 0 reach page 4, 1 reach page 3, 2 submit the form with value 2."""
    return W.EnvParams(
        links=jnp.array([[1, 2, -1], [3, -1, -1], [-1, -1, -1], [4, -1, -1], [-1, -1, -1]]),
        parent=jnp.array([0, 0, 0, 1, 3]),
        page_type=jnp.array([W.NAV, W.FORM, W.PURCHASE, W.NAV, W.NAV]),
        flaky=jnp.array([False, False, False, False, True]),
        task_kind=jnp.array([W.REACH_TASK, W.REACH_TASK, W.FORM_TASK]),
        task_page=jnp.array([4, 3, 1]), task_value=jnp.array([-1, -1, 2]),
        load_fail_prob=load_fail_prob, max_steps=max_steps, num_values=V)


def play(params, task, actions, key=0):
    _, state = W.reset_to_task(params, task)
    out = []
    for i, a in enumerate(actions):
        obs, state, r, done, info = STEP(jax.random.key(key + i), state, jnp.int32(a), params)
        out.append((int(obs), float(r), bool(done), bool(info["interaction"])))
    return out, state


def obs_of(params, page, field=0):
    return int(W.live_obs(page, field, params))


def test_observation_layout():
    p = hand_site()
    assert p.num_obs == 5 * (V + 1) + V + 1 and p.num_actions == L + V + 2
    assert int(W.confirm_obs(2, p)) == 5 * (V + 1) + 2
    assert int(W.purchased_obs(p)) == 5 * (V + 1) + V
    assert np.asarray(W.terminal_obs_mask(p)).sum() == V + 1
    # typed fields are reachable only on the form page
    reach = np.asarray(W.reachable_obs_mask(p))
    assert reach[obs_of(p, 1, 3)] and not reach[obs_of(p, 3, 1)]
    np.testing.assert_array_equal(W.features(jnp.int32(obs_of(p, 1, 2)), p), [1, W.FORM, 2, 3,
                                                                               -1, -1])


def test_clicks_back_and_empty_slots():
    p = hand_site()
    steps, state = play(p, 0, [CLICK2, CLICK0, CLICK0, BACK, BACK, BACK])
    assert [s[0] for s in steps] == [obs_of(p, 0), obs_of(p, 1), obs_of(p, 3), obs_of(p, 1),
                                     obs_of(p, 0), obs_of(p, 0)]
    assert all(s[3] for s in steps) and not any(s[2] for s in steps)  # no-ops still count
    assert int(state.t) == 6


def test_typing_only_on_the_form_and_leaving_empties_it():
    p = hand_site()
    steps, _ = play(p, 2, [TYPE1, CLICK0, TYPE2, TYPE0, CLICK0, BACK])
    assert [s[0] for s in steps] == [obs_of(p, 0), obs_of(p, 1), obs_of(p, 1, 3),
                                     obs_of(p, 1, 1), obs_of(p, 3), obs_of(p, 1, 0)]


def test_form_submission_success_and_failure():
    p = hand_site()
    steps, state = play(p, 2, [CLICK0, SUBMIT, TYPE2, SUBMIT])
    assert steps[1][0] == obs_of(p, 1) and not steps[1][2]          # empty field: no-op
    assert steps[3] == (int(W.confirm_obs(2, p)), 1.0, True, True)
    assert bool(state.success)
    steps, state = play(p, 2, [CLICK0, TYPE1, SUBMIT, CLICK0])
    assert steps[2] == (int(W.confirm_obs(1, p)), 0.0, True, True)   # wrong value: ends, fails
    assert steps[3] == (int(W.confirm_obs(1, p)), 0.0, True, False)  # finished: no interaction
    assert not bool(state.success)
    steps, _ = play(p, 0, [CLICK0, TYPE2, SUBMIT])                      # right value, reach task
    assert steps[2] == (int(W.confirm_obs(2, p)), 0.0, True, True)


def test_purchase_is_irreversible_failure():
    p = hand_site()
    steps, state = play(p, 2, [CLICK1, SUBMIT, BACK])
    assert steps[1] == (int(W.purchased_obs(p)), 0.0, True, True)
    assert steps[2][0] == int(W.purchased_obs(p)) and not steps[2][3]
    assert not bool(state.success)
    steps, _ = play(p, 0, [SUBMIT, CLICK0, SUBMIT])  # submit on home / a form with no value
    assert [s[0] for s in steps] == [obs_of(p, 0), obs_of(p, 1), obs_of(p, 1)]


def test_reach_success_on_arrival():
    p = hand_site()
    steps, state = play(p, 0, [CLICK0, CLICK0, CLICK0])
    assert steps[2] == (obs_of(p, 4), 1.0, True, True) and bool(state.success)
    steps, _ = play(p, 1, [CLICK0, CLICK0])      # passing through a target ends the episode
    assert steps[1] == (obs_of(p, 3), 1.0, True, True)


def test_flaky_page_fails_to_load_and_back_never_fails():
    always = hand_site(load_fail_prob=1.0)
    steps, _ = play(always, 0, [CLICK0, CLICK0, CLICK0, CLICK0, BACK])
    assert [s[0] for s in steps] == [obs_of(always, 1), obs_of(always, 3), obs_of(always, 3),
                                     obs_of(always, 3), obs_of(always, 1)]
    assert all(s[3] for s in steps)


def test_horizon_ends_the_episode():
    p = hand_site(max_steps=3)
    steps, state = play(p, 0, [CLICK2, CLICK2, CLICK2, CLICK0])
    assert [s[2] for s in steps] == [False, False, True, True]
    assert [s[3] for s in steps] == [True, True, True, False]
    assert int(state.t) == 3 and not bool(state.success)


def test_transition_tensor_matches_step_and_monte_carlo():
    p = GENERATE(jax.random.key(3), W.SiteConfig(flaky_frac=0.5, load_fail_prob=0.4))
    T = np.asarray(jax.jit(W.transition_tensor)(p), dtype=np.float64)
    np.testing.assert_allclose(T.sum(-1), 1.0, atol=1e-6)
    live = np.nonzero(np.asarray(W.reachable_obs_mask(p) & ~W.terminal_obs_mask(p)))[0]
    pairs = np.array([(o, a) for o in live for a in range(p.num_actions)])
    n = 2000

    def next_obs(key, o, a):
        page, field = o // (V + 1), o % (V + 1)
        _, s = W.reset_to_task(p, 0)
        s = s.replace(page=page, field=field, obs=o)
        return W.step(key, s, a, p)[0]

    per_pair = jax.vmap(next_obs, in_axes=(0, None, None))
    sample = jax.jit(jax.vmap(per_pair, in_axes=(0, 0, 0)))
    keys = jax.random.split(jax.random.key(0), (len(pairs), n))
    obs = np.asarray(sample(keys, jnp.asarray(pairs[:, 0]), jnp.asarray(pairs[:, 1])))
    for (o, a), draws in zip(pairs, obs):
        freq = np.bincount(draws, minlength=p.num_obs) / n
        tol = 5 * np.sqrt(T[o, a] * (1 - T[o, a]) / n) + 1e-9  # 5 binomial standard errors
        assert np.all(np.abs(freq - T[o, a]) <= tol), (o, a)


@pytest.mark.parametrize("seed", range(6))
def test_generated_site_invariants(seed):
    cfg = W.SiteConfig(num_pages=9, num_reach_tasks=3, num_form_tasks=3, flaky_frac=0.5)
    p = GENERATE(jax.random.key(seed), cfg)
    links, parent = np.asarray(p.links), np.asarray(p.parent)
    assert parent[0] == 0 and all(parent[q] < q for q in range(1, cfg.num_pages))
    for q in range(1, cfg.num_pages):  # p is linked exactly once, from its parent
        assert (links == q).sum() == 1 and q in links[parent[q]]
    kinds = np.asarray(p.page_type)
    assert (kinds == W.FORM).sum() == 1 and (kinds == W.PURCHASE).sum() == 1 and kinds[0] == W.NAV
    assert not bool(p.flaky[0])
    reach = np.asarray(p.task_page)[:3]
    assert len(set(reach)) == 3 and all(kinds[reach] == W.NAV) and 0 not in reach
    values = np.asarray(p.task_value)[3:]
    assert sorted(values) == [0, 1, 2]
    assert all(np.asarray(p.task_page)[3:] == np.nonzero(kinds == W.FORM)[0][0])


def test_same_key_same_site_and_steps():
    cfg = W.SiteConfig()
    a = GENERATE(jax.random.key(11), cfg)
    b = GENERATE(jax.random.key(11), cfg)
    c = GENERATE(jax.random.key(12), cfg)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    assert not all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(c)))
    actions = [0, 1, 2, 0, 7, 3, 6, 1]
    assert play(a, 1, actions, key=4)[0] == play(b, 1, actions, key=4)[0]


@pytest.mark.parametrize("bad, word", [
    (dict(max_steps=2), "max_steps"), (dict(max_steps=16), "max_steps"),
    (dict(num_pages=3), "num_pages"), (dict(num_form_tasks=4), "num_form_tasks"),
    (dict(num_reach_tasks=8), "num_reach_tasks"), (dict(load_fail_prob=1.5), "load_fail_prob"),
    (dict(num_links=0), "num_links"), (dict(num_reach_tasks=0, num_form_tasks=0), "num_reach"),
])
def test_bad_site_config_is_rejected(bad, word):
    with pytest.raises(ValueError, match=word):
        W.SiteConfig(**bad)


@jax.jit
def _episode(key, actions):
    """Play ``actions`` on a generated flaky site; per step (obs, reward, done, interaction,
    t, success) and the site."""
    p = W.generate_site(key, W.SiteConfig(num_pages=8, flaky_frac=0.5, load_fail_prob=0.5,
                                          max_steps=8))
    _, state = W.reset(key, p)

    def one(state, x):
        a, k = x
        obs, state, r, done, info = W.step(k, state, a, p)
        return state, (obs, r, done, info["interaction"], state.t, state.success,
                       W.is_success(obs, state.task, p))

    _, out = jax.lax.scan(one, state, (actions, jax.random.split(key, actions.shape[0])))
    return out, W.reachable_obs_mask(p)


@settings(max_examples=25, deadline=None)
@given(seed=hs.integers(0, 2**16), actions=hs.lists(hs.integers(0, L + V + 1), min_size=12,
                                                    max_size=12))
def test_episode_invariants(seed, actions):
    (obs, r, done, live, t, success, check), reachable = _episode(jax.random.key(seed),
                                                                   jnp.array(actions))
    obs, r, done, live, t = map(np.asarray, (obs, r, done, live, t))
    assert np.asarray(reachable)[obs].all()                       # never an impossible page
    assert np.all(np.diff(done.astype(int)) >= 0)                  # done is absorbing
    assert np.array_equal(live[1:], ~done[:-1]) and live[0]        # interactions until done
    assert np.array_equal(t, np.cumsum(live)) and t.max() <= 8     # one step per interaction
    assert r.sum() <= 1 and np.array_equal(r > 0, live & np.asarray(check))
    assert bool(np.asarray(success)[-1]) == (r.sum() == 1)
