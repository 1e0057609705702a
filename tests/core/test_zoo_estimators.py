"""The zoo's advantage estimators (REINFORCE++, ReMax, OPO, GPG, GRPO pass@k) against plain
float64 loops written from the papers' definitions, hypothesis properties, degenerate groups,
and verl's names in the registry."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlvr_lab import advantages as adv
import reference as ref

# ragged: a full group, a masked entry, a lone rollout, an all-equal group, a fully masked group
REWARDS = np.array([
    [0.0, 1.0, 1.0, 0.5, 2.0],
    [3.0, -1.0, 0.25, 7.0, 2.0],
    [4.0, 0.0, 0.0, 0.0, 0.0],
    [0.3, 0.3, 0.3, 0.3, 0.3],
    [5.0, 6.0, 7.0, 8.0, 9.0],
    [1.0, 0.0, 1.0, 0.0, 0.0],
])
MASK = np.array([
    [1, 1, 1, 1, 1],
    [1, 1, 1, 0, 1],
    [1, 0, 0, 0, 0],
    [1, 1, 1, 1, 1],
    [0, 0, 0, 0, 0],
    [1, 1, 1, 1, 1],
], bool)
LENGTHS = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3], [5, 8, 9, 7, 9], [3, 2, 3, 8, 4],
                    [6, 2, 6, 4, 3], [1, 7, 2, 2, 8]], float)
ESTIMATORS = ("reinforce_pp", "opo", "gpg", "grpo_passk")


# ----------------------------------------------------------------------------- loop references
def _valid(row, mrow):
    return [i for i in range(len(row)) if mrow[i]]


def _std(xs):
    mu = sum(xs) / len(xs)
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / (len(xs) - 1))


def ref_reinforce_pp(rewards, mask, eps=1e-8):
    vals = [rewards[b][g] for b in range(len(rewards)) for g in _valid(rewards[b], mask[b])]
    out = np.zeros(np.shape(rewards))
    if len(vals) < 2:
        return out
    mu = sum(vals) / len(vals)
    var = sum((v - mu) ** 2 for v in vals) / (len(vals) - 1)
    for b in range(len(rewards)):
        for g in _valid(rewards[b], mask[b]):
            out[b][g] = (rewards[b][g] - mu) / math.sqrt(var + eps)
    return out


def ref_remax(rewards, mask, baseline):
    out = np.zeros(np.shape(rewards))
    for b in range(len(rewards)):
        for g in _valid(rewards[b], mask[b]):
            out[b][g] = rewards[b][g] - baseline[b]
    return out


def ref_opo(rewards, mask, lengths=None):
    out = np.zeros(np.shape(rewards))
    for b in range(len(rewards)):
        idx = _valid(rewards[b], mask[b])
        if len(idx) < 2:
            continue
        ls = [1.0 if lengths is None else lengths[b][i] for i in idx]
        base = sum(w * rewards[b][i] for w, i in zip(ls, idx)) / sum(ls)
        for i in idx:
            out[b][i] = rewards[b][i] - base
    return out


def ref_gpg(rewards, mask, alpha="informative", f_norm=1.0):
    groups = [_valid(rewards[b], mask[b]) for b in range(len(rewards))]
    total = sum(len(g) for g in groups)
    if alpha == "informative":
        useful = sum(len(g) for b, g in enumerate(groups)
                     if len(g) >= 2 and len({rewards[b][i] for i in g}) > 1)
    else:
        useful = sum(1 for b, g in enumerate(groups) for i in g if rewards[b][i] != 0)
    a = total / max(useful, 1)
    out = np.zeros(np.shape(rewards))
    for b, idx in enumerate(groups):
        if len(idx) < 2:
            continue
        mu = sum(rewards[b][i] for i in idx) / len(idx)
        for i in idx:
            out[b][i] = a * (rewards[b][i] - mu) / f_norm
    return out


def ref_grpo_passk(rewards, mask, scale="std", eps=1e-6):
    out = np.zeros(np.shape(rewards))
    for b in range(len(rewards)):
        idx = _valid(rewards[b], mask[b])
        if len(idx) < 2:
            continue
        vals = sorted((rewards[b][i] for i in idx), reverse=True)
        gap = vals[0] - vals[1]
        if scale == "std":
            gap = gap / (_std([rewards[b][i] for i in idx]) + eps)
        best = max(idx, key=lambda i: (rewards[b][i], -i))   # first of the maxima
        out[b][best] = gap
    return out


REFS = {"reinforce_pp": ref_reinforce_pp, "opo": ref_opo, "gpg": ref_gpg,
        "grpo_passk": ref_grpo_passk}


# ----------------------------------------------------------------------------- against the loops
@pytest.mark.parametrize("name", ESTIMATORS)
def test_matches_float64_loop(name):
    with jax.enable_x64(True):
        out = adv.compute(name, jnp.asarray(REWARDS, jnp.float64), MASK).adv
    np.testing.assert_allclose(np.asarray(out), REFS[name](REWARDS, MASK), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("options", [{"lengths": LENGTHS}, {"alpha": "nonzero_reward"},
                                     {"alpha": "informative", "f_norm": 2.5},
                                     {"scale": "none"}, {"scale": "std", "eps": 0.3}])
def test_options_match_float64_loop(options):
    name = {"lengths": "opo", "alpha": "gpg", "scale": "grpo_passk"}[next(iter(options))]
    with jax.enable_x64(True):
        out = adv.compute(name, jnp.asarray(REWARDS, jnp.float64), MASK, **options).adv
    np.testing.assert_allclose(np.asarray(out), REFS[name](REWARDS, MASK, **options),
                               rtol=1e-12, atol=1e-12)


def test_remax_matches_float64_loop():
    baseline = np.array([1.0, 0.5, -2.0, 0.3, 0.0, 1.0])
    with jax.enable_x64(True):
        out = adv.compute("remax", jnp.asarray(REWARDS), MASK, baseline=baseline).adv
        out2 = adv.remax(jnp.asarray(REWARDS), MASK, baseline=baseline[:, None])
    np.testing.assert_allclose(np.asarray(out), ref_remax(REWARDS, MASK, baseline), atol=1e-15)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(out2))
    with pytest.raises(ValueError, match="baseline"):
        adv.remax(REWARDS, MASK)
    with pytest.raises(ValueError, match="entries"):
        adv.remax(REWARDS, MASK, baseline=np.zeros(3))


def test_float32_close_to_float64_loop():
    for name in ESTIMATORS:
        out = adv.compute(name, jnp.asarray(REWARDS, jnp.float32), MASK).adv
        assert out.dtype == jnp.float32
        np.testing.assert_allclose(np.asarray(out, np.float64), REFS[name](REWARDS, MASK),
                                   rtol=2e-6, atol=2e-6)


# ----------------------------------------------------------------------------- identities
def test_identities_with_existing_estimators():
    r = jnp.asarray(REWARDS)
    # OPO with equal lengths is Dr.GRPO; with lengths proportional per group too
    np.testing.assert_allclose(adv.opo(r, MASK), adv.dr_grpo(r, MASK), atol=1e-6)
    np.testing.assert_allclose(adv.opo(r, MASK, lengths=np.full(r.shape, 7.0)),
                               adv.dr_grpo(r, MASK), atol=1e-6)
    # GPG is Dr.GRPO times one batch constant
    g, d = np.asarray(adv.gpg(r, MASK)), np.asarray(adv.dr_grpo(r, MASK))
    nz = d != 0
    assert np.allclose(g[nz] / d[nz], (g[nz] / d[nz])[0])
    # REINFORCE++-baseline is REINFORCE++ applied to Dr.GRPO's advantages
    n = MASK.sum(-1, keepdims=True)
    keep = MASK & (n >= 2)
    np.testing.assert_allclose(adv.reinforce_pp(adv.dr_grpo(r, MASK), keep),
                               adv.reinforce_pp_baseline(r, MASK), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- degenerate groups
@pytest.mark.parametrize("name", ESTIMATORS + ("remax",))
@pytest.mark.parametrize("case", ref.DEGENERATE_CASES)
def test_degenerate_inputs_are_finite(name, case):
    rewards, mask = ref.degenerate_group(case)
    kw = {"baseline": np.full(3, 0.1)} if name == "remax" else {}
    out = np.asarray(adv.compute(name, rewards, mask, **kw).adv)
    assert np.all(np.isfinite(out))
    assert np.all(out[~mask] == 0)
    if name != "reinforce_pp" or case != "one_valid":
        np.testing.assert_array_equal(out, 0)   # equal rewards: no signal, exactly 0


def test_nan_padding_stays_out():
    rewards = REWARDS.copy()
    rewards[~MASK] = np.nan
    for name in ESTIMATORS:
        out = np.asarray(adv.compute(name, rewards, MASK).adv)
        assert np.all(np.isfinite(out)), name


# ----------------------------------------------------------------------------- hypothesis
groups = st.integers(1, 4).flatmap(lambda b: st.integers(1, 6).flatmap(lambda g: st.tuples(
    hnp.arrays(np.float64, (b, g), elements=st.sampled_from([0.0, 1.0, 0.5, -2.0, 3.25])),
    hnp.arrays(np.bool_, (b, g)))))


@settings(max_examples=20, deadline=None)
@given(groups)
def test_hypothesis_matches_loops_and_is_finite(data):
    rewards, mask = data
    with jax.enable_x64(True):
        for name in ESTIMATORS:
            out = np.asarray(adv.compute(name, jnp.asarray(rewards), mask).adv)
            assert np.all(np.isfinite(out)) and np.all(out[~mask] == 0)
            np.testing.assert_allclose(out, REFS[name](rewards, mask), rtol=1e-9, atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(groups, st.floats(-5, 5), st.floats(0.1, 10))
def test_hypothesis_shift_and_scale(data, shift, scale):
    """Group-relative estimators ignore a shift of all rewards; REINFORCE++ and pass@k (std)
    also ignore a positive scale; OPO and GPG scale with it."""
    rewards, mask = data
    with jax.enable_x64(True):
        r = jnp.asarray(rewards)
        for name in ("opo", "gpg", "reinforce_pp"):
            np.testing.assert_allclose(adv.compute(name, r + shift, mask).adv,
                                       adv.compute(name, r, mask).adv, atol=1e-9)
        np.testing.assert_allclose(adv.opo(r * scale, mask), scale * adv.opo(r, mask),
                                   rtol=1e-9, atol=1e-9)
        # only one rollout per group is ever non-zero under pass@k
        assert np.all((np.asarray(adv.grpo_passk(r, mask)) != 0).sum(-1) <= 1)


@settings(max_examples=20, deadline=None)
@given(groups)
def test_hypothesis_baselines_centre_the_group(data):
    """OPO's length-weighted advantages sum to 0 per group under the length weights; GPG's and
    pass@k's best rollout is never negative."""
    rewards, mask = data
    lengths = np.arange(1, rewards.size + 1, dtype=float).reshape(rewards.shape) % 5 + 1
    with jax.enable_x64(True):
        a = np.asarray(adv.opo(jnp.asarray(rewards), mask, lengths=lengths))
        np.testing.assert_allclose((a * np.where(mask, lengths, 0)).sum(-1), 0, atol=1e-9)
        assert np.all(np.asarray(adv.grpo_passk(jnp.asarray(rewards), mask)) >= 0)


# ----------------------------------------------------------------------------- names, jit, checks
VERL_NAMES = {"reinforce_plus_plus": adv.reinforce_pp,
              "reinforce_plus_plus_baseline": adv.reinforce_pp_baseline, "remax": adv.remax,
              "opo": adv.opo, "gpg": adv.gpg, "grpo_passk": adv.grpo_passk,
              "grpo": adv.grpo, "rloo": adv.rloo, "grpo_vectorized": adv.grpo,
              "rloo_vectorized": adv.rloo, "drgrpo": adv.dr_grpo}


def test_verl_names_resolve():
    from rlvr_lab import _registry
    for name, fn in VERL_NAMES.items():
        assert adv.get(name) is fn
        assert _registry.category("estimator").get(name) is fn


def test_jit_equals_eager():
    for name in ESTIMATORS:
        eager = adv.compute(name, REWARDS, MASK).adv
        jitted = jax.jit(lambda r, m, n=name: adv.compute(n, r, m).adv)(REWARDS, MASK)
        np.testing.assert_allclose(eager, jitted, rtol=1e-6, atol=1e-7)


def test_bad_options_are_one_line_errors():
    for call in (lambda: adv.gpg(REWARDS, alpha="x"), lambda: adv.gpg(REWARDS, f_norm=0),
                 lambda: adv.grpo_passk(REWARDS, scale="mad"),
                 lambda: adv.opo(REWARDS, lengths=np.ones((2, 2))),
                 lambda: adv.opo(REWARDS, lengths=-np.ones(REWARDS.shape)),
                 lambda: adv.compute("opo", REWARDS, nope=1)):
        with pytest.raises(ValueError):
            call()


def test_trainer_config_accepts_the_names():
    from rlvr_lab.train.bandit import BanditConfig
    for name in ("reinforce_plus_plus", "opo", "gpg", "grpo_passk"):
        assert BanditConfig(advantage=name).advantage == name
