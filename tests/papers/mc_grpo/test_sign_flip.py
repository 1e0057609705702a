"""Sign-flip theory (MC-GRPO): exact enumeration over counts vs brute force over sequences."""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab import theory
from rlvr_lab.papers.mc_grpo import sign_flip as sf


# ----------------------------------------------------------------------------- reference
def _sign(x) -> int:
    return (x > 0) - (x < 0)


def _brute_force(values, probs, g, baseline, reference="mean", reference_g=None):
    """Plain loops over every SEQUENCE of rewards, exact rational baselines.

    Returns (flip, zero) as floats. Independent of the module: no count vectors, no
    vectorisation; the pivot is found by scanning the sequence for the first median value.
    """
    vals = [Fraction(v) for v in values]
    # decimal probabilities as the exact rationals they denote (0.05 -> 1/20), so a population
    # mean that equals a level in real arithmetic is a tie here too
    probs = [p if isinstance(p, Fraction) else Fraction(repr(float(p))) for p in probs]
    n = g if baseline == "mean" else g + 1
    if reference == "mean":
        refs = [(sum(Fraction(p) * v for v, p in zip(vals, probs)), 1.0)]
    elif reference == "median":
        order = sorted(range(len(vals)), key=lambda i: vals[i])
        cum, med = 0.0, None
        for i in order:
            cum += probs[i]
            if probs[i] > 0 and cum >= Fraction(1, 2):
                med = vals[i]
                break
        refs = [(med, 1.0)]
    elif reference == "group_mean":
        refs = []
        for seq in itertools.product(range(len(vals)), repeat=reference_g):
            w = math.prod(probs[i] for i in seq)
            refs.append((sum(vals[i] for i in seq) / reference_g, w))
    else:
        refs = [(Fraction(reference), 1.0)]
    flip = zero = 0.0
    for seq in itertools.product(range(len(vals)), repeat=n):
        w = math.prod(probs[i] for i in seq)
        if w == 0:
            continue
        r = [vals[i] for i in seq]
        if baseline == "mean":
            b = sum(r) / n
            used = list(range(n))
        else:
            b = sorted(r)[(n - 1) // 2]
            pivot = next(i for i in range(n) if r[i] == b)
            used = [i for i in range(n) if i != pivot]
        assert len(used) == g
        for ref, wref in refs:
            for i in used:
                est, true = _sign(r[i] - b), _sign(r[i] - ref)
                flip += w * wref * (est * true < 0) / g
                zero += w * wref * (est == 0 and true != 0) / g
    return float(flip), float(zero)


LAWS = [
    ((0.0, 1.5, 2.0), (0.3, 0.2, 0.5)),          # the repo's format + correctness levels
    ((0.0, 1.0), (0.3, 0.7)),                     # binary
    ((0.0, 1.0, 10.0), (0.45, 0.5, 0.05)),        # outlier
    ((0.0, 0.5, 0.5, 2.0), (0.25, 0.25, 0.25, 0.25)),  # duplicate value (tied levels)
    ((-1.0, 0.0, 1.0, 3.0), (0.2, 0.0, 0.5, 0.3)),     # a zero-probability level
]


# ----------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("values,probs", LAWS)
@pytest.mark.parametrize("baseline", ["mean", "median"])
@pytest.mark.parametrize("reference", ["mean", "median", 0.75])
def test_exact_matches_sequence_brute_force(values, probs, baseline, reference):
    for g in (1, 2, 3, 4):
        want = _brute_force(values, probs, g, baseline, reference)
        got = sf.flip_statistics(values, probs, g, baseline=baseline, reference=reference)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("baseline", ["mean", "median"])
def test_group_mean_reference_matches_brute_force(baseline):
    values, probs = (0.0, 1.5, 2.0), (0.3, 0.2, 0.5)
    for g, ref_g in ((2, 3), (3, 4)):
        want = _brute_force(values, probs, g, baseline, "group_mean", ref_g)
        got = sf.flip_statistics(values, probs, g, baseline=baseline,
                                 reference="group_mean", reference_g=ref_g)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), levels=st.integers(1, 4), g=st.integers(1, 4),
       baseline=st.sampled_from(["mean", "median"]))
def test_exact_matches_brute_force_property(data, levels, g, baseline):
    values = data.draw(st.lists(st.integers(-4, 8).map(lambda k: k / 2), min_size=levels,
                                max_size=levels))
    raw = data.draw(st.lists(st.integers(0, 10), min_size=levels, max_size=levels)
                    .filter(lambda w: sum(w) > 0))
    probs = [Fraction(w, sum(raw)) for w in raw]
    want = _brute_force(values, probs, g, baseline)
    got = sf.flip_statistics(values, [float(q) for q in probs], g, baseline=baseline)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert 0 <= got.flip + got.zero <= 1 + 1e-12


def test_paper_quick_check_numbers():
    """docs/papers.md quick check; G=4 mean is 0.067 exactly (the paper rounds to 0.066)."""
    v, p = (0, 1.5, 2), (0.3, 0.2, 0.5)
    got = {g: (sf.sign_flip_probability(v, p, g), sf.sign_flip_probability(v, p, g,
                                                                            baseline="median"))
           for g in (2, 4, 8)}
    np.testing.assert_allclose(got[2], (0.100, 0.075), atol=5e-4)
    np.testing.assert_allclose(got[4], (0.067, 0.078125), atol=5e-4)
    np.testing.assert_allclose(got[8], (0.0545308, 0.0817383), atol=5e-6)


def test_public_api_export():
    assert theory.sign_flip_probability is sf.sign_flip_probability


# ----------------------------------------------------------------------------- pivot and ties
def test_pivot_excluded_with_ties_hand_computed():
    """Fair coin, g=2 (3 rollouts), reference 0.5: every true advantage is non-zero.

    Counts (3,0): the pivot takes one of three zeros, the other two are zeroed -> share 1.
    Counts (2,1): median 0, pivot is one zero, the other zero is zeroed, the one is right
    -> share 1/2. zero = 2 * (1/8 * 1 + 3/8 * 1/2) = 5/8; no flips. Averaging over all 3
    rollouts instead (pivot kept) would give 2 * (1/8 + 3/8 * 2/3) = 3/4.
    """
    got = sf.flip_statistics((0, 1), (0.5, 0.5), 2, baseline="median")
    assert got.flip == 0
    assert got.zero == pytest.approx(5 / 8, abs=1e-15)


def test_pivot_rule_agrees_with_library_estimator():
    """The exact rule and advantages.mc_grpo drop the same rollout in tied groups."""
    from rlvr_lab import advantages
    rewards = np.array([[0.0, 1.5, 1.5, 2.0, 1.5], [2.0, 2.0, 0.0, 0.0, 2.0]])
    adv, keep = advantages.mc_grpo(rewards, scale="none")
    np.testing.assert_array_equal(np.asarray(keep), [[True, False, True, True, True],
                                                     [False, True, True, True, True]])
    np.testing.assert_array_equal(np.asarray(adv)[0], [-1.5, 0.0, 0.0, 0.5, 0.0])


# ----------------------------------------------------------------------------- properties
@settings(max_examples=30, deadline=None)
@given(p=st.floats(0.0, 1.0), g=st.integers(1, 16))
def test_binary_mean_baseline_never_flips(p, g):
    """1 - mean_G >= 0 and 0 - mean_G <= 0: binary rewards cannot flip under the mean."""
    s = sf.flip_statistics((0.0, 1.0), (1 - p, p), g)
    assert s.flip == 0.0
    assert 0.0 <= s.zero <= 1.0


def test_degenerate_inputs_are_finite():
    assert sf.flip_statistics((2.0,), (1.0,), 3) == (0.0, 0.0)   # one level: no signal
    assert sf.flip_statistics((2.0,), (1.0,), 3, reference=0.0) == (0.0, 1.0)
    assert sf.flip_statistics((0.0, 1.0), (0.0, 1.0), 5, baseline="median") == (0.0, 0.0)
    s = sf.flip_statistics((0.0, 1.0, 3.0), (0.2, 0.5, 0.3), 1)   # g=1 mean: own baseline
    assert s.flip == 0.0 and s.zero == pytest.approx(1.0)
    s = sf.flip_statistics((0, 1, 2, 3, 4), [0.2] * 5, 16, baseline="median")  # 20349 vectors
    assert np.isfinite(s.flip) and np.isfinite(s.zero)


@pytest.mark.parametrize("kwargs,match", [
    (dict(g=0), "g=0"), (dict(g=2.5), "g=2.5"), (dict(baseline="mode"), "baseline='mode'"),
    (dict(reference="max"), "reference='max'"), (dict(probs=(0.5, 0.6)), "probs="),
    (dict(values=(0.0, float("nan"))), "values="), (dict(probs=(1.0,)), "equal length"),
    (dict(reference="group_mean", reference_g=0), "g=0"),
])
def test_bad_arguments_raise_one_line(kwargs, match):
    args = dict(values=(0.0, 1.0), probs=(0.5, 0.5), g=2) | kwargs
    with pytest.raises(ValueError, match=match):
        sf.flip_statistics(args.pop("values"), args.pop("probs"), args.pop("g"), **args)


# ----------------------------------------------------------------------------- Monte Carlo
PAPER_LAW = ((0.0, 1.5, 2.0), (0.3, 0.2, 0.5))
OUTLIER_LAW = ((0.0, 1.0, 10.0), (0.5, 0.45, 0.05))


@pytest.mark.parametrize("law,baseline,g,reference", [
    (PAPER_LAW, "mean", 2, "mean"), (PAPER_LAW, "median", 2, "mean"),
    (OUTLIER_LAW, "mean", 4, "median"), (PAPER_LAW, "mean", 3, "group_mean"),
    (PAPER_LAW, "median", 3, "group_mean")])
def test_monte_carlo_within_ci_of_exact(law, baseline, g, reference):
    law = sf.discrete_law("law", *law)
    exact = sf.flip_statistics(law.values, law.probs, g, baseline=baseline,
                               reference=reference, reference_g=8)
    mc = sf.sign_flip_monte_carlo(jax.random.key(3), law.sample, g, baseline=baseline,
                                  reference=reference, reference_g=8, law_mean=law.mean,
                                  law_median=law.median, num_groups=1 << 15, level=0.99)
    assert exact.flip > 0.01                    # a case where flips happen
    assert abs(mc.flip - exact.flip) <= mc.flip_half_width
    assert abs(mc.zero - exact.zero) <= mc.zero_half_width
    assert 0 < mc.flip_half_width < 0.01


def test_monte_carlo_continuous_law_no_zeroing_and_sane_ci():
    law = sf.noisy_binary_law("noisy", 0.4, 0.3)
    mc = sf.sign_flip_monte_carlo(jax.random.key(0), law.sample, 3, baseline="mean",
                                  law_mean=law.mean, num_groups=1 << 13)
    assert mc.zero == 0.0                       # continuous: ties have probability 0
    assert 0.0 < mc.flip < 0.5 and 0 < mc.flip_half_width < 0.02
    with pytest.raises(ValueError, match="law_mean"):
        sf.sign_flip_monte_carlo(jax.random.key(0), law.sample, 3)


def test_law_medians_are_medians():
    """The populations' medians: half of a large sample lies below them."""
    for law in (sf.noisy_binary_law("n", 0.3, 0.2), sf.student_t_law("t", 0.6, 0.3, 2.0),
                sf.lognormal_law("ln", 1.0)):
        x = np.asarray(law.sample(jax.random.key(1), (200_000,)))
        assert abs((x < law.median).mean() - 0.5) < 0.005


@pytest.mark.parametrize("baseline", ["mean", "median"])
def test_monte_carlo_sweep_matches_exact_per_group_size(baseline):
    """One compiled sweep over group sizes (incl. g=1 and a group wider than the padding)."""
    law = sf.discrete_law("outlier", *OUTLIER_LAW)
    gs = (1, 5, 20)
    out = sf.monte_carlo_sweep(jax.random.key(5), law.sample, gs, baseline=baseline,
                               references=("mean", "median"), law_mean=law.mean,
                               law_median=law.median, num_groups=1 << 14, level=0.99)
    slack = 3 / (1 << 14)  # a probability far below 1/num_groups shows up as 0 (rule of three)
    for i, g in enumerate(gs):
        for j, ref in enumerate(("mean", "median")):
            exact = sf.flip_statistics(law.values, law.probs, g, baseline=baseline,
                                       reference=ref)
            assert abs(out["flip"][i, j] - exact.flip) <= out["flip_half_width"][i, j] + slack
            assert abs(out["zero"][i, j] - exact.zero) <= out["zero_half_width"][i, j] + slack
