"""rlvr_lab.losses against loop references, hand-derived gradients and exact expectations."""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab import losses

B, T = 4, 6
RNG = np.random.default_rng(0)
LOG_PROB = -RNG.uniform(0.05, 3.0, (B, T))
# log-ratios spread over [-1, 1]: rho from 0.37 to 2.7, inside and outside every clip range
OLD_LOG_PROB = LOG_PROB - np.linspace(-1.0, 1.0, B * T).reshape(B, T)[:, RNG.permutation(T)]
ADV = np.array([[1.5], [-0.7], [0.0], [-2.0]])
MASK = np.array([
    [1, 1, 1, 1, 1, 1],
    [1, 1, 1, 0, 0, 0],
    [1, 0, 0, 0, 0, 0],
    [1, 1, 1, 1, 0, 0],
], bool)
MODES = losses.AGG_MODES
DTYPES = [jnp.float32, jnp.float64]


@pytest.fixture(params=DTYPES, ids=["f32", "f64"])
def dtype(request):
    with jax.enable_x64(request.param == jnp.float64):
        yield request.param


def _tol(dtype):
    return 1e-12 if dtype == jnp.float64 else 2e-6


def _arrays(dtype):
    return (jnp.asarray(LOG_PROB, dtype), jnp.asarray(OLD_LOG_PROB, dtype), jnp.asarray(ADV, dtype))


# ----------------------------------------------------------------------------- aggregate
def test_aggregate_hand_values_differ_per_mode():
    loss = jnp.array([[1.0, 2.0, 3.0], [4.0, 100.0, 100.0]])
    mask = jnp.array([[True, True, True], [True, False, False]])
    expected = {"token-mean": 10 / 4, "seq-mean-token-mean": (2 + 4) / 2,
                "seq-mean-token-sum": (6 + 4) / 2, "seq-mean-token-sum-norm": 10 / 6}
    for mode, value in expected.items():
        np.testing.assert_allclose(losses.aggregate(loss, mask, mode), value, rtol=1e-6)
    assert len({round(v, 6) for v in expected.values()}) == 4


@pytest.mark.parametrize("mode", MODES)
def test_aggregate_matches_reference(dtype, mode):
    token_loss = RNG.normal(size=(B, T))
    out = losses.aggregate(jnp.asarray(token_loss, dtype), MASK, mode)
    assert out.dtype == dtype and out.shape == ()
    np.testing.assert_allclose(out, ref.aggregate(token_loss, MASK, mode), rtol=_tol(dtype))
    # no mask = every token valid
    np.testing.assert_allclose(losses.aggregate(jnp.asarray(token_loss, dtype), None, mode),
                               ref.aggregate(token_loss, np.ones((B, T), bool), mode),
                               rtol=_tol(dtype))


def test_aggregate_modes_all_differ_on_ragged_mask():
    token_loss = jnp.asarray(np.abs(RNG.normal(size=(B, T))) + 0.5)
    values = [float(losses.aggregate(token_loss, MASK, mode)) for mode in MODES]
    for i in range(4):
        for j in range(i):
            assert abs(values[i] - values[j]) > 1e-3, (MODES[i], MODES[j])


@pytest.mark.parametrize("mode", MODES)
def test_aggregate_empty_rows_and_padding(mode):
    token_loss = np.array([[1.0, 2.0, 5.0], [7.0, 7.0, 7.0], [3.0, 9.0, 9.0]])
    mask = np.array([[1, 1, 0], [0, 0, 0], [1, 0, 0]], bool)
    # documented: seq-mean-token-mean leaves empty rows out, seq-mean-token-sum keeps them
    expected = {"token-mean": 6 / 3, "seq-mean-token-mean": (1.5 + 3) / 2,
                "seq-mean-token-sum": (3 + 0 + 3) / 3, "seq-mean-token-sum-norm": 6 / 9,
                "token-sum": 6.0}[mode]
    assert expected == pytest.approx(ref.aggregate(token_loss, mask, mode))
    np.testing.assert_allclose(losses.aggregate(token_loss, mask, mode), expected, rtol=1e-6)
    # whatever sits at masked positions (padding log-probs can be -inf) stays out
    poisoned = np.where(mask, token_loss, np.inf)
    poisoned[1, 0] = np.nan
    np.testing.assert_allclose(losses.aggregate(poisoned, mask, mode), expected, rtol=1e-6)
    # a fully masked batch gives 0, not NaN
    assert float(losses.aggregate(token_loss, np.zeros_like(mask), mode)) == 0.0


def test_aggregate_errors():
    with pytest.raises(ValueError, match="seq-mean"):
        losses.aggregate(jnp.ones((2, 3)), None, "seq-mean")
    with pytest.raises(ValueError, match=r"\(6,\)"):
        losses.aggregate(jnp.ones(6), None, "token-mean")
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        losses.aggregate(jnp.ones((2, 3)), jnp.ones((2, 2), bool), "token-mean")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-10, 10), min_size=B * T, max_size=B * T),
       st.lists(st.booleans(), min_size=B * T, max_size=B * T))
def test_property_aggregate_reference(values, bits):
    token_loss, mask = np.reshape(values, (B, T)), np.reshape(bits, (B, T))
    with jax.enable_x64(True):
        for mode in MODES:
            np.testing.assert_allclose(losses.aggregate(token_loss, mask, mode),
                                       ref.aggregate(token_loss, mask, mode),
                                       rtol=1e-12, atol=1e-12, err_msg=mode)


# ----------------------------------------------------------------------------- pg, ppo_clip
def test_pg_value_and_gradient(dtype):
    log_prob, old, adv = _arrays(dtype)
    out = losses.pg(log_prob, old, adv)
    np.testing.assert_allclose(out, ref.pg(LOG_PROB, ADV), rtol=_tol(dtype))
    grad = jax.grad(lambda lp: losses.pg(lp, old, adv).sum())(log_prob)
    np.testing.assert_allclose(grad, np.broadcast_to(-ADV, (B, T)), rtol=_tol(dtype))


PPO_CASES = [
    {}, {"epsilon": 0.1}, {"epsilon": 0.2, "epsilon_high": 0.28},
    {"clip_ratio_c": 3.0}, {"epsilon": 0.2, "epsilon_high": 0.28, "clip_ratio_c": 1.5},
]


@pytest.mark.parametrize("kwargs", PPO_CASES, ids=str)
def test_ppo_clip_matches_reference(dtype, kwargs):
    log_prob, old, adv = _arrays(dtype)
    out = losses.ppo_clip(log_prob, old, adv, **kwargs)
    assert out.dtype == dtype and out.shape == (B, T)
    np.testing.assert_allclose(out, ref.ppo_clip(LOG_PROB, OLD_LOG_PROB, ADV, **kwargs),
                               rtol=_tol(dtype), atol=_tol(dtype))


def test_ppo_clip_grid_and_dual_clip():
    rho = np.array([0.05, 0.5, 0.79, 0.81, 1.0, 1.1, 1.19, 1.21, 1.27, 1.29, 2.0, 3.5, 10.0])
    advs = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
    log_prob = np.log(np.tile(rho, (len(advs), 1)))
    old = np.zeros_like(log_prob)
    adv = advs[:, None]
    with jax.enable_x64(True):
        for kwargs in PPO_CASES:
            np.testing.assert_allclose(losses.ppo_clip(log_prob, old, adv, **kwargs),
                                       ref.ppo_clip(log_prob, old, adv, **kwargs),
                                       rtol=1e-12, atol=1e-15, err_msg=str(kwargs))
        # dual clip by hand: A = -2, rho = 10: plain PPO loss 20, dual clip caps it at c|A| = 6
        plain = np.asarray(losses.ppo_clip(log_prob, old, adv))
        dual = np.asarray(losses.ppo_clip(log_prob, old, adv, clip_ratio_c=3.0))
        assert plain[0, -1] == pytest.approx(20.0) and dual[0, -1] == pytest.approx(6.0)
        # alias
        np.testing.assert_array_equal(dual, losses.ppo_clip(log_prob, old, adv, dual_clip=3.0))
        # dual clip never touches A >= 0
        np.testing.assert_array_equal(dual[advs >= 0], plain[advs >= 0])
        assert np.any(dual[advs < 0] != plain[advs < 0])


def test_ppo_clip_gradient(dtype):
    log_prob, old, adv = _arrays(dtype)
    for kwargs in PPO_CASES:
        grad = jax.grad(lambda lp, kw=kwargs: losses.ppo_clip(lp, old, adv, **kw).sum())(log_prob)
        # by hand: -A * rho where the unclipped branch is active, 0 where a clip is active
        expected = np.zeros((B, T))
        for b, t in np.ndindex(B, T):
            expected[b, t] = ref.ppo_clip_token_grad(LOG_PROB[b, t], OLD_LOG_PROB[b, t],
                                                     ADV[b, 0], **kwargs)
        assert np.any(expected == 0) and np.any(expected != 0)
        np.testing.assert_allclose(grad, expected, rtol=_tol(dtype), atol=_tol(dtype),
                                   err_msg=str(kwargs))


@pytest.mark.parametrize("kwargs", [{}, {"epsilon": 0.1, "epsilon_high": 0.28}], ids=str)
def test_is_clipped_case_analysis(dtype, kwargs):
    log_prob, old, adv = _arrays(dtype)
    out = losses.is_clipped(log_prob, old, adv, **kwargs)
    expected = ref.is_clipped(LOG_PROB, OLD_LOG_PROB, ADV, **kwargs)
    np.testing.assert_array_equal(out, expected)
    assert 0 < expected.sum() < expected.size  # the case exercises both outcomes
    # where the clip is active the PPO loss equals the clipped surrogate, and differs from
    # the unclipped one
    ppo = np.asarray(losses.ppo_clip(log_prob, old, adv, **kwargs), np.float64)
    unclipped = -ADV * np.exp(LOG_PROB - OLD_LOG_PROB)
    assert np.all(np.abs(ppo - unclipped)[expected] > 1e-6)
    np.testing.assert_allclose(ppo[~expected], unclipped[~expected], rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=B * T, max_size=B * T),
       st.lists(st.floats(-5, 5), min_size=B, max_size=B),
       st.sampled_from(PPO_CASES))
def test_property_ppo_clip_reference(log_ratio, advs, kwargs):
    log_ratio = np.reshape(log_ratio, (B, T))
    adv = np.reshape(advs, (B, 1))
    old = np.zeros((B, T))
    with jax.enable_x64(True):
        out = losses.ppo_clip(log_ratio, old, adv, **kwargs)
        np.testing.assert_allclose(out, ref.ppo_clip(log_ratio, old, adv, **kwargs),
                                   rtol=1e-12, atol=1e-12)
        # the clipped objective is pessimistic: never below the unclipped loss unless dual
        # clipped
        if "clip_ratio_c" not in kwargs:
            assert np.all(np.asarray(out) >= -adv * np.exp(log_ratio) - 1e-12)


# ----------------------------------------------------------------------------- gspo
def _gspo_reference_objective(log_prob, adv, mask, epsilon, epsilon_high):
    """Mean over sequences of the sequence-level clipped surrogate (what
    seq-mean-token-mean aggregation of GSPO's per-token values equals)."""
    per_seq = ref.gspo_sequence_loss(log_prob, OLD_LOG_PROB, adv[:, 0], mask, epsilon,
                                     epsilon_high)
    return float(np.mean(per_seq))


@pytest.mark.parametrize("eps", [(3e-4, 4e-4), (0.2, 0.2), (0.05, 0.3)], ids=str)
def test_gspo_value(dtype, eps):
    log_prob, old, adv = _arrays(dtype)
    kwargs = {} if eps == (3e-4, 4e-4) else {"epsilon": eps[0], "epsilon_high": eps[1]}
    out = losses.gspo(log_prob, old, adv, MASK, **kwargs)
    per_seq = ref.gspo_sequence_loss(LOG_PROB, OLD_LOG_PROB, ADV[:, 0], MASK, *eps)
    np.testing.assert_allclose(out, np.repeat(np.array(per_seq)[:, None], T, 1),
                               rtol=_tol(dtype), atol=_tol(dtype))
    # one ratio per sequence, masked tokens excluded from its mean
    seq = losses.sequence_log_ratio(log_prob, old, MASK)
    for b in range(B):
        valid = MASK[b]
        expected = np.mean(LOG_PROB[b, valid] - OLD_LOG_PROB[b, valid])
        assert float(seq[b, 0]) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("eps", [(0.2, 0.2), (0.05, 0.3), (3e-4, 4e-4)], ids=str)
def test_gspo_gradient_matches_finite_differences(eps):
    """d/d log pi_t of the seq-mean-token-mean GSPO loss is the derivative of the sequence
    objective L_b(s_b), s_b = exp(mean_t log rho_t): the gradient reaches every token."""
    with jax.enable_x64(True):
        grad = jax.grad(lambda lp: losses.aggregate(
            losses.gspo(lp, OLD_LOG_PROB, ADV, MASK, epsilon=eps[0], epsilon_high=eps[1]),
            MASK, "seq-mean-token-mean"))(jnp.asarray(LOG_PROB))
    h = 1e-6
    numeric = np.zeros((B, T))
    for b, t in np.ndindex(B, T):
        up, down = LOG_PROB.copy(), LOG_PROB.copy()
        up[b, t] += h
        down[b, t] -= h
        numeric[b, t] = (_gspo_reference_objective(up, ADV, MASK, *eps)
                         - _gspo_reference_objective(down, ADV, MASK, *eps)) / (2 * h)
    np.testing.assert_allclose(grad, numeric, atol=1e-7)
    # by hand: -A_b s_b / (B |y_b|) on valid tokens of unclipped sequences, 0 elsewhere
    np.testing.assert_allclose(grad, ref.gspo_grad(LOG_PROB, OLD_LOG_PROB, ADV[:, 0], MASK, *eps),
                               rtol=1e-12, atol=1e-15)
    assert np.all(np.asarray(grad)[~MASK] == 0)
    for b in range(B):
        n = MASK[b].sum()
        s = math.exp(np.mean(LOG_PROB[b, MASK[b]] - OLD_LOG_PROB[b, MASK[b]]))
        a = ADV[b, 0]
        clipped = (a > 0 and s > 1 + eps[1]) or (a < 0 and s < 1 - eps[0])
        want = 0.0 if clipped else -a * s / (B * n)
        np.testing.assert_allclose(np.asarray(grad)[b, MASK[b]], want, atol=1e-12)


def test_gspo_gradient_is_per_token_not_through_mean():
    """Token-mean aggregation weights each token's gradient by 1/sum(mask) (verl), which
    differs from the seq-mean-token-mean gradient for unequal lengths."""
    eps = (0.2, 0.2)
    with jax.enable_x64(True):
        grad = jax.grad(lambda lp: losses.aggregate(
            losses.gspo(lp, OLD_LOG_PROB, ADV, MASK, epsilon=eps[0], epsilon_high=eps[1]),
            MASK, "token-mean"))(jnp.asarray(LOG_PROB))
    total = MASK.sum()
    for b in range(B):
        s = math.exp(np.mean(LOG_PROB[b, MASK[b]] - OLD_LOG_PROB[b, MASK[b]]))
        a = ADV[b, 0]
        clipped = (a > 0 and s > 1 + eps[1]) or (a < 0 and s < 1 - eps[0])
        want = 0.0 if clipped else -a * s / total
        np.testing.assert_allclose(np.asarray(grad)[b, MASK[b]], want, atol=1e-12)


# ----------------------------------------------------------------------------- cispo
@pytest.mark.parametrize("kwargs, low, high", [({}, 0.0, 5.0),
                                               ({"epsilon": 0.2, "epsilon_high": 0.28}, 0.8, 1.28)],
                         ids=["default", "both-bounds"])
def test_cispo_value_and_stop_gradient(dtype, kwargs, low, high):
    log_prob, old, adv = _arrays(dtype)
    # include ratios above 5 so the default upper bound binds
    old = old.at[0, :2].set(log_prob[0, :2] - 2.5)
    old_np = np.asarray(old, np.float64)
    rho = np.exp(np.asarray(log_prob, np.float64) - old_np)
    weight = np.clip(rho, low, high)
    out = losses.cispo(log_prob, old, adv, **kwargs)
    value, grad_ref = ref.cispo(np.asarray(log_prob, np.float64), old_np, ADV, **kwargs)
    rtol = 1e-5 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(out, value, rtol=rtol)
    np.testing.assert_allclose(value, -weight * ADV * np.asarray(log_prob, np.float64), rtol=1e-12)
    # the weight is a constant for autodiff: d/d log pi = -clip(rho) * A exactly
    grad = jax.grad(lambda lp: losses.cispo(lp, old, adv, **kwargs).sum())(log_prob)
    np.testing.assert_allclose(grad, grad_ref, rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(grad_ref, -weight * ADV, rtol=1e-12)
    assert np.any(weight != rho)  # a clip is active somewhere


# ----------------------------------------------------------------------------- KL
P = np.array([0.5, 0.2, 0.15, 0.1, 0.05])
Q = np.array([0.1, 0.3, 0.2, 0.25, 0.15])


@pytest.mark.parametrize("p, q", [(P, Q), (Q, P), (P, P), (P, np.full(5, 0.2))])
def test_kl_exact_expectations(p, q):
    """Under x ~ p: E[k1] = E[k3] = KL(p || q) exactly (a finite sum, not sampling)."""
    with jax.enable_x64(True):
        k1 = np.asarray(losses.kl("k1", np.log(p), np.log(q)))
        k2 = np.asarray(losses.kl("k2", np.log(p), np.log(q)))
        k3 = np.asarray(losses.kl("k3", np.log(p), np.log(q)))
    exact = ref.kl_exact(p, q)
    assert math.fsum(p * k1) == pytest.approx(exact, rel=1e-12, abs=1e-15)
    assert math.fsum(p * k3) == pytest.approx(exact, rel=1e-12, abs=1e-15)
    for name, values in [("k1", k1), ("k2", k2), ("k3", k3)]:
        expected = [ref.kl_token(name, lp, lq) for lp, lq in zip(np.log(p), np.log(q))]
        np.testing.assert_allclose(values, expected, rtol=1e-10, atol=1e-15, err_msg=name)
    assert np.all(k3 >= 0)


def test_kl_registry():
    assert set(losses.kl_names()) >= {"k1", "k2", "k3"}
    assert losses.kl("k1", jnp.array(0.3), jnp.array(0.1)) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="k4") as info:
        losses.kl("k4", jnp.zeros(2), jnp.zeros(2))
    assert all(name in str(info.value) for name in ["k1", "k2", "k3"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-30, 30), min_size=8, max_size=8))
def test_property_k3_nonnegative(x):
    x = np.array(x)
    for dtype in DTYPES:
        with jax.enable_x64(dtype == jnp.float64):
            k3 = np.asarray(losses.kl_k3(jnp.asarray(x, dtype), jnp.zeros(8, dtype)))
            assert np.all(k3 >= 0) and np.all(np.isfinite(k3))
            assert np.all(np.asarray(losses.kl_k2(jnp.asarray(x, dtype), 0.0)) >= 0)


# ----------------------------------------------------------------------------- corrections
def test_tis_weights(dtype):
    log_prob, old, _ = _arrays(dtype)
    rho = np.exp(LOG_PROB - OLD_LOG_PROB)
    for cap in [2.0, 1.5]:
        out = losses.tis_weights(log_prob, old, cap=cap)
        np.testing.assert_allclose(out, ref.tis_weights(LOG_PROB, OLD_LOG_PROB, cap), rtol=1e-5)
        assert np.any(rho > cap)
    np.testing.assert_allclose(losses.tis_weights(log_prob, old), np.minimum(rho, 2.0), rtol=1e-5)
    grad = jax.grad(lambda lp: losses.tis_weights(lp, old).sum())(log_prob)
    assert np.all(np.asarray(grad) == 0)


@pytest.mark.parametrize("cap", [2.0, 1.5])
def test_mis_weights(dtype, cap):
    log_prob, old, _ = _arrays(dtype)
    rho = np.exp(LOG_PROB - OLD_LOG_PROB)
    weights, accepted = losses.mis_weights(log_prob, old, cap=cap)
    expected_weights, expected_accepted = ref.mis_weights(LOG_PROB, OLD_LOG_PROB, cap)
    np.testing.assert_array_equal(accepted, expected_accepted)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-5)
    assert 0 < expected_accepted.sum() < expected_accepted.size
    weights = np.asarray(weights, np.float64)
    np.testing.assert_allclose(weights, np.where(expected_accepted, rho, 0.0), rtol=1e-5)
    assert np.all((weights[expected_accepted] >= 1 / cap) & (weights[expected_accepted] <= cap))
    grad = jax.grad(lambda lp: losses.mis_weights(lp, old, cap=cap)[0].sum())(log_prob)
    assert np.all(np.asarray(grad) == 0)


def test_mismatch_metrics_exact_expectation():
    """Tokens repeated in proportion to the rollout probabilities make the masked mean an
    exact expectation under the rollout policy: k1 = k3 = KL(rollout || train),
    chi2 = sum p_train^2 / p_rollout - 1."""
    rollout = np.array([0.5, 0.25, 0.125, 0.125])
    train = np.array([0.4, 0.35, 0.05, 0.2])
    tokens = [0, 0, 0, 0, 1, 1, 2, 3]  # 8 draws with exact frequencies
    # two rows, padded with masked garbage tokens
    rows = [tokens[:5] + [1, 1, 1], tokens[5:] + [0, 0, 0, 0, 0]]
    mask = np.array([[1] * 5 + [0] * 3, [1] * 3 + [0] * 5], bool)
    train_lp = np.log(train)[rows]
    rollout_lp = np.log(rollout)[rows]
    train_lp[~mask] = -40.0  # garbage at padding must not matter
    with jax.enable_x64(True):
        out = losses.mismatch_metrics(train_lp, rollout_lp, mask)
    kl = ref.kl_exact(rollout, train)
    assert float(out["k1"]) == pytest.approx(kl, rel=1e-12)
    assert float(out["k3"]) == pytest.approx(kl, rel=1e-12)
    chi2 = math.fsum(train ** 2 / rollout) - 1
    assert float(out["chi2"]) == pytest.approx(chi2, rel=1e-12)
    # and against the token-loop reference on a random ragged case
    with jax.enable_x64(True):
        got = losses.mismatch_metrics(LOG_PROB, OLD_LOG_PROB, MASK)
    want = ref.mismatch_metrics(LOG_PROB, OLD_LOG_PROB, MASK)
    for key in ["k1", "k3", "chi2"]:
        assert float(got[key]) == pytest.approx(want[key], rel=1e-12), key
    # identical policies: all zero
    with jax.enable_x64(True):
        same = losses.mismatch_metrics(rollout_lp, rollout_lp, mask)
    for key in ["k1", "k3", "chi2"]:
        assert abs(float(same[key])) < 1e-14


# ----------------------------------------------------------------------------- decoupled PPO
def test_decoupled_ppo_equals_ppo_when_prox_is_behaviour(dtype):
    log_prob, old, adv = _arrays(dtype)
    for kwargs in [{}, {"epsilon": 0.1, "epsilon_high": 0.28}]:
        np.testing.assert_allclose(losses.decoupled_ppo(log_prob, old, old, adv, **kwargs),
                                   losses.ppo_clip(log_prob, old, adv, **kwargs),
                                   rtol=_tol(dtype), atol=_tol(dtype))


def test_decoupled_ppo_reference_and_behaviour_cap():
    behav = OLD_LOG_PROB + np.linspace(-2.0, 1.0, B * T).reshape(B, T)  # w from 0.37 to 7.4
    prox = OLD_LOG_PROB
    w = np.exp(prox - behav)
    with jax.enable_x64(True):
        for cap in [None, 5.0, 1.5]:
            out = np.asarray(losses.decoupled_ppo(LOG_PROB, prox, behav, ADV, behav_cap=cap,
                                                  epsilon=0.2, epsilon_high=0.28))
            expected = ref.decoupled_ppo(LOG_PROB, prox, behav, ADV, epsilon=0.2,
                                         epsilon_high=0.28, behav_cap=cap)
            np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)
            if cap is not None:
                capped = w > cap
                assert capped.any() and np.all(out[capped] == 0)
        # w carries no gradient: d/d log pi_theta = w * d ppo / d log pi_theta
        grad = jax.grad(lambda lp: losses.decoupled_ppo(lp, prox, behav, ADV).sum())(LOG_PROB)
        ppo_grad = jax.grad(lambda lp: losses.ppo_clip(lp, prox, ADV).sum())(LOG_PROB)
        np.testing.assert_allclose(grad, w * np.asarray(ppo_grad), rtol=1e-12)
        behav_grad = jax.grad(lambda bl: losses.decoupled_ppo(LOG_PROB, prox, bl, ADV).sum())(behav)
        assert np.all(np.asarray(behav_grad) == 0)


# ----------------------------------------------------------------------------- registry, jit
def test_policy_registry():
    assert {"pg", "ppo_clip", "gspo", "cispo"} <= set(losses.names())
    assert losses.get("ppo_clip") is losses.ppo_clip
    with pytest.raises(ValueError, match="ppo_clipp") as info:
        losses.get("ppo_clipp")
    assert all(name in str(info.value) for name in losses.names())


@functools.cache
def _jitted_loss(name):
    return jax.jit(lambda lp, old, adv, mask: losses.get(name)(lp, old, adv, mask))


@pytest.mark.parametrize("name", ["pg", "ppo_clip", "gspo", "cispo"])
def test_jit_equals_eager(dtype, name):
    log_prob, old, adv = _arrays(dtype)
    eager = losses.get(name)(log_prob, old, adv, MASK)
    jitted = _jitted_loss(name)(log_prob, old, adv, MASK)
    assert jitted.dtype == eager.dtype == dtype
    np.testing.assert_allclose(jitted, eager, rtol=10 * _tol(dtype), atol=10 * _tol(dtype))
    for mode in MODES:
        j = jax.jit(losses.aggregate, static_argnames="mode")(eager, MASK, mode=mode)
        np.testing.assert_allclose(j, losses.aggregate(eager, MASK, mode), rtol=10 * _tol(dtype))


def test_masked_mean_ignores_garbage_at_masked_entries():
    """Padding can hold inf/NaN (e.g. log-probs of padded tokens); a masked mean must not see
    it, as aggregate does not."""
    x = jnp.array([[1.0, jnp.nan, 3.0], [jnp.inf, 5.0, -jnp.inf]])
    mask = jnp.array([[True, False, True], [False, True, False]])
    assert float(losses.masked_mean(x, mask)) == pytest.approx(3.0)
    assert float(losses.masked_mean(x, jnp.zeros_like(mask))) == 0.0
    # boolean values average as 0/1
    flags = jnp.array([True, False, True, True])
    assert float(losses.masked_mean(flags)) == pytest.approx(0.75)
    first_two = jnp.array([True, True, False, False])
    assert float(losses.masked_mean(flags, first_two)) == pytest.approx(0.5)
    train = jnp.array([[-1.0, -2.0, -jnp.inf]])
    rollout = jnp.array([[-1.2, -1.5, -0.3]])
    out = losses.mismatch_metrics(train, rollout, jnp.array([[True, True, False]]))
    assert all(np.isfinite(float(v)) for v in out.values())
