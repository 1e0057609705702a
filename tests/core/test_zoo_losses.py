"""The zoo's policy losses (Clip-Cov, KL-Cov, GMPO, SAPO, verl's vanilla and gpg), KL
estimators (abs, k1+/k3+, verl's names, k3's clamps), aggregation (token-sum, verl's empty-row
count, loss_scale_factor) and verl's log-ratio clamp, against float64 loops, with hypothesis
properties and degenerate inputs."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlvr_lab import losses

RNG = np.random.default_rng(0)
B, T = 5, 7
LOGP = -np.abs(RNG.normal(1.0, 0.7, (B, T)))
OLD = LOGP + RNG.normal(0.0, 0.3, (B, T))
ADV = RNG.normal(0.0, 1.5, (B, 1))
MASK = np.ones((B, T), bool)
MASK[1, 4:] = False
MASK[3, :] = False          # a fully masked row
MASK[4, 2] = False


def _valid_tokens(mask):
    return [(b, t) for b in range(len(mask)) for t in range(len(mask[0])) if mask[b][t]]


def _adv(adv, b, t):
    adv = np.asarray(adv)
    return adv[b][0] if adv.shape[1] == 1 else adv[b][t]


# ----------------------------------------------------------------------------- loop references
def ref_ppo(lp, old, adv, eps=0.2, eps_high=None, clamp=None):
    eps_high = eps if eps_high is None else eps_high
    out = np.zeros(np.shape(lp))
    for b in range(len(lp)):
        for t in range(len(lp[0])):
            x = lp[b][t] - old[b][t]
            if clamp is not None:
                x = min(max(x, -clamp), clamp)
            rho, a = math.exp(x), _adv(adv, b, t)
            out[b][t] = max(-a * rho, -a * min(max(rho, 1 - eps), 1 + eps_high))
    return out


def _cov(lp, adv, mask):
    toks = _valid_tokens(mask)
    ma = sum(_adv(adv, b, t) for b, t in toks) / len(toks)
    ml = sum(lp[b][t] for b, t in toks) / len(toks)
    return {(b, t): (_adv(adv, b, t) - ma) * (lp[b][t] - ml) for b, t in toks}


def ref_clip_cov(lp, old, adv, mask, eps=0.2, ratio=2e-4, lb=1.0, ub=5.0):
    out = ref_ppo(lp, old, adv, eps)
    cov = _cov(lp, adv, mask)
    eligible = []
    for b, t in _valid_tokens(mask):
        rho, a = math.exp(lp[b][t] - old[b][t]), _adv(adv, b, t)
        clipped = -a * min(max(rho, 1 - eps), 1 + eps) > -a * rho
        if not clipped and lb < cov[b, t] < ub:
            eligible.append((b, t))
    n = max(int(ratio * len(_valid_tokens(mask))), 1)
    for b, t in eligible[:n]:
        out[b][t] = 0.0
    return out


def ref_kl_cov(lp, old, adv, mask, ratio=2e-4, coef=0.1):
    out = np.zeros(np.shape(lp))
    for b in range(len(lp)):
        for t in range(len(lp[0])):
            out[b][t] = -_adv(adv, b, t) * math.exp(lp[b][t] - old[b][t])
    cov = _cov(lp, adv, mask)
    toks = _valid_tokens(mask)
    n = max(int(len(toks) * ratio), 1)
    order = sorted(toks, key=lambda bt: (-cov[bt], bt))
    for b, t in order[:n]:
        out[b][t] += coef * abs(lp[b][t] - old[b][t])
    return out


def ref_gmpo_rows(lp, old, adv, mask, eps=0.4, eps_high=None):
    """The per-sequence loss (verl's / the paper's), one number per row with valid tokens."""
    eps_high = eps if eps_high is None else eps_high
    rows = {}
    for b in range(len(lp)):
        toks = [t for t in range(len(lp[0])) if mask[b][t]]
        if not toks:
            continue
        s, a_sum = 0.0, 0.0
        for t in toks:
            x, a = lp[b][t] - old[b][t], _adv(adv, b, t)
            sg = int(a > 0) - int(a < 0)
            s += sg * min(sg * x, sg * min(max(x, -eps), eps_high))
            a_sum += a
        rows[b] = -(a_sum / len(toks)) * math.exp(s / len(toks))
    return rows


def ref_sapo(lp, old, adv, tau_pos=1.0, tau_neg=1.05):
    out = np.zeros(np.shape(lp))
    for b in range(len(lp)):
        for t in range(len(lp[0])):
            rho, a = math.exp(lp[b][t] - old[b][t]), _adv(adv, b, t)
            tau = tau_pos if a > 0 else tau_neg
            out[b][t] = -(4 / tau) / (1 + math.exp(-tau * (rho - 1))) * a
    return out


def ref_kl(name, lp, ref, clamp=None):
    out = np.zeros(np.shape(lp))
    for b in range(len(lp)):
        for t in range(len(lp[0])):
            x = lp[b][t] - ref[b][t]
            if name in ("k1", "kl", "k1+", "kl+"):
                out[b][t] = x
            elif name == "abs":
                out[b][t] = abs(x)
            elif name in ("k2", "mse"):
                out[b][t] = x * x / 2
            else:
                k = ref[b][t] - lp[b][t]
                if clamp:
                    k = min(max(k, -clamp[0]), clamp[0])
                v = math.expm1(k) - k
                out[b][t] = min(max(v, -clamp[1]), clamp[1]) if clamp else v
    return out


def ref_aggregate(loss, mask, mode, empty_rows="count", scale=None):
    rows = [sum(loss[b][t] for t in range(len(loss[0])) if mask[b][t]) for b in range(len(loss))]
    counts = [sum(mask[b]) for b in range(len(loss))]
    non_empty = max(sum(c > 0 for c in counts), 1)
    nb = non_empty if empty_rows == "skip" else len(loss)
    if mode == "token-sum":
        return sum(rows)
    if mode == "seq-mean-token-sum":
        return sum(rows) / nb
    if mode == "seq-mean-token-sum-norm":
        return sum(rows) / (nb * (len(loss[0]) if scale is None else scale))
    raise AssertionError(mode)


def f64(fn, *args, **kw):
    with jax.enable_x64(True):
        return np.asarray(fn(*(jnp.asarray(a) if isinstance(a, np.ndarray) else a
                               for a in args), **kw))


# ----------------------------------------------------------------------------- against the loops
@pytest.mark.parametrize("clamp", [None, 20.0, 0.1])
def test_ppo_clip_log_ratio_clamp(clamp):
    got = f64(losses.ppo_clip, LOGP, OLD, ADV, MASK, log_ratio_clamp=clamp)
    np.testing.assert_allclose(got, ref_ppo(LOGP, OLD, ADV, clamp=clamp), rtol=1e-12)
    assert losses.get("vanilla") is losses.ppo_clip


def test_cispo_clamp_and_verl_lower_clip():
    got = f64(losses.cispo, LOGP, OLD + 30 * (RNG.random(OLD.shape) > 0.9), ADV, MASK,
              epsilon=0.2, epsilon_high=0.28, log_ratio_clamp=20.0)
    assert np.all(np.isfinite(got))
    old = OLD.copy()
    want = np.zeros_like(LOGP)
    for b in range(B):
        for t in range(T):
            rho = math.exp(LOGP[b, t] - old[b, t])
            want[b, t] = -min(max(rho, 0.8), 1.28) * ADV[b, 0] * LOGP[b, t]
    np.testing.assert_allclose(f64(losses.cispo, LOGP, old, ADV, MASK, epsilon=0.2,
                                   epsilon_high=0.28), want, rtol=1e-12)


@pytest.mark.parametrize("ratio,lb,ub", [(2e-4, 1.0, 5.0), (0.2, -1.0, 5.0), (0.5, 0.0, 0.5)])
def test_clip_cov_matches_loop(ratio, lb, ub):
    got = f64(losses.clip_cov, LOGP, OLD, ADV, MASK, clip_cov_ratio=ratio, clip_cov_lb=lb,
              clip_cov_ub=ub)
    np.testing.assert_allclose(got, ref_clip_cov(LOGP, OLD, ADV, MASK, ratio=ratio, lb=lb,
                                                 ub=ub), rtol=1e-12, atol=1e-15)


def test_clip_cov_random_selection_counts():
    det = f64(losses.clip_cov, LOGP, OLD, ADV, MASK, clip_cov_ratio=0.2, clip_cov_lb=-1.0)
    ppo = f64(losses.ppo_clip, LOGP, OLD, ADV, MASK)
    for seed in range(3):
        rnd = f64(losses.clip_cov, LOGP, OLD, ADV, MASK, clip_cov_ratio=0.2, clip_cov_lb=-1.0,
                  key=jax.random.key(seed))
        assert ((rnd != ppo) & MASK).sum() == ((det != ppo) & MASK).sum() > 1


@pytest.mark.parametrize("ratio,coef", [(2e-4, 0.1), (0.25, 1.0), (1.0, 0.3)])
def test_kl_cov_matches_loop(ratio, coef):
    got = f64(losses.kl_cov, LOGP, OLD, ADV, MASK, kl_cov_ratio=ratio, ppo_kl_coef=coef)
    np.testing.assert_allclose(got, ref_kl_cov(LOGP, OLD, ADV, MASK, ratio, coef), rtol=1e-12)


@pytest.mark.parametrize("eps,eps_high", [(0.4, None), (0.2, 0.28), (0.05, 0.05)])
def test_gmpo_matches_loop(eps, eps_high):
    adv_tok = np.broadcast_to(ADV, (B, T)) + RNG.normal(0, 0.1, (B, T))
    got = f64(losses.gmpo, LOGP, OLD, adv_tok, MASK, epsilon=eps, epsilon_high=eps_high)
    rows = ref_gmpo_rows(LOGP, OLD, adv_tok, MASK, eps, eps_high)
    for b, value in rows.items():
        np.testing.assert_allclose(got[b][MASK[b]], value, rtol=1e-12)
    # aggregated as the paper's mean over sequences
    np.testing.assert_allclose(f64(losses.aggregate, got, MASK, "seq-mean-token-mean"),
                               np.mean(list(rows.values())), rtol=1e-12)
    assert losses.get("geo_mean") is losses.gmpo


@pytest.mark.parametrize("taus", [(1.0, 1.05), (2.0, 0.5)])
def test_sapo_matches_loop(taus):
    got = f64(losses.sapo, LOGP, OLD, ADV, MASK, tau_pos=taus[0], tau_neg=taus[1])
    np.testing.assert_allclose(got, ref_sapo(LOGP, OLD, ADV, *taus), rtol=1e-12)


def test_gpg_loss_is_pg():
    assert losses.get("gpg") is losses.pg
    np.testing.assert_allclose(f64(losses.pg, LOGP, OLD, ADV, MASK), -ADV * LOGP, rtol=1e-15)


@pytest.mark.parametrize("name", ["k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl", "k1+",
                                  "kl+", "k3+", "low_var_kl+"])
def test_kl_values_match_loop(name):
    np.testing.assert_allclose(f64(lambda a, b: losses.kl(name, a, b), LOGP, OLD),
                               ref_kl(name, LOGP, OLD), rtol=1e-12, atol=1e-300)


def test_k3_clamps_as_verl():
    ref_lp = LOGP + np.array([[-30.0], [30.0], [0.0], [12.0], [-12.0]])
    got = f64(lambda a, b: losses.kl("k3", a, b, clamp=losses.VERL_K3_CLAMP), LOGP, ref_lp)
    np.testing.assert_allclose(got, ref_kl("k3", LOGP, ref_lp, clamp=(20.0, 10.0)),
                               rtol=1e-12)
    assert np.all(got <= 10) and np.all(np.isfinite(got))
    # unclamped default unchanged
    np.testing.assert_array_equal(f64(losses.kl_k3, LOGP, OLD),
                                  f64(lambda a, b: jnp.expm1(-(a - b)) + (a - b), LOGP, OLD))


@pytest.mark.parametrize("name", ["k1+", "k3+", "kl+", "low_var_kl+"])
def test_plus_variants_have_k2_gradient(name):
    with jax.enable_x64(True):
        g = jax.grad(lambda lp: losses.kl(name, lp, jnp.asarray(OLD)).sum())(jnp.asarray(LOGP))
    np.testing.assert_allclose(np.asarray(g), LOGP - OLD, rtol=1e-12)


@pytest.mark.parametrize("mode", ["token-sum", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("empty_rows", ["count", "skip"])
@pytest.mark.parametrize("scale", [None, 4.0])
def test_aggregate_new_options(mode, empty_rows, scale):
    loss = RNG.normal(size=(B, T))
    got = f64(losses.aggregate, loss, MASK, mode, empty_rows=empty_rows, loss_scale_factor=scale)
    np.testing.assert_allclose(got, ref_aggregate(loss, MASK, mode, empty_rows, scale),
                               rtol=1e-12)


def test_aggregate_defaults_unchanged():
    loss = jnp.asarray(RNG.normal(size=(B, T)), jnp.float32)
    np.testing.assert_array_equal(losses.aggregate(loss, MASK, "seq-mean-token-sum"),
                                  jnp.where(MASK, loss, 0).sum(-1).mean())
    np.testing.assert_array_equal(losses.aggregate(loss, MASK, "seq-mean-token-sum-norm"),
                                  jnp.where(MASK, loss, 0).sum() / (B * T))


# ----------------------------------------------------------------------------- degenerate inputs
ZOO = ("clip_cov", "kl_cov", "gmpo", "sapo", "vanilla", "gpg")


@pytest.mark.parametrize("name", ZOO)
@pytest.mark.parametrize("case", ["all_masked", "zero_adv", "equal_logp", "padding"])
def test_degenerate_inputs_are_finite(name, case):
    lp, old, adv, mask = LOGP.copy(), OLD.copy(), ADV.copy(), MASK.copy()
    if case == "all_masked":
        mask[:] = False
    if case == "zero_adv":
        adv[:] = 0
    if case == "equal_logp":
        lp[:] = -1.0
        old[:] = -1.0
    if case == "padding":
        lp[~mask] = -np.inf
        old[~mask] = -np.inf
    fn = losses.get(name)
    out = fn(jnp.asarray(lp, jnp.float32), jnp.asarray(old, jnp.float32), adv, mask)
    total = losses.aggregate(out, mask, "seq-mean-token-mean")
    assert np.isfinite(float(total))
    assert np.all(np.isfinite(np.asarray(out)[mask]))
    if case in ("all_masked",):
        assert float(total) == 0
    # the gradient needs finite padding (documented): -inf padding is replaced here
    old = jnp.asarray(np.where(mask, old, -1.0), jnp.float32)
    grad = jax.grad(lambda x: losses.aggregate(fn(x, old, adv, mask), mask, "token-mean"))(
        jnp.asarray(np.where(mask, lp, -1.0), jnp.float32))
    assert np.all(np.isfinite(np.asarray(grad)))


# ----------------------------------------------------------------------------- hypothesis
tokens = st.integers(1, 4).flatmap(lambda b: st.integers(1, 6).flatmap(lambda t: st.tuples(
    hnp.arrays(np.float64, (b, t), elements=st.floats(-4, -0.01)),
    hnp.arrays(np.float64, (b, t), elements=st.floats(-0.5, 0.5)),
    hnp.arrays(np.float64, (b, 1), elements=st.floats(-2, 2)),
    hnp.arrays(np.bool_, (b, t)))))


@settings(max_examples=15, deadline=None)
@given(tokens)
def test_hypothesis_against_loops(data):
    lp, delta, adv, mask = data
    # distinct log-probs and advantages: the covariance ranking must not hinge on rounding
    lp = lp - 1e-3 * np.arange(lp.size).reshape(lp.shape)
    adv = adv + 1e-2 * np.arange(adv.size).reshape(adv.shape)
    old = lp + delta
    with jax.enable_x64(True):
        np.testing.assert_allclose(f64(losses.sapo, lp, old, adv, mask), ref_sapo(lp, old, adv),
                                   rtol=1e-9, atol=1e-12)
        if mask.any():
            np.testing.assert_allclose(f64(losses.kl_cov, lp, old, adv, mask, kl_cov_ratio=0.3),
                                       ref_kl_cov(lp, old, adv, mask, 0.3), rtol=1e-9,
                                       atol=1e-12)
            np.testing.assert_allclose(
                f64(losses.clip_cov, lp, old, adv, mask, clip_cov_ratio=0.3, clip_cov_lb=-1.0),
                ref_clip_cov(lp, old, adv, mask, ratio=0.3, lb=-1.0), rtol=1e-9, atol=1e-12)
        got = f64(losses.gmpo, lp, old, adv, mask)
        for b, value in ref_gmpo_rows(lp, old, adv, mask).items():
            np.testing.assert_allclose(got[b][mask[b]], value, rtol=1e-9, atol=1e-12)


@jax.jit
def _on_policy_gradients(lp, adv, mask):
    """Gradients at rho = 1 (old = sg(current)) of SAPO, KL-Cov (coef 0) and GMPO (its
    seq-mean-token-mean aggregate), one compilation per shape."""
    old = jax.lax.stop_gradient(lp)

    def token_sum(fn, **kw):
        return jax.grad(lambda x: jnp.where(mask, fn(x, old, adv, mask, **kw), 0).sum())(lp)

    gmpo = jax.grad(lambda x: losses.aggregate(losses.gmpo(x, old, adv, mask), mask,
                                               "seq-mean-token-mean"))(lp)
    return token_sum(losses.sapo), token_sum(losses.kl_cov, ppo_kl_coef=0.0), gmpo


@settings(max_examples=15, deadline=None)
@given(tokens)
def test_hypothesis_on_policy_gradients_equal_pg(data):
    """At rho = 1 SAPO's gradient is the policy gradient's, KL-Cov's (coef 0) too; GMPO's is
    the sequence-mean advantage spread over the row's tokens."""
    lp, _, adv, mask = data
    with jax.enable_x64(True):
        sapo, klcov, gmpo = (np.asarray(g) for g in _on_policy_gradients(
            jnp.asarray(lp), jnp.asarray(adv), jnp.asarray(mask)))
    want = np.where(mask, -np.broadcast_to(adv, lp.shape), 0)
    np.testing.assert_allclose(sapo, want, atol=1e-12)
    np.testing.assert_allclose(klcov, want, atol=1e-12)
    # d/dlogp_t of -A exp(mean_t x_t) at x = 0 is -A/n_b; seq-mean-token-mean averages the
    # row losses over the non-empty rows
    n = np.maximum(mask.sum(-1, keepdims=True), 1)
    rows = max(int(mask.any(-1).sum()), 1)
    np.testing.assert_allclose(gmpo * rows, want / n, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(tokens)
def test_hypothesis_empty_rows_skip_equals_count_without_empty_rows(data):
    lp, _, _, mask = data
    mask = mask.copy()
    mask[:, 0] = True
    for mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm"):
        np.testing.assert_allclose(
            f64(losses.aggregate, lp, mask, mode, empty_rows="skip"),
            f64(losses.aggregate, lp, mask, mode), rtol=1e-12)


# ----------------------------------------------------------------------------- names, checks
def test_verl_names_resolve():
    from rlvr_lab import _registry
    for name in ("vanilla", "gpg", "clip_cov", "kl_cov", "geo_mean", "sapo", "gspo", "cispo",
                 "gspo-token"):
        assert _registry.category("loss").get(name) is losses.get(name)
    for name in ("kl", "abs", "mse", "low_var_kl", "k1", "k2", "k3", "k1+", "k3+", "kl+",
                 "low_var_kl+"):
        assert name in losses.kl_names()
    assert "token-sum" in losses.AGG_MODES


def test_bad_options_are_one_line_errors():
    for call in (lambda: losses.sapo(LOGP, OLD, ADV, tau_pos=0),
                 lambda: losses.clip_cov(LOGP, OLD, ADV, clip_cov_ratio=0),
                 lambda: losses.kl_cov(LOGP, OLD, ADV, ppo_kl_coef=-1),
                 lambda: losses.ppo_clip(LOGP, OLD, ADV, log_ratio_clamp=0),
                 lambda: losses.aggregate(LOGP, MASK, "token-mean", empty_rows="drop"),
                 lambda: losses.aggregate(LOGP, MASK, "seq-mean-token-sum-norm",
                                          loss_scale_factor=0)):
        with pytest.raises(ValueError):
            call()


def test_trainer_config_accepts_the_names():
    from rlvr_lab.train.bandit import BanditConfig
    for name in ("vanilla", "clip_cov", "kl_cov", "geo_mean", "sapo", "gpg"):
        assert BanditConfig(policy_loss=name).policy_loss == name
    assert BanditConfig(loss_agg_mode="token-sum").loss_agg_mode == "token-sum"
    assert BanditConfig(kl_estimator="low_var_kl+").kl_estimator == "low_var_kl+"
