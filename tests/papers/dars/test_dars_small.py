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
from rlvr_lab.papers.dars.small import budget_steps, interaction, smooth, value_at_level
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
    # the depth x breadth cell: DARS-HW's stage with breadth, one full-batch update, at most
    # S steps (it stops at DARS-HW's rollouts)
    db = D.small_arm(base, D.DARS_B)
    assert db.rollout == "dars" and dict(db.rollout_options) == {"schedule": "hw", "n_max": 64}
    assert db.num_prompts == D.BREADTH * base.num_prompts and db.num_minibatches == 1
    assert db.steps == base.steps


def test_stop_at_budget_picks_the_closest_step():
    # plain loop: the step count whose cumulative spend is closest to the budget (ties: stop)
    for spend in ([10, 10, 10, 10, 10], [5, 12, 20, 7, 9], [30, 1, 1]):
        for budget in (1, 14, 15, 16, 25, 31, 44):
            got = next((t + 1 for t in range(len(spend))
                        if SS.stop_at_budget(sum(spend[:t + 1]), spend[t], budget)),
                       len(spend))
            # with a constant spend per step the rule is exactly "closest total"
            if len(set(spend)) == 1:
                totals = np.cumsum(spend)
                dist = np.abs(totals - budget)
                want = int(np.flatnonzero(dist == dist.min())[0]) + 1
                assert got == want, (spend, budget, got, want)
            assert got >= 1


class _FakeTrainer:
    """Steps that spend ``spend[t]`` rollouts per seed; evaluate returns the step."""

    def __init__(self, spend, steps, seeds=2):
        self.spend, self.seeds = spend, seeds
        self.config = SimpleNamespace(steps=steps, num_prompts=2, num_generations=8)

    def init_state(self, num_seeds):
        return 0

    def train_step(self, key, state, t):
        return state + 1, {"rollouts": np.full(self.seeds, float(self.spend[t])),
                           "pass1": np.zeros(self.seeds)}

    def evaluate(self, key, state, t):
        return np.full((self.seeds, 3), float(state))


def test_run_to_budget_stops_at_the_matching_step():
    tr = _FakeTrainer([100.0] * 8, steps=8)
    run = SS.run_to_budget(tr, None, 2, budget=340.0)     # 300 is closer than 400
    assert run.steps_done == 3 and list(run.evals["step"]) == [0, 3]
    assert run.history["rollouts"].shape == (3, 2)
    np.testing.assert_allclose(run.evals["pass_at"][-1], 3.0)   # evaluated after step 3
    assert SS.run_to_budget(tr, None, 2, budget=360.0).steps_done == 4
    # never beyond config.steps
    assert SS.run_to_budget(tr, None, 2, budget=1e9).steps_done == 8
    # the matched totals lie within half a step of the budget
    for budget in (120.0, 260.0, 555.0):
        spent = SS.small_rollouts(SS.run_to_budget(tr, None, 2, budget), None).sum(0)
        assert np.all(np.abs(spent - budget) <= 50.0)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 9))
def test_interaction_matches_a_plain_loop(seed, n):
    rng = np.random.default_rng(seed)
    cells = rng.uniform(0, 1, (4, n))
    ref = np.array([(cells[0, i] - cells[1, i]) - (cells[2, i] - cells[3, i])
                    for i in range(n)])
    np.testing.assert_allclose(interaction(*cells), ref, rtol=0, atol=1e-15)
    # additive cells (grpo + depth + breadth) have no interaction; a shared shift cancels
    g, d, b = rng.uniform(0, 0.3, (3, n))
    np.testing.assert_allclose(interaction(g + d + b, g + b, g + d, g), 0, atol=1e-15)
    np.testing.assert_allclose(interaction(*(cells + 0.25)), ref, atol=1e-12)
    with pytest.raises(ValueError, match="one shape"):
        interaction(cells[0], cells[1][None], cells[2], cells[3])


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
            # +B evaluated at S/4 = 2 (equal rollouts with GRPO at S) and at 3 (DARS-HW +B's
            # budget in +B steps)
            "GRPO N=8 +B": _fake_run({0: pa(0.1), 2: pa(0.32), 3: pa(0.36), 4: pa(0.4),
                                      6: pa(0.4), 8: pa(0.5)}, 8, seeds, offset=0.05),
            # DARS-HW +B stopped after 2 steps (its rollouts ~ DARS-HW's), read at its end
            D.DARS_B: _fake_run({0: pa(0.1), 2: pa(0.52)}, 2, seeds, rollouts=4 * 26.0)}
    configs = {n: SimpleNamespace(num_prompts=2, num_generations=8) for n in runs}
    info = {"steps DARS-ET": 11, "steps DARS-HW": 14, f"steps {D.DARS_B}": 3}
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
    # each DARS cell minus its GRPO cell at the DARS cell's own budget: (0.52 - 0.36) with
    # breadth, (0.6 - 0.4) without
    np.testing.assert_allclose(out["dars_breadth_depth_orthogonal"],
                               (0.52 - 0.36) - (0.6 - 0.4))
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
    # the 2x2's margin: half of DARS-HW's Pass@128 gain (82.1 - 79.6), smaller than the gain;
    # the fail side is the whole gain
    orth = {c.id: c for c in D.SMALL_CLAIMS}["dars_breadth_depth_orthogonal"]
    assert orth.rule == "equivalence" and orth.level == 0.90
    assert orth.threshold == 0.0125 < (82.1 - 79.6) / 100 and orth.fail_threshold == 0.025
    assert set(D.SMALL_ARMS["dars_breadth_depth_orthogonal"]) == {"DARS-HW", D.DARS_B,
                                                                  "GRPO N=8 +B"}
    # DARS-HW +B runs before GRPO N=8 +B, which is read at its budget
    assert SS.ARMS.index(D.DARS_B) < SS.ARMS.index("GRPO N=8 +B")
