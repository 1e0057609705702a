"""DARS small-model helpers: budget matching, smoothing, equal-progress reading (float64
loops as references, hypothesis properties) and the arm configs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.dars.small import budget_steps, smooth, value_at_level


def _ref_smooth(x, w):
    out = np.zeros_like(x, dtype=float)
    for s in range(x.shape[0]):
        for t in range(x.shape[1]):
            seg = x[s, max(0, t - w + 1):t + 1]
            out[s, t] = sum(seg) / len(seg)
    return out


def _ref_level(lev, val, level):
    out = []
    for s in range(lev.shape[0]):
        v = float("nan")
        for t in range(lev.shape[1]):
            if lev[s, t] >= level:
                if t == 0:
                    v = val[s, 0]
                else:
                    frac = (level - lev[s, t - 1]) / (lev[s, t] - lev[s, t - 1])
                    v = val[s, t - 1] + frac * (val[s, t] - val[s, t - 1])
                break
        out.append(v)
    return np.array(out)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), w=st.integers(1, 6), t=st.integers(1, 12))
def test_smooth_matches_loops(seed, w, t):
    x = np.random.default_rng(seed).random((3, t))
    np.testing.assert_allclose(smooth(x, w), _ref_smooth(x, w), rtol=1e-12, atol=1e-12)
    # a constant curve stays constant
    np.testing.assert_allclose(smooth(np.full((2, t), 0.7), w), 0.7, rtol=1e-12)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), level=st.floats(0.0, 1.2))
def test_value_at_level_matches_loops(seed, level):
    rng = np.random.default_rng(seed)
    lev = np.cumsum(rng.random((4, 10)) * 0.2, axis=1)     # increasing progress curves
    val = rng.random((4, 10))
    got = value_at_level(lev, val, level)
    want = _ref_level(lev, val, level)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(got)], want[~np.isnan(want)], rtol=1e-12)
    # the value read at a level lies between the values around the crossing
    for s in np.flatnonzero(~np.isnan(got)):
        j = np.flatnonzero(lev[s] >= level)[0]
        lo, hi = sorted((val[s, max(j - 1, 0)], val[s, j]))
        assert lo - 1e-12 <= got[s] <= hi + 1e-12


def test_budget_steps_and_errors():
    assert budget_steps(16 * 8 * 20, 16, 8) == 20
    assert budget_steps(16 * 8 * 20 + 60, 16, 8) == 20
    assert budget_steps(0.0, 16, 8) == 1
    with pytest.raises(ValueError, match="total_rollouts"):
        budget_steps(float("nan"), 16, 8)
    with pytest.raises(ValueError, match="num_prompts"):
        budget_steps(10.0, 0, 8)
    with pytest.raises(ValueError, match="window"):
        smooth(np.zeros((1, 3)), 0)


def test_small_arms():
    from simulations import dars as D
    base = D.small_base(True)
    assert base.scale_rewards == "none" and base.num_generations == 8
    et = D.small_arm(base, "DARS-ET")
    assert et.rollout == "dars" and dict(et.rollout_options) == {"schedule": "et", "n_max": 32}
    assert D.small_arm(base, "GRPO N=32").num_generations == 32
    b = D.small_arm(base, "GRPO N=8 +B")
    assert b.num_prompts == D.BREADTH * base.num_prompts and b.num_minibatches == 1
    assert D.small_arm(base, "GRPO N=8", steps=40).steps == 40
