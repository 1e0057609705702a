"""rlvr_lab.advantages against the loop references of tests/reference.py and closed forms."""
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab import advantages as adv

# A ragged batch: ties, a group of one, a fully masked group, an all-equal group, a masked
# entry that holds the group's median value (it must never be the pivot).
REWARDS = np.array([
    [0.0, 1.0, 1.0, 0.5, 2.0],
    [3.0, -1.0, 0.25, 7.0, 2.0],
    [1.0, 1.0, 0.0, 2.0, 9.0],
    [4.0, 0.0, 0.0, 0.0, 0.0],
    [0.3, 0.3, 0.3, 0.3, 0.3],
    [5.0, 6.0, 7.0, 8.0, 9.0],
])
MASK = np.array([
    [1, 1, 1, 1, 1],
    [1, 1, 1, 0, 1],
    [0, 1, 1, 1, 0],
    [1, 0, 0, 0, 0],
    [1, 1, 1, 1, 1],
    [0, 0, 0, 0, 0],
], bool)

DTYPES = [jnp.float32, jnp.float64]


@functools.cache
def _jitted(name, kwargs_items):
    kwargs = dict(kwargs_items)
    return jax.jit(lambda r, m: adv.compute(name, r, m, **kwargs))


def run(name, rewards, mask=None, **kwargs):
    """``adv.compute`` under one cached jit per estimator: eager JAX compiles every primitive
    anew for each shape, which dominates the run time of these small cases. Eager calls are
    checked against it in test_jit_equals_eager and the reference tests on REWARDS."""
    rewards = jnp.asarray(rewards)
    mask = np.ones(rewards.shape, bool) if mask is None else np.asarray(mask, bool)
    return _jitted(name, tuple(sorted(kwargs.items())))(rewards, mask)


def _close(actual, expected, dtype, scale=1.0):
    tol = 1e-12 if dtype == jnp.float64 else 2e-6
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected,
                               rtol=tol, atol=tol * scale)


@pytest.fixture(params=DTYPES, ids=["f32", "f64"])
def dtype(request):
    with jax.enable_x64(request.param == jnp.float64):
        yield request.param


# ----------------------------------------------------------------------------- references
@pytest.mark.parametrize("scale", ["std", "none", "batch"])
@pytest.mark.parametrize("eps", [1e-6, 0.5])
def test_grpo_matches_reference(dtype, scale, eps):
    out = adv.grpo(jnp.asarray(REWARDS, dtype), MASK, scale=scale, eps=eps)
    assert out.dtype == dtype
    _close(out, ref.grpo(REWARDS, MASK, scale=scale, eps=eps), dtype)


def test_grpo_hand_values():
    # group [0, 1]: mean 1/2, sample std sqrt(1/2)
    out = run("grpo", [[0.0, 1.0]], eps=0.1).adv
    a = 0.5 / (math.sqrt(0.5) + 0.1)
    np.testing.assert_allclose(out, [[-a, a]], rtol=1e-6)
    # "batch": the std of all valid rewards of the batch, not of the group
    rewards = jnp.array([[0.0, 1.0], [10.0, 14.0]])
    batch_std = float(np.std([0, 1, 10, 14], ddof=1))
    np.testing.assert_allclose(run("grpo", rewards, scale="batch", eps=0.0).adv,
                               np.array([[-0.5, 0.5], [-2, 2]]) / batch_std, rtol=1e-6)
    np.testing.assert_allclose(run("grpo", rewards, scale="none").adv, [[-0.5, 0.5], [-2, 2]])


def test_grpo_without_mask_equals_full_mask(dtype):
    rewards = jnp.asarray(REWARDS, dtype)
    full = np.ones(REWARDS.shape, bool)
    for scale in ["std", "none", "batch"]:
        np.testing.assert_array_equal(adv.grpo(rewards, scale=scale),
                                      adv.grpo(rewards, full, scale=scale))


def test_dr_grpo_is_grpo_without_scale(dtype):
    rewards = jnp.asarray(REWARDS, dtype)
    np.testing.assert_array_equal(adv.dr_grpo(rewards, MASK), adv.grpo(rewards, MASK, scale="none"))
    _close(adv.dr_grpo(rewards, MASK), ref.grpo(REWARDS, MASK, scale="none"), dtype)


def test_rloo_leave_one_out(dtype):
    rewards = jnp.asarray(REWARDS, dtype)
    out = adv.rloo(rewards, MASK)
    assert out.dtype == dtype
    _close(out, ref.rloo(REWARDS, MASK), dtype)
    # the identity rloo = G/(G-1) * dr_grpo with each group's own number of valid rollouts
    n = MASK.sum(1, keepdims=True)
    factor = np.where(n >= 2, n / np.maximum(n - 1, 1), 0.0)
    _close(out, factor * np.asarray(adv.dr_grpo(rewards, MASK), np.float64), dtype)


def test_rloo_hand_values():
    # [1, 2, 6]: 1 - 4, 2 - 3.5, 6 - 1.5
    np.testing.assert_allclose(run("rloo", [[1.0, 2.0, 6.0]]).adv, [[-3.0, -1.5, 4.5]],
                               rtol=1e-6)


@pytest.mark.parametrize("eps", [1e-8, 0.3])
def test_reinforce_pp_baseline_matches_reference(dtype, eps):
    out = adv.reinforce_pp_baseline(jnp.asarray(REWARDS, dtype), MASK, eps=eps)
    assert out.dtype == dtype
    _close(out, ref.reinforce_pp_baseline(REWARDS, MASK, eps=eps), dtype)


def test_reinforce_pp_baseline_is_whitened():
    rewards = np.array([[0.0, 1.0, 1.0, 3.0], [2.0, 2.0, 5.0, -1.0]])
    with jax.enable_x64(True):
        out = np.asarray(run("reinforce_pp_baseline", rewards, eps=0.0).adv)
    assert abs(out.mean()) < 1e-12
    np.testing.assert_allclose(out.std(ddof=1), 1.0, rtol=1e-12)


@pytest.mark.parametrize("scale", ["mad", "std", "none"])
@pytest.mark.parametrize("eps", [1e-3, 0.25])
def test_mc_grpo_matches_reference(dtype, scale, eps):
    out, keep = adv.mc_grpo(jnp.asarray(REWARDS, dtype), MASK, scale=scale, eps=eps)
    expected, expected_keep = ref.mc_grpo(REWARDS, MASK, scale=scale, eps=eps)
    assert out.dtype == dtype and keep.dtype == jnp.bool_
    _close(out, expected, dtype, scale=1 / eps)
    np.testing.assert_array_equal(keep, expected_keep)


def test_mc_grpo_lower_median_and_pivot():
    # even group: torch.median gives the lower middle value 1 (not 1.5); pivot = index of 1
    a, keep = run("mc_grpo", [[3.0, 1.0, 0.0, 2.0]], scale="none")
    np.testing.assert_allclose(a, [[2.0, 0.0, -1.0, 1.0]])
    np.testing.assert_array_equal(keep, [[True, False, True, True]])
    # ties with the median: only the FIRST one is the pivot, the others stay with A = 0
    a, keep = run("mc_grpo", [[2.0, 1.0, 1.0, 3.0, 1.0]], scale="none")
    np.testing.assert_allclose(a, [[1.0, 0.0, 0.0, 2.0, 0.0]])
    np.testing.assert_array_equal(keep, [[True, False, True, True, True]])
    # a masked entry equal to the median is not the pivot; median over valid only
    a, keep = run("mc_grpo", [[1.0, 1.0, 0.0, 2.0]], [[False, True, True, True]], scale="none")
    np.testing.assert_allclose(a, [[0.0, 0.0, -1.0, 1.0]])
    np.testing.assert_array_equal(keep, [[False, False, True, True]])
    # exactly one pivot per non-empty group: keep drops one valid rollout
    _, keep = run("mc_grpo", REWARDS, MASK)
    np.testing.assert_array_equal(np.asarray(keep).sum(1), np.maximum(MASK.sum(1) - 1, 0))


def test_mc_grpo_mad_hand_value():
    # [0, 1, 2, 4, 10]: m = 2, |r - m| = [2, 1, 0, 2, 8], MAD = 2
    a, _ = run("mc_grpo", [[0.0, 1.0, 2.0, 4.0, 10.0]], eps=0.0)
    np.testing.assert_allclose(a, [[-1.0, -0.5, 0.0, 1.0, 4.0]], rtol=1e-6)


def test_mc_grpo_binary_mad_pitfall(dtype):
    """Binary rewards, odd group: MAD = 0, so |A| = 1/eps on the minority side, 0 elsewhere."""
    eps = 1e-3
    width = 7
    groups, masks = [], []
    for n in [3, 5, 7]:  # every binary group of n valid rollouts, padded to one shape
        for bits in itertools.product([0.0, 1.0], repeat=n):
            groups.append(list(bits) + [1.0] * (width - n))
            masks.append([True] * n + [False] * (width - n))
    groups, masks = np.array(groups), np.array(masks)
    out, _ = run("mc_grpo", jnp.asarray(groups, dtype), masks, eps=eps)
    out = np.asarray(out, np.float64)
    for group, mask, a in zip(groups, masks, out):
        valid, a = group[mask], a[mask]
        minority = valid != (valid.sum() > len(valid) / 2)
        np.testing.assert_allclose(np.abs(a[minority]), 1 / eps, rtol=1e-6)
        assert np.all(a[~minority] == 0)


def test_mc_grpo_mad_depends_on_eps_only_through_divisor():
    rewards = jnp.array([[0.0, 0.0, 1.0]])
    for eps in [1e-3, 1e-2, 0.5]:
        a, _ = run("mc_grpo", rewards, eps=eps)
        np.testing.assert_allclose(a, [[0.0, 0.0, 1 / eps]], rtol=1e-6)


# ----------------------------------------------------------------------------- degenerate
def test_degenerate_groups_are_zero(dtype):
    rewards = jnp.asarray([[0.7] * 7, [1.3] * 7, [0.1] * 7, [2.0, 0, 0, 0, 0, 0, 0]], dtype)
    mask = np.ones(rewards.shape, bool)
    mask[3, 1:] = False  # a group of one
    relative = [n for n in adv.names() if n not in adv.NOT_GROUP_RELATIVE]  # zoo: own tests
    for name in relative:
        out = run(name, rewards, mask)
        assert np.all(np.asarray(out.adv) == 0), name
    if dtype == jnp.float32:  # G = 1 as a shape, not only through the mask
        one_column = jnp.asarray([[3.0], [-1.0]], dtype)
        for name in relative:
            assert np.all(np.asarray(run(name, one_column).adv) == 0), name
    empty = np.zeros(rewards.shape, bool)
    for name in relative:
        out = run(name, rewards, empty)
        assert np.all(np.asarray(out.adv) == 0) and not np.any(out.keep), name


def test_eps_matters_only_with_spread():
    rewards = jnp.array([[0.0, 1.0, 1.0]])
    a1, a2 = run("grpo", rewards, eps=1e-6).adv, run("grpo", rewards, eps=1.0).adv
    assert not np.allclose(a1, a2)


# ----------------------------------------------------------------------------- registry, errors
def test_registry():
    expected = {"grpo", "dr_grpo", "rloo", "reinforce_pp_baseline", "mc_grpo"}
    assert expected <= set(adv.names())
    assert adv.names() == sorted(adv.names())
    assert adv.get("grpo") is adv.grpo and adv.get("mc_grpo") is adv.mc_grpo
    with pytest.raises(ValueError) as info:
        adv.get("gpro")
    message = str(info.value)
    assert "gpro" in message and all(name in message for name in adv.names())
    assert "\n" not in message


def test_compute_uniform_output():
    rewards = jnp.asarray(REWARDS)
    out = adv.compute("grpo", rewards, MASK, scale="none")
    assert isinstance(out, adv.Advantages)
    np.testing.assert_array_equal(out.adv, adv.grpo(rewards, MASK, scale="none"))
    np.testing.assert_array_equal(out.keep, MASK)
    np.testing.assert_array_equal(adv.compute("grpo", rewards).keep, np.ones(REWARDS.shape, bool))
    mc = adv.compute("mc_grpo", rewards, MASK, scale="std")
    a, keep = adv.mc_grpo(rewards, MASK, scale="std")
    np.testing.assert_array_equal(mc.adv, a)
    np.testing.assert_array_equal(mc.keep, keep)
    with pytest.raises(ValueError, match="nope"):
        adv.compute("nope", rewards)


@pytest.mark.parametrize("fn, bad", [(adv.grpo, "mad"), (adv.mc_grpo, "batch")])
def test_bad_scale_raises(fn, bad):
    with pytest.raises(ValueError, match=bad):
        fn(jnp.ones((2, 3)), scale=bad)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match=r"\(4,\)"):
        adv.grpo(jnp.ones(4))
    with pytest.raises(ValueError, match=r"\(2, 2\)"):
        adv.rloo(jnp.ones((2, 3)), jnp.ones((2, 2), bool))


def test_integer_rewards_become_float():
    out = run("grpo", REWARDS.astype(np.int32), MASK).adv
    assert jnp.issubdtype(out.dtype, jnp.floating)
    np.testing.assert_allclose(out, run("grpo", REWARDS.astype(np.int32).astype(np.float32),
                                        MASK).adv)


# ----------------------------------------------------------------------------- jit
@pytest.mark.parametrize("name, kwargs", [
    ("grpo", {"scale": "std"}), ("grpo", {"scale": "batch"}), ("dr_grpo", {}), ("rloo", {}),
    ("reinforce_pp_baseline", {}), ("mc_grpo", {"scale": "mad"}), ("mc_grpo", {"scale": "std"}),
])
def test_jit_equals_eager(dtype, name, kwargs):
    rewards = jnp.asarray(REWARDS, dtype)
    eager = adv.compute(name, rewards, MASK, **kwargs)
    jitted = jax.jit(lambda r, m: adv.compute(name, r, m, **kwargs))(rewards, MASK)
    tol = 1e-12 if dtype == jnp.float64 else 1e-5
    np.testing.assert_allclose(jitted.adv, eager.adv, rtol=tol, atol=tol)
    np.testing.assert_array_equal(jitted.keep, eager.keep)
    assert jitted.adv.dtype == dtype


# ----------------------------------------------------------------------------- properties
B, G = 3, 6
CENTRED = [  # (name, kwargs) of estimators whose value is invariant to a constant shift
    ("grpo", {"scale": "std"}), ("grpo", {"scale": "none"}), ("grpo", {"scale": "batch"}),
    ("dr_grpo", {}), ("rloo", {}), ("reinforce_pp_baseline", {}),
    ("mc_grpo", {"scale": "none"}), ("mc_grpo", {"scale": "mad"}), ("mc_grpo", {"scale": "std"}),
]

reward_values = st.one_of(
    st.integers(-3, 3).map(float),  # ties
    st.floats(-50, 50, allow_nan=False, allow_infinity=False, allow_subnormal=False),
)
# multiples of 2**-10: adding the shifts below is exact, so ties stay ties
grid_values = st.integers(-50 * 1024, 50 * 1024).map(lambda i: i / 1024)


def _batches(values):
    def grid(elements):
        return st.lists(elements, min_size=B * G, max_size=B * G).map(
            lambda v: np.reshape(v, (B, G)))

    return st.tuples(grid(values), grid(st.booleans()))


batches = _batches(reward_values)


def _reference(name, rewards, mask, kwargs):
    if name == "grpo":
        return ref.grpo(rewards, mask, **kwargs), mask
    if name == "dr_grpo":
        return ref.grpo(rewards, mask, scale="none"), mask
    if name == "rloo":
        return ref.rloo(rewards, mask), mask
    if name == "reinforce_pp_baseline":
        return ref.reinforce_pp_baseline(rewards, mask), mask
    return ref.mc_grpo(rewards, mask, **kwargs)


@settings(max_examples=40, deadline=None)
@given(batches)
def test_property_matches_reference_float64(batch):
    rewards, mask = batch
    with jax.enable_x64(True):
        for name, kwargs in CENTRED:
            out = run(name, rewards, mask, **kwargs)
            expected, expected_keep = _reference(name, rewards, mask, kwargs)
            # r - centre carries an absolute error of a few ulp of |r|, divided by std + eps
            # with eps = 1e-6 at worst
            atol = 1e-9 * (1 + np.abs(rewards).max())
            np.testing.assert_allclose(out.adv, expected, rtol=1e-9, atol=atol, err_msg=name)
            np.testing.assert_array_equal(out.keep, expected_keep, err_msg=name)


@settings(max_examples=40, deadline=None)
@given(_batches(st.one_of(st.integers(-3, 3).map(float), grid_values)),
       st.sampled_from([-3.5, 0.25, 64.0, 1e3]))
def test_property_shift_invariance(batch, shift):
    rewards, mask = batch
    with jax.enable_x64(True):
        for name, kwargs in CENTRED:
            a = run(name, rewards, mask, **kwargs)
            b = run(name, rewards + shift, mask, **kwargs)
            # rounding of r + shift (~1e-13) is divided by std + eps, eps = 1e-6 at worst
            np.testing.assert_allclose(a.adv, b.adv, rtol=1e-8, atol=1e-6, err_msg=name)
            np.testing.assert_array_equal(a.keep, b.keep, err_msg=name)


@settings(max_examples=25, deadline=None)
@given(batches, st.floats(0.01, 100))
def test_property_scale_equivariance(batch, c):
    rewards, mask = batch
    with jax.enable_x64(True):
        # unscaled estimators are linear in the rewards
        for name, kwargs in [("dr_grpo", {}), ("rloo", {}), ("mc_grpo", {"scale": "none"})]:
            np.testing.assert_allclose(run(name, c * rewards, mask, **kwargs).adv,
                                       c * run(name, rewards, mask, **kwargs).adv,
                                       rtol=1e-9, atol=1e-9 * c, err_msg=name)
        # scaled ones are invariant once eps is scaled with the rewards (eager: eps varies)
        for name, kwargs, eps in [("grpo", {"scale": "std"}, 1e-3),
                                  ("grpo", {"scale": "batch"}, 1e-3),
                                  ("mc_grpo", {"scale": "mad"}, 1e-3),
                                  ("mc_grpo", {"scale": "std"}, 1e-3)]:
            scaled = adv.compute(name, c * rewards, mask, eps=c * eps, **kwargs).adv
            np.testing.assert_allclose(scaled,
                                       adv.compute(name, rewards, mask, eps=eps, **kwargs).adv,
                                       rtol=1e-8, atol=1e-8, err_msg=name)
        # mean-centred standardisation is odd in the rewards
        np.testing.assert_allclose(run("grpo", -rewards, mask).adv, -run("grpo", rewards, mask).adv,
                                   atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(batches, st.sampled_from(DTYPES))
def test_property_structure(batch, dtype):
    """Masked entries exactly 0, groups sum to 0, all-equal/lone/empty groups 0, never NaN."""
    rewards, mask = batch
    with jax.enable_x64(dtype == jnp.float64):
        rewards = jnp.asarray(rewards, dtype)
        r = np.asarray(rewards, np.float64)
        n = mask.sum(1)
        equal = np.array([np.ptp(r[b][mask[b]]) == 0 if n[b] else True for b in range(B)])
        for name, kwargs in CENTRED:
            out = run(name, rewards, mask, **kwargs)
            a = np.asarray(out.adv, np.float64)
            assert np.all(np.isfinite(a)), name
            assert np.all(a[~mask] == 0), name
            assert not np.any(np.asarray(out.keep)[~mask]), name
            assert np.all(a[n < 2] == 0), name
            if name == "reinforce_pp_baseline":
                # the batch mean it subtracts is 0 only up to rounding
                assert np.all(np.abs(a[equal]) < (1e-12 if dtype == jnp.float64 else 1e-5)), name
            else:
                assert np.all(a[equal] == 0), name
        # valid advantages of a group sum to 0 (the mean's rounding, ~ulp(|r|) per entry, is
        # divided by std + eps for grpo, so that one is checked in float64 only)
        spread = np.abs(r).max() + 1
        names = ["grpo", "dr_grpo", "rloo"] if dtype == jnp.float64 else ["dr_grpo", "rloo"]
        tol = 1e-9 if dtype == jnp.float64 else 1e-5
        for name in names:
            a = np.asarray(run(name, rewards, mask).adv, np.float64)
            np.testing.assert_allclose(a.sum(1), 0, atol=tol * spread * G, err_msg=name)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e30, 1e30, allow_nan=False, allow_subnormal=False),
                min_size=B * G, max_size=B * G).map(lambda v: np.reshape(v, (B, G))))
def test_property_never_nan_with_extreme_rewards(rewards):
    for name, kwargs in CENTRED:
        a = np.asarray(run(name, jnp.asarray(rewards, jnp.float32), None, **kwargs).adv)
        assert not np.any(np.isnan(a)), name


def test_vmap_over_seeds_equals_loop():
    """The trainer vmaps estimators over seeds: same numbers as one call per batch."""
    rng = np.random.default_rng(1)
    stacked = rng.integers(0, 3, size=(3,) + REWARDS.shape).astype(np.float32)
    masks = np.broadcast_to(MASK, stacked.shape)
    with jax.enable_x64(True):
        stacked64 = jnp.asarray(stacked, jnp.float64)
        for name, kwargs in [("grpo", {}), ("mc_grpo", {})]:
            batched = jax.vmap(functools.partial(adv.compute, name, **kwargs))(stacked64, masks)
            for i in range(len(stacked)):
                single = run(name, stacked64[i], MASK, **kwargs)
                np.testing.assert_allclose(batched.adv[i], single.adv, rtol=1e-12, atol=1e-12)
                np.testing.assert_array_equal(batched.keep[i], single.keep)


def test_register_custom_estimator():
    """A registered estimator is found by name, listed, and wrapped uniformly by compute."""
    def best_of_group(rewards, mask=None):
        rewards = jnp.asarray(rewards)
        return (rewards == rewards.max(-1, keepdims=True)).astype(rewards.dtype)

    adv.register("test_best_of_group", best_of_group)
    assert adv.get("test_best_of_group") is best_of_group
    assert "test_best_of_group" in adv.names()
    out = adv.compute("test_best_of_group", jnp.array([[0.0, 2.0, 1.0]]))
    np.testing.assert_array_equal(out.adv, [[0.0, 1.0, 0.0]])
    np.testing.assert_array_equal(out.keep, [[True, True, True]])
    # the decorator form, and a second, different function under a taken name is refused
    @adv.register("test_zero")
    def zero(rewards, mask=None):
        return jnp.zeros_like(rewards)
    assert adv.get("test_zero") is zero
    with pytest.raises(ValueError, match="test_best_of_group"):
        adv.register("test_best_of_group", zero)
