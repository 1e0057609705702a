"""Sequence-level importance sampling and rejection, the adaptive KL controller and KL in the
reward, against float64 loops written from verl's and the papers' definitions."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlvr_lab import losses

RNG = np.random.default_rng(3)
B, T = 6, 5
TRAIN = -np.abs(RNG.normal(1.0, 0.5, (B, T)))
ROLLOUT = TRAIN + RNG.normal(0.0, 0.3, (B, T))
MASK = np.ones((B, T), bool)
MASK[1, 3:] = False
MASK[4, :] = False
ROLLOUT[2] = TRAIN[2] - 9.0      # a sequence far off (ratio e^45 before the clip)


def ref_seq_log_ratio(train, rollout, mask):
    out = []
    for b in range(len(train)):
        s = sum(train[b][t] - rollout[b][t] for t in range(len(train[0])) if mask[b][t])
        out.append(min(max(s, -20.0), 20.0))
    return out


def ref_seq_tis(train, rollout, mask, cap):
    return np.array([[min(math.exp(s), cap)] * len(train[0])
                     for s in ref_seq_log_ratio(train, rollout, mask)])


def ref_seq_mis(train, rollout, mask, cap):
    w, ok = [], []
    for s in ref_seq_log_ratio(train, rollout, mask):
        keep = 1 / cap <= math.exp(s) <= cap
        w.append([math.exp(s) if keep else 0.0] * len(train[0]))
        ok.append([keep] * len(train[0]))
    return np.array(w), np.array(ok)


def f64(fn, *args, **kw):
    with jax.enable_x64(True):
        out = fn(*(jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args), **kw)
        return jax.tree.map(np.asarray, out)


@pytest.mark.parametrize("cap", [1.0, 2.0, 10.0])
def test_sequence_tis_matches_loop(cap):
    got = f64(losses.sequence_tis_weights, TRAIN, ROLLOUT, MASK, cap=cap)
    np.testing.assert_allclose(got, ref_seq_tis(TRAIN, ROLLOUT, MASK, cap), rtol=1e-12)
    assert np.all(np.isfinite(got))


@pytest.mark.parametrize("cap", [1.0, 1.5, 3.0])
def test_sequence_mis_matches_loop(cap):
    w, ok = f64(losses.sequence_mis_weights, TRAIN, ROLLOUT, MASK, cap=cap)
    want_w, want_ok = ref_seq_mis(TRAIN, ROLLOUT, MASK, cap)
    np.testing.assert_allclose(w, want_w, rtol=1e-12)
    np.testing.assert_array_equal(ok, want_ok)
    assert not ok[2].any()          # the far-off sequence is rejected
    assert ok[4].all()              # an empty sequence has ratio 1: kept (it has no tokens)


def test_no_gradient_and_one_token_equals_token_level():
    g = jax.grad(lambda x: losses.sequence_tis_weights(x, ROLLOUT, MASK).sum())(
        jnp.asarray(TRAIN, jnp.float32))
    assert np.all(np.asarray(g) == 0)
    one = np.asarray(losses.sequence_tis_weights(TRAIN[:, :1], ROLLOUT[:, :1], cap=2.0))
    np.testing.assert_allclose(one, np.asarray(losses.tis_weights(TRAIN[:, :1], ROLLOUT[:, :1],
                                                                  cap=2.0)), rtol=1e-6)
    w1, a1 = losses.sequence_mis_weights(TRAIN[:, :1], ROLLOUT[:, :1], cap=1.5)
    w2, a2 = losses.mis_weights(TRAIN[:, :1], ROLLOUT[:, :1], cap=1.5)
    np.testing.assert_array_equal(np.asarray(a1), np.asarray(a2))
    np.testing.assert_allclose(np.asarray(w1), np.asarray(w2), rtol=1e-6)


def test_adaptive_kl_coef_matches_loop():
    coef, target, horizon = 0.1, 6.0, 10000
    want = coef
    got = jnp.asarray(coef)
    for kl, n in [(1.0, 256), (6.0, 256), (20.0, 512), (5.0, 128)]:
        err = min(max(kl / target - 1, -0.2), 0.2)
        want = want * (1 + err * n / horizon)
        got = losses.adaptive_kl_coef(got, kl, n, target_kl=target, horizon=horizon)
    assert float(got) == pytest.approx(want, rel=1e-6)
    # jittable and scannable: the coefficient carried through steps
    step = jax.jit(lambda c, kl: losses.adaptive_kl_coef(c, kl, 64, target_kl=target,
                                                         horizon=horizon))
    assert float(step(jnp.asarray(0.1), 6.0)) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        losses.adaptive_kl_coef(0.1, 1.0, 1, target_kl=0.0, horizon=1.0)


def test_kl_penalized_rewards_matches_loop():
    rewards = RNG.normal(size=B)
    kl = losses.kl("k1", jnp.asarray(TRAIN), jnp.asarray(ROLLOUT))
    got = f64(losses.kl_penalized_rewards, rewards, np.asarray(kl, np.float64), MASK, beta=0.05)
    want = [rewards[b] - 0.05 * sum(float(kl[b, t]) for t in range(T) if MASK[b, t])
            for b in range(B)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(ValueError):
        losses.kl_penalized_rewards(rewards, kl, MASK, beta=-1.0)


arrays = st.integers(1, 4).flatmap(lambda b: st.integers(1, 5).flatmap(lambda t: st.tuples(
    hnp.arrays(np.float64, (b, t), elements=st.floats(-5, -0.01)),
    hnp.arrays(np.float64, (b, t), elements=st.floats(-3, 3)),
    hnp.arrays(np.bool_, (b, t)))))


@settings(max_examples=20, deadline=None)
@given(arrays, st.floats(1.0, 5.0))
def test_hypothesis_sequence_corrections(data, cap):
    train, delta, mask = data
    rollout = train + delta
    w = f64(losses.sequence_tis_weights, train, rollout, mask, cap=cap)
    np.testing.assert_allclose(w, ref_seq_tis(train, rollout, mask, cap), rtol=1e-9)
    assert np.all((w >= 0) & (w <= cap))
    mw, ok = f64(losses.sequence_mis_weights, train, rollout, mask, cap=cap)
    assert np.all(np.isfinite(mw)) and np.all(mw[~ok] == 0)
    assert np.all((mw[ok] >= 1 / cap - 1e-12) & (mw[ok] <= cap + 1e-12))


def test_overlong_penalty_matches_loop():
    from rlvr_lab import advantages
    lengths = np.array([[10, 3000, 3584, 3585, 4000], [4096, 4200, 0, 1, 3800]])
    got = np.asarray(advantages.overlong_penalty(lengths, max_length=4096, buffer=512,
                                                 penalty=1.0))
    want = [[min(-(x - (4096 - 512)) / 512 * 1.0, 0.0) for x in row] for row in lengths]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[1, 0] == pytest.approx(-1.0) and got[0, 2] == 0
    with pytest.raises(ValueError):
        advantages.overlong_penalty(lengths, max_length=100, buffer=200)
