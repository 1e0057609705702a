"""The MC-GRPO authors' setup: drop-min-|reward| baseline, (G+1)/#non-zero rescale, the exact
flip rate of the drop-min baseline, the gap-closure interval and the partial-credit reward,
each against plain float64 NumPy / Python references."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize
from scipy import stats as sst

from rlvr_lab import advantages
from rlvr_lab.papers.mc_grpo import estimators as E
from rlvr_lab.papers.mc_grpo import sign_flip as sf
from rlvr_lab.papers.mc_grpo.closure import fieller_ratio, gap_closure

B, N = 4, 5   # one shape: no recompilation per hypothesis example; masks give sizes 0..5
LEVELS = [0.0, 1.5, 2.0, -1.0, 1.0, -2.0]


# ----------------------------------------------------------------------------- references
def _ref_drop_min(rewards, mask, eps=1e-4, rescale=False):
    """Loops: mean/std over the valid entries, the first valid smallest-|r| one not kept."""
    adv = np.zeros(rewards.shape)
    keep = np.zeros(rewards.shape, bool)
    for b in range(rewards.shape[0]):
        idx = [i for i in range(rewards.shape[1]) if mask[b, i]]
        for i in idx:
            keep[b, i] = True
        if len(idx) < 2:
            continue
        vals = [float(rewards[b, i]) for i in idx]
        mean = math.fsum(vals) / len(vals)
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
        for i in idx:
            c = rewards[b, i] - mean
            adv[b, i] = 0.0 if (c == 0 or std + eps == 0) else c / (std + eps)
        smallest = min(abs(v) for v in vals)
        drop = next(i for i in idx if abs(rewards[b, i]) == smallest)
        keep[b, drop] = False
    if rescale:
        adv = _ref_rescale(adv, mask)
    return adv, keep


def _ref_rescale(adv, mask, atol=1e-6):
    out = np.zeros(adv.shape)
    for b in range(adv.shape[0]):
        idx = [i for i in range(adv.shape[1]) if mask[b, i]]
        nonzero = [i for i in idx if abs(adv[b, i]) > atol]
        factor = len(idx) / len(nonzero) if nonzero else 1.0
        for i in idx:
            out[b, i] = adv[b, i] * factor if i in nonzero else adv[b, i]
    return out


def _draw(data):
    rewards = np.array(data.draw(st.lists(st.sampled_from(LEVELS), min_size=B * N,
                                          max_size=B * N))).reshape(B, N)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=B * N,
                                       max_size=B * N))).reshape(B, N)
    return rewards, mask


# ----------------------------------------------------------------------------- estimators
@settings(max_examples=40, deadline=None)
@given(data=st.data(), rescale=st.booleans())
def test_drop_min_abs_matches_loops(data, rescale):
    rewards, mask = _draw(data)
    with jax.enable_x64(True):
        adv, keep = E.grpo_drop_min_abs(rewards, mask, rescale=rescale)
        want_adv, want_keep = _ref_drop_min(rewards, mask, rescale=rescale)
        np.testing.assert_allclose(np.asarray(adv), want_adv, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(keep), want_keep)
        # one rollout dropped from every group of two or more: G of G+1 enter the loss
        n = mask.sum(-1)
        np.testing.assert_array_equal(np.asarray(keep).sum(-1), np.where(n >= 2, n - 1, n))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_rescale_nonzero_matches_loops(data):
    rewards, mask = _draw(data)
    with jax.enable_x64(True):
        adv = np.asarray(advantages.mc_grpo(rewards, mask, scale="std").adv)
        got = np.asarray(E.rescale_nonzero(adv, mask))
        np.testing.assert_allclose(got, _ref_rescale(adv, mask), rtol=1e-12, atol=1e-12)
        # property: per group with a non-zero advantage, sum|A| over the n valid entries
        # equals n * mean of the non-zero |A| (the rescale restores a full group's weight)
        for b in range(B):
            nz = np.abs(adv[b][mask[b]]) > E.NONZERO_ATOL
            if nz.any():
                assert np.abs(got[b][mask[b]]).sum() == pytest.approx(
                    mask[b].sum() * np.abs(adv[b][mask[b]][nz]).mean(), rel=1e-12)
        assert np.isfinite(got).all()


def test_mc_grpo_rescaled_authors_example():
    """G+1=3, rewards (0, 1.5, 2): median 1.5, MAD 0.5 -> A = (-1.5, 0, 0.5)/0.501, then
    x 3/2 (two non-zero of three); the pivot (1.5) is not kept."""
    with jax.enable_x64(True):
        adv, keep = E.mc_grpo_rescaled(np.array([[0.0, 1.5, 2.0]]))
    np.testing.assert_allclose(np.asarray(adv), [[-1.5 / 0.501 * 1.5, 0.0, 0.5 / 0.501 * 1.5]],
                               rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(keep), [[True, False, True]])
    for name in ("grpo_drop_min_abs", "mc_grpo_rescaled"):
        assert name in advantages.names()


def test_degenerate_groups_finite():
    rewards = np.array([[2.0, 2.0, 2.0], [0.0, 0.0, 1.5], [1.0, 0.0, 0.0]])
    mask = np.array([[True, True, True], [True, True, True], [True, False, False]])
    for fn in (E.grpo_drop_min_abs, E.mc_grpo_rescaled):
        adv, keep = fn(rewards, mask)
        assert np.isfinite(np.asarray(adv)).all()
    adv, keep = E.grpo_drop_min_abs(rewards, mask)
    np.testing.assert_array_equal(np.asarray(adv)[0], 0)            # all equal: A = 0
    np.testing.assert_array_equal(np.asarray(keep)[2], [True, False, False])  # lone rollout
    np.testing.assert_array_equal(np.asarray(E.rescale_nonzero(np.zeros((2, 3)))), 0)
    with pytest.raises(ValueError, match="atol"):
        E.rescale_nonzero(np.zeros((1, 3)), atol=-1.0)


# ----------------------------------------------------------------------------- flip rates
def _brute_drop_min(values, probs, g):
    """Every sequence of g+1 levels, exact rationals: mean of all, the first smallest-|r|
    rollout excluded; flip vs the population mean."""
    vals = [Fraction(v) for v in values]
    probs = [Fraction(repr(float(p))) for p in probs]
    ref = sum(p * v for p, v in zip(probs, vals))
    flip = Fraction(0)
    for seq in itertools.product(range(len(vals)), repeat=g + 1):
        w = math.prod(probs[i] for i in seq)
        r = [vals[i] for i in seq]
        b = sum(r) / (g + 1)
        drop = min(range(g + 1), key=lambda j: (abs(r[j]), j))
        for j in range(g + 1):
            if j != drop and (r[j] - b) * (r[j] - ref) < 0:
                flip += w / g
    return float(flip)


@pytest.mark.parametrize("values,probs", [((0.0, 1.5, 2.0), (0.3, 0.2, 0.5)),
                                          ((-1.0, 1.0, 3.0), (0.25, 0.25, 0.5)),
                                          ((0.0, 1.0, 10.0), (0.5, 0.45, 0.05))])
@pytest.mark.parametrize("g", [1, 2, 3, 4])
def test_drop_min_flip_matches_brute_force(values, probs, g):
    got = sf.flip_statistics(values, probs, g, baseline="mean_drop_min").flip
    assert got == pytest.approx(_brute_drop_min(values, probs, g), abs=1e-12)


def test_drop_min_monte_carlo_agrees_with_exact():
    law = sf.discrete_law("paper-like", (0.0, 1.5, 2.0), (0.3, 0.2, 0.5))
    mc = sf.monte_carlo_sweep(jax.random.key(0), law.sample, [2, 4], baseline="mean_drop_min",
                              law_mean=law.mean, num_groups=1 << 14)
    for i, g in enumerate((2, 4)):
        exact = sf.flip_statistics(law.values, law.probs, g, baseline="mean_drop_min").flip
        assert abs(mc["flip"][i, 0] - exact) <= mc["flip_half_width"][i, 0] * 1.6 + 1e-9


# ----------------------------------------------------------------------------- gap closure
def _ref_fieller(a, b, level=0.95):
    """Test inversion by root finding: theta is in the set when the paired t statistic of
    a - theta b is at most the t quantile; bounds found by brentq around the ratio."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    n = a.size
    t = sst.t.ppf(0.5 + level / 2, n - 1)

    def excess(theta):
        d = a - theta * b
        return (d.mean() ** 2) - t ** 2 * d.var(ddof=1) / n

    est = a.mean() / b.mean()
    lo = optimize.brentq(excess, est - 1e6, est) if excess(est - 1e6) > 0 else -np.inf
    hi = optimize.brentq(excess, est, est + 1e6) if excess(est + 1e6) > 0 else np.inf
    return est, lo, hi


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 8), seed=st.integers(0, 10_000), shift=st.floats(0.5, 3.0))
def test_fieller_matches_root_finding(n, seed, shift):
    rng = np.random.default_rng(seed)
    b = shift + 0.3 * rng.standard_normal(n)
    a = 0.6 * b + 0.3 * rng.standard_normal(n)
    iv = fieller_ratio(a, b)
    est, lo, hi = _ref_fieller(a, b)
    assert iv.mean == pytest.approx(est, rel=1e-12)
    if np.isfinite(lo) and np.isfinite(hi):
        assert (iv.low, iv.high) == pytest.approx((lo, hi), rel=1e-7, abs=1e-9)
        assert iv.low <= iv.mean <= iv.high
    # scale invariance: the same ratio and interval for scores in percent
    iv100 = fieller_ratio(100 * a, 100 * b)
    assert iv100.mean == pytest.approx(iv.mean, rel=1e-12)
    if np.isfinite(iv.low):
        assert iv100.low == pytest.approx(iv.low, rel=1e-9, abs=1e-12)


def test_gap_closure_degenerate():
    iv = gap_closure([0.7, 0.7], [0.6, 0.6], [0.6, 0.6])     # no gap: ratio inf, unbounded
    assert iv.mean == np.inf and (iv.low, iv.high) == (-np.inf, np.inf)
    assert gap_closure([0.6], [0.6], [0.8]).low == -np.inf   # one seed
    iv = gap_closure([0.7, 0.7, 0.7], [0.6, 0.6, 0.6], [0.8, 0.8, 0.8])   # zero spread
    assert (iv.mean, iv.low, iv.high) == pytest.approx((0.5, 0.5, 0.5))
    assert gap_closure([0.6, 0.6], [0.6, 0.6], [0.6, 0.6]).mean == 0.0
    with pytest.raises(ValueError, match="one value per seed"):
        fieller_ratio([1.0, 2.0], [1.0])


# ----------------------------------------------------------------------------- reward
def test_partial_credit_levels():
    from rlvr_lab.envs import arithmetic
    from rlvr_lab.papers.mc_grpo import small
    p = arithmetic.make_problem(47, 85)          # 132; carry-free sum 22
    assert small.partial_credit(p, "231>132") == (2.0, True)
    assert small.partial_credit(p, "22>22") == (1.5, False)
    assert small.partial_credit(p, "221>122") == (0.0, False)
    assert small.partial_credit(p, "garbage") == (0.0, False)
    q = arithmetic.make_problem(12, 34)          # no carry: no near miss exists
    assert small.partial_credit(q, "64>46") == (2.0, True)
    r, c = small.score([p, q], np.zeros((2, 2, 4), np.int32))
    assert r.shape == (2, 2) and not c.any()


# ----------------------------------------------------------------------------- experiment pieces
def test_partial_credit_trainer_verify_row_order():
    """verify() maps rows b*G + g to [S, B, G] like the base trainer (no SFT needed)."""
    from types import SimpleNamespace

    from rlvr_lab.envs import arithmetic, tokenizer
    from rlvr_lab.papers.mc_grpo import small
    pool = [arithmetic.make_problem(47, 85), arithmetic.make_problem(12, 34)]
    texts = {(0, 0): "231>132", (0, 1): "22>22", (1, 0): "64>46", (1, 1): "C"}
    ids, _ = tokenizer.encode_completions([texts[(b, g)] for b in range(2) for g in range(2)], 8)
    tr = object.__new__(small.PartialCreditTrainer)
    tr.config = SimpleNamespace(num_prompts=2, num_generations=2,
                                allow_truncated_completions=False)
    tr.pool = pool
    rewards, correct = tr.verify(np.array([[0, 1]]), ids[None])
    np.testing.assert_array_equal(rewards, [[[2.0, 1.5], [2.0, 0.0]]])
    np.testing.assert_array_equal(correct, [[[True, False], [True, False]]])
    r, c = tr._verify_groups(np.array([1, 0]), ids.reshape(2, 2, -1)[::-1])
    np.testing.assert_array_equal(r, [[2.0, 0.0], [2.0, 1.5]])


def test_small_configs_and_flip_table():
    from simulations import mc_grpo as M
    cfgs = M.small_configs(M.small_base(True), M.small_arms(True))
    assert cfgs[("GRPO", 2)].num_generations == 2
    assert cfgs[("MC-GRPO", 2)].num_generations == 3
    assert cfgs[("MC-GRPO", 2)].advantage == "mc_grpo_rescaled"
    assert cfgs[("GRPO G+1 drop min|r|", 2)].advantage == "grpo_drop_min_abs"
    assert all(c.beta == 0.04 and c.max_grad_norm == 1.0 for c in cfgs.values())
    laws = np.array([[0.3, 0.2, 0.5], [0.0, 0.0, 1.0]])   # one constant prompt: no flips
    t = M.law_flip_table(laws, (0.0, 1.5, 2.0), (2, 4))
    row = t[(t.G == 2) & (t.estimator == "mean (G)")].flip.item()
    assert row == pytest.approx(sf.flip_statistics((0.0, 1.5, 2.0), (0.3, 0.2, 0.5), 2).flip / 2)
    assert M.flip_range(t) == [2]   # the paper-like law: the median helps at G=2, not at 4
