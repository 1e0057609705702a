"""DARS small-model helpers: budget matching, smoothing, equal-progress reading (float64
loops as references, hypothesis properties), the arm configs, and the per-seed numbers behind
the dars_small claims (each DARS arm read against GRPO at its own rollouts)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.dars import small_study as SS
from rlvr_lab.papers.dars.small import budget_steps, smooth, value_at_level
from simulations import dars as D


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
    base = D.small_base(True)
    assert base.scale_rewards == "none" and base.num_generations == 8
    et = D.small_arm(base, "DARS-ET")
    assert et.rollout == "dars" and dict(et.rollout_options) == {"schedule": "et", "n_max": 32}
    assert D.small_arm(base, "GRPO N=32").num_generations == 32
    b = D.small_arm(base, "GRPO N=8 +B")
    assert b.num_prompts == D.BREADTH * base.num_prompts and b.num_minibatches == 1
    assert D.small_arm(base, "GRPO N=8", steps=40).steps == 40
    # +B is evaluated at its equal-rollouts step (steps // BREADTH) and at the end
    assert (base.steps // D.BREADTH) % b.eval_every == 0 and base.steps % b.eval_every == 0


# --------------------------------------------------------------------------- the study's numbers


def _fake_run(evals: dict, steps: int, seeds: int, rollouts=None, offset=0.0):
    """A Run-like object: ``evals`` maps step -> pass@k ``[seeds, K]``."""
    at = sorted(evals)
    hist = {"pass1": np.linspace(0.1, 0.8, steps)[:, None] + np.zeros((1, seeds)) + offset,
            "entropy": np.linspace(1.0, 0.2, steps)[:, None] + np.zeros((1, seeds)) + offset}
    if rollouts is not None:
        hist["rollouts"] = np.full((steps, seeds), float(rollouts))
    return SimpleNamespace(history=hist, evals={"step": np.asarray(at),
                                                "pass_at": np.stack([evals[t] for t in at])})


def test_small_numbers_pairs_each_dars_arm_at_its_own_budget():
    base = SimpleNamespace(steps=8, eval_every=4, num_prompts=2, num_generations=8)
    seeds, k = 2, 3
    pa = lambda v: np.full((seeds, k), float(v))  # noqa: E731
    # GRPO N=8 evaluated at 0, 4, 8 (S), 11 (ET's budget), 14 (HW's budget), 16 (its end)
    g8 = _fake_run({0: pa(0.1), 4: pa(0.2), 8: pa(0.3), 11: pa(0.35), 14: pa(0.4),
                    16: pa(0.45)}, 16, seeds)
    runs = {"GRPO N=8": g8,
            "DARS-ET": _fake_run({0: pa(0.1), 4: pa(0.3), 8: pa(0.5)}, 8, seeds, rollouts=22.0),
            "DARS-HW": _fake_run({0: pa(0.1), 4: pa(0.3), 8: pa(0.6)}, 8, seeds, rollouts=28.0),
            "GRPO N=32": _fake_run({0: pa(0.1), 4: pa(0.25), 8: pa(0.28)}, 8, seeds),
            "GRPO N=8 +B": _fake_run({0: pa(0.1), 2: pa(0.32), 4: pa(0.4), 6: pa(0.4),
                                      8: pa(0.5)}, 8, seeds, offset=0.05)}
    configs = {n: SimpleNamespace(num_prompts=2, num_generations=8) for n in runs}
    info = {"steps DARS-ET": 11, "steps DARS-HW": 14}
    out = SS.small_numbers(runs, configs, info, base)
    assert set(out) == set(D.SMALL_ARMS) == {c.id for c in D.SMALL_CLAIMS}
    np.testing.assert_allclose(out["small_grpo_raises_pass1"], 0.2)
    np.testing.assert_allclose(out["small_dars_passk_equal_budget"], 0.5 - 0.35)
    np.testing.assert_allclose(out["small_dars_passk_equal_steps"], 0.5 - 0.3)
    np.testing.assert_allclose(out["small_dars_hw_passk_equal_budget"], 0.6 - 0.4)   # not 0.35
    np.testing.assert_allclose(out["small_naive_n32_speeds_early"], 0.25 - 0.2)
    np.testing.assert_allclose(out["small_naive_n32_early_not_final"], 0.28 - 0.3)
    np.testing.assert_allclose(out["small_dars_no_extra_cost_at_convergence"], 22 / 16)
    np.testing.assert_allclose(out["small_breadth_raises_pass1_equal_rollouts"], 0.32 - 0.3)
    # +B's curves are GRPO's shifted up by 0.05: it reaches each level earlier, where the
    # (falling) entropy is higher
    assert np.all(out["small_breadth_entropy_higher_equal_pass1"] > 0)
    # only the arms that ran give numbers (a later base may run fewer arms)
    partial = SS.small_numbers({"GRPO N=8": g8}, configs, {}, base)
    assert set(partial) == {"small_grpo_raises_pass1"}


def test_small_plan_and_arms_of_claims():
    assert D.SMALL_PLAN.bases >= 3 and D.SMALL_PLAN.max_seeds <= 8
    assert set(D.SMALL_ARMS) == {c.id for c in D.SMALL_CLAIMS}
    assert all(set(a) <= set(SS.ARMS) for a in D.SMALL_ARMS.values())
    controls = [c.id for c in D.SMALL_CLAIMS if c.control]
    assert controls == ["small_grpo_raises_pass1"]
    # the "does not raise" margin is below the paper's smallest DARS gain (+1.6 pp Pass@128)
    assert 0 < D.NOT_FINAL_MARGIN < (81.2 - 79.6) / 100
