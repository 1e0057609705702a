"""rlvr_lab.stats against scipy's own t-tests and closed forms, plus properties."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from rlvr_lab import stats

seeds = st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=12)


def test_mean_interval_matches_scipy():
    x = np.array([0.1, 0.25, 0.3, 0.05, 0.2])
    iv = stats.mean_interval(x, level=0.9)
    lo, hi = sst.t.interval(0.9, len(x) - 1, loc=x.mean(), scale=sst.sem(x))
    assert iv.mean == pytest.approx(x.mean()) and iv.n == 5
    assert (iv.low, iv.high) == pytest.approx((lo, hi))


def test_degenerate_inputs_are_finite_or_undecided():
    one = stats.mean_interval([0.4])
    assert one.mean == 0.4 and one.low == -math.inf and one.high == math.inf
    same = stats.mean_interval([0.2, 0.2, 0.2])
    assert same.low == pytest.approx(0.2) and same.high == pytest.approx(0.2)
    nan = stats.mean_interval([0.1, float("nan")])
    assert nan.low == -math.inf
    eq = stats.equivalence([1.0, 1.0], [1.0, 1.0], margin=0.1)
    assert eq.equivalent and eq.not_worse


def test_tost_matches_two_scipy_one_sided_tests():
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.5, 0.1, 8), rng.normal(0.48, 0.1, 8)
    m = 0.15
    eq = stats.equivalence(a, b, m)
    p_lo = sst.ttest_rel(a, b - m, alternative="greater").pvalue
    p_hi = sst.ttest_rel(a, b + m, alternative="less").pvalue
    assert eq.p_not_worse == pytest.approx(p_lo) and eq.p_not_better == pytest.approx(p_hi)
    assert eq.equivalent == (max(p_lo, p_hi) < 0.05)
    # the reported 90% interval inside (-m, m) <=> both tests reject
    assert eq.equivalent == (eq.low > -m and eq.high < m)


def test_welch_tost_matches_scipy():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.0, 0.2, 6), rng.normal(0.05, 0.05, 9)
    eq = stats.equivalence(a, b, 0.3, paired=False)
    p_lo = sst.ttest_ind(a, b - 0.3, equal_var=False, alternative="greater").pvalue
    p_hi = sst.ttest_ind(a, b + 0.3, equal_var=False, alternative="less").pvalue
    assert eq.p_not_worse == pytest.approx(p_lo) and eq.p_not_better == pytest.approx(p_hi)


def test_clear_difference_is_not_equivalent_and_overlap_is_not_evidence():
    a = np.array([0.5, 0.52, 0.49, 0.51])
    assert not stats.equivalence(a, a - 0.3, 0.05).equivalent      # far apart
    noisy = stats.equivalence([0.1, 0.9, 0.2, 0.8], [0.5, 0.5, 0.5, 0.5], 0.05)
    assert not noisy.equivalent and not noisy.not_worse            # too noisy to claim equal


@settings(max_examples=60, deadline=None)
@given(seeds, st.floats(0.01, 5))
def test_paired_interval_contains_mean_and_is_shift_invariant(x, shift):
    x = np.array(x)
    iv = stats.paired_difference(x + shift, x * 0 + shift)
    ref = stats.mean_interval(x)
    assert iv.low <= iv.mean <= iv.high
    assert iv.mean == pytest.approx(ref.mean, abs=1e-9)
    assert iv.half_width == pytest.approx(ref.half_width, rel=1e-6, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(seeds, st.floats(0.01, 3))
def test_wider_margin_never_hurts(x, margin):
    x = np.array(x)
    narrow = stats.equivalence(x, np.zeros_like(x), margin)
    wide = stats.equivalence(x, np.zeros_like(x), 2 * margin)
    assert wide.p_not_worse <= narrow.p_not_worse + 1e-12
    assert (not narrow.equivalent) or wide.equivalent


@pytest.mark.parametrize("bad", [{"level": 1.0}, {"level": True}, {"margin": 0.0},
                                 {"margin": float("inf")}])
def test_bad_options_are_one_line_errors(bad):
    kw = {"margin": 0.1, **bad}
    with pytest.raises(ValueError, match="not allowed"):
        stats.equivalence([1.0, 2.0], [1.0, 2.0], **kw)
    with pytest.raises(ValueError, match="per seed"):
        stats.paired_difference([1.0, 2.0], [1.0])
