"""The optimal token baseline (verl's ``optimal_token_baseline``): against the float64 loop of
``tests/reference.py``, hypothesis properties (invariances), degenerate groups, names."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlvr_lab import advantages as adv
import reference as ref

REWARDS = np.array([[0.0, 1.0, 1.0, 0.5, 2.0], [3.0, -1.0, 0.25, 7.0, 2.0],
                    [4.0, 0.0, 0.0, 0.0, 0.0], [0.3, 0.3, 0.3, 0.3, 0.3],
                    [5.0, 6.0, 7.0, 8.0, 9.0], [1.0, 0.0, 1.0, 0.0, 0.0]])
MASK = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 1], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1],
                 [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], bool)
RNG = np.random.default_rng(0)
ENERGY = RNG.uniform(0.05, 1.5, REWARDS.shape)
TOKEN_ENERGY = RNG.uniform(0.0, 1.5, REWARDS.shape + (6,))
LENGTHS = np.array([[3, 1, 6, 2, 5], [6, 2, 6, 5, 3], [5, 6, 4, 2, 1], [3, 2, 3, 6, 4],
                    [6, 2, 6, 4, 3], [1, 6, 2, 2, 6]])
TOKEN_MASK = np.arange(6)[None, None, :] < LENGTHS[..., None]


def _x64(fn, *args, **kw):
    with jax.enable_x64(True):
        return np.asarray(fn(*[jnp.asarray(a) if isinstance(a, np.ndarray) else a
                               for a in args], **kw))


@pytest.mark.parametrize("eps", [0.0, 1e-8])
def test_matches_float64_loop(eps):
    np.testing.assert_allclose(_x64(adv.optimal_token_baseline, REWARDS, MASK, eps=eps),
                               ref.optimal_token_baseline(REWARDS, MASK, eps=eps), atol=1e-12)
    np.testing.assert_allclose(
        _x64(adv.optimal_token_baseline, REWARDS, MASK, energy=ENERGY, eps=eps),
        ref.optimal_token_baseline(REWARDS, MASK, ENERGY, eps=eps), atol=1e-12)
    np.testing.assert_allclose(
        _x64(adv.optimal_token_baseline, REWARDS, MASK, energy=TOKEN_ENERGY,
             token_mask=TOKEN_MASK, eps=eps),
        ref.optimal_token_baseline(REWARDS, MASK, TOKEN_ENERGY, TOKEN_MASK, eps=eps),
        atol=1e-12)


def test_float32_close_and_names():
    out = np.asarray(adv.compute("optimal_token_baseline", REWARDS.astype(np.float32), MASK,
                                 energy=ENERGY).adv)
    np.testing.assert_allclose(out, ref.optimal_token_baseline(REWARDS, MASK, ENERGY),
                               rtol=1e-5, atol=1e-5)
    assert adv.get("optimal_token_baseline") is adv.optimal_token_baseline
    assert adv.get("otb") is adv.optimal_token_baseline
    assert adv.options("otb") == ("energy", "token_mask", "eps")


def test_identities():
    """No energy (or one constant per group) is Dr.GRPO; with one token per answer the
    token-level form is the per-rollout form (the bank: verl's estimator exactly)."""
    np.testing.assert_allclose(adv.optimal_token_baseline(REWARDS, MASK),
                               adv.dr_grpo(REWARDS, MASK), atol=1e-6)
    const = np.repeat(RNG.uniform(0.1, 2, (6, 1)), 5, axis=1)
    np.testing.assert_allclose(adv.optimal_token_baseline(REWARDS, MASK, energy=const),
                               adv.dr_grpo(REWARDS, MASK), atol=1e-5)
    one = adv.optimal_token_baseline(REWARDS, MASK, energy=ENERGY[..., None])
    np.testing.assert_allclose(np.asarray(one)[..., 0],
                               adv.optimal_token_baseline(REWARDS, MASK, energy=ENERGY),
                               atol=1e-6)


def test_realized_energy_is_the_logit_gradient_norm():
    logits = RNG.normal(size=(3, 4, 7))
    tokens = RNG.integers(0, 7, (3, 4))
    with jax.enable_x64(True):
        w = np.asarray(adv.realized_energy(jnp.asarray(logits), tokens))
    pi = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    want = ((np.eye(7)[tokens] - pi) ** 2).sum(-1)   # ||d log pi(a) / d logits||^2
    np.testing.assert_allclose(w, want, rtol=1e-12)
    assert np.all((w >= 0) & (w < 2))


@pytest.mark.parametrize("case", ref.DEGENERATE_CASES + ("zero_energy",))
@pytest.mark.parametrize("level", ["rollout", "token"])
def test_degenerate_inputs_are_finite(case, level):
    rewards, mask = ref.degenerate_group("all_equal" if case == "zero_energy" else case)
    shape = rewards.shape
    if case == "zero_energy":
        rewards[:, 0] = 1.0
    energy = np.full(shape + ((5,) if level == "token" else ()),
                     0.0 if case == "zero_energy" else 0.7, np.float32)
    out = np.asarray(adv.optimal_token_baseline(rewards, mask, energy=energy))
    assert np.all(np.isfinite(out))
    if case == "zero_energy":   # falls back to equal weights: Dr.GRPO
        want = np.asarray(adv.dr_grpo(rewards, mask))
        np.testing.assert_allclose(out if level == "rollout" else out[..., 0], want, atol=1e-6)
    else:
        np.testing.assert_array_equal(out, 0)   # no comparison, or no signal: exactly 0
    # verl's eps leaves equal rewards a tiny (finite) advantage
    verl = np.asarray(adv.optimal_token_baseline(rewards, mask, energy=energy, eps=1e-8))
    assert np.all(np.isfinite(verl)) and np.all(np.abs(verl[case != "zero_energy"]) < 1e-6)


def test_nan_padding_and_bad_inputs():
    r = REWARDS.copy()
    r[~MASK] = np.nan
    e = ENERGY.copy()
    e[~MASK] = np.nan
    assert np.all(np.isfinite(np.asarray(adv.optimal_token_baseline(r, MASK, energy=e))))
    for call in (lambda: adv.optimal_token_baseline(REWARDS, energy=-ENERGY),
                 lambda: adv.optimal_token_baseline(REWARDS, energy=np.ones((2, 2))),
                 lambda: adv.optimal_token_baseline(REWARDS, energy=TOKEN_ENERGY,
                                                    token_mask=np.ones((6, 5, 2), bool)),
                 lambda: adv.optimal_token_baseline(REWARDS, eps=-1.0),
                 lambda: adv.compute("otb", REWARDS, nope=1)):
        with pytest.raises(ValueError):
            call()


def test_jit_equals_eager():
    f = jax.jit(lambda r, m, e, t: adv.optimal_token_baseline(r, m, energy=e, token_mask=t))
    np.testing.assert_allclose(f(REWARDS, MASK, TOKEN_ENERGY, TOKEN_MASK),
                               adv.optimal_token_baseline(REWARDS, MASK, energy=TOKEN_ENERGY,
                                                          token_mask=TOKEN_MASK), atol=1e-6)


# ----------------------------------------------------------------------------- hypothesis
cases = st.integers(1, 3).flatmap(lambda b: st.integers(1, 5).flatmap(
    lambda g: st.integers(1, 4).flatmap(lambda t: st.tuples(
        hnp.arrays(np.float64, (b, g), elements=st.sampled_from([0.0, 1.0, 0.5, -2.0, 3.25])),
        hnp.arrays(np.bool_, (b, g)),
        hnp.arrays(np.float64, (b, g, t), elements=st.floats(0.0, 2.0)),
        hnp.arrays(np.bool_, (b, g, t))))))


@settings(max_examples=8, deadline=None)
@given(cases, st.floats(-5, 5), st.floats(0.1, 10), st.floats(0.1, 10))
def test_hypothesis_loop_and_invariances(data, shift, scale, energy_scale):
    """Matches the loop; a reward shift changes nothing; a reward scale scales the advantages;
    a common scale of the energies changes nothing; permuting the rollouts of a group permutes
    the advantages; per rollout, the energy-weighted advantages of a group sum to 0."""
    rewards, mask, energy, tmask = data
    with jax.enable_x64(True):
        otb = lambda r, e=energy, **kw: np.asarray(adv.optimal_token_baseline(  # noqa: E731
            jnp.asarray(r), mask, energy=jnp.asarray(e), token_mask=tmask, **kw))
        out = otb(rewards)
        assert np.all(np.isfinite(out)) and np.all(out[~(tmask & mask[..., None])] == 0)
        np.testing.assert_allclose(out, ref.optimal_token_baseline(rewards, mask, energy, tmask),
                                   atol=1e-9)
        np.testing.assert_allclose(otb(rewards + shift), out, atol=1e-9)
        np.testing.assert_allclose(otb(rewards * scale), scale * out, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(otb(rewards, energy * energy_scale), out, atol=1e-9)
        perm = np.random.default_rng(rewards.size).permutation(rewards.shape[1])
        permuted = np.asarray(adv.optimal_token_baseline(
            jnp.asarray(rewards[:, perm]), mask[:, perm], energy=jnp.asarray(energy[:, perm]),
            token_mask=tmask[:, perm]))
        np.testing.assert_allclose(permuted, out[:, perm], atol=1e-9)
        w = energy.sum(-1)
        a = np.asarray(adv.optimal_token_baseline(jnp.asarray(rewards), mask,
                                                  energy=jnp.asarray(w)))
        full = (mask.sum(-1) >= 2) & (np.where(mask, w, 0).sum(-1) > 0)
        np.testing.assert_allclose((a * np.where(mask, w, 0)).sum(-1)[full], 0, atol=1e-9)
