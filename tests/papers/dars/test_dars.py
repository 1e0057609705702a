"""DARS: cumulative advantage closed forms, ET/HW schedules, multi-stage rollout stage, and the
per-seed numbers behind the dars_theory / dars_study claims."""
from __future__ import annotations

import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rlvr_lab import allocation, theory
from rlvr_lab.papers.dars import study as S
from rlvr_lab.papers.dars.theory import expected_cumulative_advantage_dars
from simulations import dars as D

# --------------------------------------------------------------------------- references


def _ref_extra(k: int, n: int, n_max: int, schedule: str, scale: str) -> int:
    """Independent reference: the paper's formula in exact rational arithmetic.

    With std scaling S(a) = 2 sqrt(a(1-a)) is irrational, so the ceiling is found as the
    smallest integer m with m >= x, tested by squaring both (positive) sides exactly.
    """
    a = Fraction(k, n) if k else Fraction(1, 2 * n)
    if a >= Fraction(1, 2):
        return 0
    v = a * (1 - a)
    if scale == "none":
        s = 2 * v
        peak = n * Fraction(1, 2)
        target = peak if schedule == "et" else 2 * (1 - a) * peak
        m = math.ceil((target - n * s) / s)
    else:
        # S = 2 sqrt(v), A_peak = n; x = target / S - n with target = n (et) or 2(1-a)n (hw):
        # m >= x  <=>  (m + n)^2 * 4 v >= target^2
        target = n if schedule == "et" else 2 * (1 - a) * n
        m = 0
        while (m + n) ** 2 * 4 * v < target ** 2:
            m += 1
    return max(0, min(m, n_max - n))


PAPER_TABLE = {  # docs/papers.md, N = 8, no std: acc -> (ET, HW)
    0: (24, 56), 1: (11, 24), 2: (3, 8), 3: (1, 3), 4: (0, 0)}


# --------------------------------------------------------------------------- schedules


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_paper_table_exact(dtype):
    with jax.enable_x64(dtype == jnp.float64):
        acc = jnp.asarray([k / 8 for k in PAPER_TABLE], dtype)
        et = allocation.dars_extra_rollouts(acc, 8, 32, schedule="et")
        hw = jax.jit(lambda a: allocation.dars_extra_rollouts(a, 8, 64, schedule="hw"))(acc)
        assert et.dtype == jnp.int32
        assert et.tolist() == [v[0] for v in PAPER_TABLE.values()]
        assert hw.tolist() == [v[1] for v in PAPER_TABLE.values()]


@pytest.mark.parametrize("scale", ["none", "std"])
@pytest.mark.parametrize("schedule", ["et", "hw"])
def test_schedule_matches_rational_reference(schedule, scale):
    for n in range(1, 25):
        for n_max in (n, n + 3, 4 * n, 8 * n + 5):
            # padded to one shape so the eager ops compile once
            acc = np.concatenate([np.arange(n + 1) / n, np.ones(24 - n)])
            got = np.asarray(allocation.dars_extra_rollouts(acc, n, n_max, schedule=schedule,
                                                            scale=scale))
            want = [_ref_extra(k, n, n_max, schedule, scale) for k in range(n + 1)]
            assert got[:n + 1].tolist() == want, (n, n_max)


def test_extra_rollouts_never_reach_easy_prompts():
    acc = jnp.linspace(0.5, 1.0, 101)
    for schedule in ("et", "hw"):
        for scale in ("none", "std"):
            extra = allocation.dars_extra_rollouts(acc, 8, 64, schedule=schedule, scale=scale)
            assert int(jnp.max(extra)) == 0


@given(st.integers(1, 32), st.integers(0, 64), st.sampled_from(["none", "std"]),
       st.lists(st.floats(0, 1), min_size=1, max_size=20))
@settings(max_examples=60, deadline=None)
def test_schedule_properties(n, slack, scale, accs):
    n_max = n + slack
    acc = np.sort(np.asarray(accs + [1.0] * (20 - len(accs))))   # one shape: one compile
    et = np.asarray(allocation.dars_extra_rollouts(acc, n, n_max, schedule="et", scale=scale))
    hw = np.asarray(allocation.dars_extra_rollouts(acc, n, n_max, schedule="hw", scale=scale))
    for extra in (et, hw):
        assert np.all((extra >= 0) & (extra <= n_max - n))
        assert np.all(extra[acc >= 0.5] == 0)
        assert np.all(np.diff(extra) <= 0)          # harder prompts never get fewer
    assert np.all(hw >= et)                          # 2(1-a) >= 1 for a <= 0.5


def test_schedule_bad_values():
    with pytest.raises(ValueError, match="schedule='xx'"):
        allocation.dars_extra_rollouts(0.1, 8, 32, schedule="xx")
    with pytest.raises(ValueError, match="scale='batch'"):
        allocation.dars_extra_rollouts(0.1, 8, 32, scale="batch")
    with pytest.raises(ValueError, match="n_max=4"):
        allocation.dars_extra_rollouts(0.1, 8, 4)
    with pytest.raises(ValueError, match="n=0"):
        allocation.dars_extra_rollouts(0.1, 0, 4)
    with pytest.raises(ValueError, match="acc=1.5"):
        allocation.dars_extra_rollouts([0.1, 1.5], 8, 32)


def test_schedule_traced_degenerate_inputs_finite():
    f = jax.jit(lambda a: allocation.dars_extra_rollouts(a, 8, 32, schedule="hw"))
    out = f(jnp.asarray([jnp.nan, -0.5, 2.0, 1e-30, 0.0]))
    assert out.tolist() == [0, 24, 0, 24, 24]   # NaN, clipped to 0, clipped to 1, tiny, 0


# --------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("scale", ["none", "std"])
def test_cumulative_advantage_matches_explicit_groups(scale):
    for n in (1, 2, 5, 8, 16):
        for c in range(n + 1):
            r = np.array([1.0] * c + [0.0] * (n - c))
            adv = r - r.mean()
            if scale == "std":
                sd = r.std()                          # population std (ddof=0)
                adv = adv / sd if sd > 0 else np.zeros_like(adv)
            got = float(theory.cumulative_advantage(c / n, n, scale=scale))
            assert got == pytest.approx(np.abs(adv).sum(), abs=1e-5)


@pytest.mark.parametrize("scale", ["none", "std"])
def test_expected_cumulative_advantage_vs_binomial_sum(scale):
    with jax.enable_x64():
        p = np.array([0.0, 1e-3, 0.05, 0.2, 0.5, 0.77, 0.999, 1.0])
        for n in (1, 2, 3, 8, 32):
            want = np.zeros_like(p)
            for i, pi in enumerate(p):
                for c in range(n + 1):
                    acc = c / n
                    s = acc * (1 - acc) if scale == "none" else math.sqrt(acc * (1 - acc))
                    want[i] += stats.binom.pmf(c, n, pi) * 2 * n * s
            got = np.asarray(theory.expected_cumulative_advantage(p, n, scale=scale))
            assert got.dtype == np.float64
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def test_expected_vs_plugin_gap():
    p = np.linspace(0.01, 0.99, 50)
    for n in (2, 8, 32):
        plug = np.asarray(theory.cumulative_advantage(p, n))
        exp = np.asarray(theory.expected_cumulative_advantage(p, n))
        np.testing.assert_allclose(exp / plug, (n - 1) / n, rtol=1e-5)
        plug_s = np.asarray(theory.cumulative_advantage(p, n, scale="std"))
        exp_s = np.asarray(theory.expected_cumulative_advantage(p, n, scale="std"))
        assert np.all(exp_s < plug_s)                                 # Jensen + empty groups


@given(st.integers(0, 10**6), st.integers(1, 64), st.sampled_from(["none", "std"]))
@settings(max_examples=80, deadline=None)
def test_cumulative_advantage_shape(a_millionths, n, scale):
    a = a_millionths / 10**6          # 1 - a must be representable for the symmetry check
    f = lambda x: float(theory.cumulative_advantage(np.float64(x), n, scale=scale))  # noqa: E731
    with jax.enable_x64():        # float32 cannot tell 1 - 1e-8 from 1
        peak = f(0.5)
        assert 0 <= f(a) <= peak * (1 + 1e-12)
        assert f(a) == pytest.approx(f(1 - a), rel=1e-6, abs=1e-12)
        assert f(0.0) == 0 and f(1.0) == 0


def test_expected_dars_vs_loop_reference():
    with jax.enable_x64():
        n, n_max = 4, 16
        p = np.array([0.0, 0.05, 0.3, 0.6, 1.0])
        for schedule in (None, "et", "hw"):
            got, spent = expected_cumulative_advantage_dars(p, n, n_max, schedule=schedule)
            want, want_spent = np.zeros_like(p), np.zeros_like(p)
            for i, pi in enumerate(p):
                for c1 in range(n + 1):
                    d = 0 if schedule is None else _ref_extra(c1, n, n_max, schedule, "none")
                    w1 = stats.binom.pmf(c1, n, pi)
                    want_spent[i] += w1 * (n + d)
                    for c2 in range(d + 1):
                        acc = (c1 + c2) / (n + d)
                        want[i] += w1 * stats.binom.pmf(c2, d, pi) * 2 * (n + d) * acc * (1 - acc)
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(np.asarray(spent), want_spent, rtol=1e-12)


def test_closed_form_bad_values():
    with pytest.raises(ValueError, match="scale='mad'"):
        theory.cumulative_advantage(0.3, 8, scale="mad")
    with pytest.raises(ValueError, match="p=-0.1"):
        theory.expected_cumulative_advantage(-0.1, 8)
    with pytest.raises(ValueError, match="n=0"):
        theory.expected_cumulative_advantage(0.3, 0)


# --------------------------------------------------------------------------- rollout stage
from rlvr_lab.envs import prompt_bank  # noqa: E402
from rlvr_lab.train import bandit  # noqa: E402
from rlvr_lab.papers.dars import stage as dars_stage  # noqa: E402


def _small_bank():
    cfg = prompt_bank.PromptBankConfig(num_prompts=24, vocab_size=6, difficulty_a=0.5,
                                       difficulty_b=1.0, seed=3)
    return cfg, prompt_bank.make_bank(cfg)


@pytest.mark.parametrize("schedule,n_max", [("et", 32), ("hw", 64), ("et", 8)])
def test_dars_rollout_masks_and_budget(schedule, n_max):
    _, bank = _small_bank()
    n, prompts = 8, jnp.arange(24)
    f = jax.jit(lambda k: dars_stage.bank_dars_rollout(k, bank.logits0, bank, prompts, n, n_max,
                                                  schedule=schedule))
    for seed in range(3):
        out, info = f(jax.random.key(seed))
        answers, mask = np.asarray(out.answers), np.asarray(out.mask)
        correct = np.asarray(bank.correct)[np.arange(24)[:, None], answers]
        extra, kept = np.asarray(info.extra), np.asarray(info.kept)
        acc1s, merged, mask2 = (np.asarray(x) for x in (info.stage1_acc, info.merged_acc,
                                                         info.stage2_mask))
        assert answers.shape == (24, n_max)
        for b in range(24):                      # plain loop reference
            acc1 = correct[b, :n].mean()
            assert acc1s[b] == pytest.approx(acc1)
            assert extra[b] == _ref_extra(int(round(acc1 * n)), n, n_max, schedule, "none")
            if acc1 >= 0.5:
                assert extra[b] == 0 and not mask2[b].any()
            total_correct = correct[b, :n].sum() + correct[b, n:n + extra[b]].sum()
            assert merged[b] == pytest.approx(total_correct / (n + extra[b]))
            assert kept[b] == (0 < total_correct < n + extra[b])
            want = np.zeros(n_max, bool)
            want[:n + extra[b]] = kept[b]
            np.testing.assert_array_equal(mask[b], want)
        assert int(out.spent) == 24 * n + extra.sum()
        np.testing.assert_array_equal(np.asarray(out.rewards),
                                      np.asarray(bank.reward_table)[np.arange(24)[:, None],
                                                                    answers])


def test_dars_stage_in_trainer_budget():
    bank_cfg, _ = _small_bank()
    cfg = bandit.BanditConfig(bank=bank_cfg, steps=4, num_prompts=8, num_generations=8,
                              rollout="dars", rollout_options=(("schedule", "hw"),
                                                               ("n_max", 64)),
                              scale_rewards="none", num_minibatches=2, eval_ks=(1,))
    state, m = jax.jit(bandit.make_train(cfg))(jax.random.key(0))
    spent = np.asarray(m["rollouts"])
    assert np.all((spent >= 8 * 8) & (spent <= 8 * 64))
    totals = state.rollout_state
    assert float(totals.extra) == spent.sum() - 4 * 8 * 8
    assert float(totals.groups) == 4 * 8
    assert 0 <= float(totals.rescued) <= float(totals.groups)
    assert np.all(np.isfinite(np.asarray(m["loss"])))


def test_dars_stage_bad_options():
    with pytest.raises(ValueError, match="n_max=4"):
        dars_stage.check_options(8, n_max=4)
    with pytest.raises(ValueError, match="schedule='deep'"):
        dars_stage.check_options(8, schedule="deep")
    bank_cfg, _ = _small_bank()
    cfg = bandit.BanditConfig(bank=bank_cfg, steps=2, num_prompts=4, rollout="dars",
                              rollout_options=(("n_max", 4),))
    with pytest.raises(ValueError, match="n_max=4"):
        bandit.make_train(cfg)(jax.random.key(0))


# --------------------------------------------------------------------------- study numbers


def _peak_curves(n=8, num=41):
    """The plug-in and expected curves of S.theory_curves (the ones peak_errors reads)."""
    with jax.enable_x64():
        a = np.linspace(0.0, 1.0, num)
        frames = [pd.DataFrame({"curve": c, "scale": sc, "p": a, "sum_abs_adv": np.asarray(f(
            a, n, scale=sc))}) for sc in ("none", "std") for c, f in (
            ("plug-in", theory.cumulative_advantage),
            ("expected", theory.expected_cumulative_advantage))]
    return pd.concat(frames, ignore_index=True)


def test_peak_errors_zero_for_the_closed_forms_and_catch_a_shift():
    curves = _peak_curves()
    errors = S.peak_errors(curves)
    assert errors.shape == (16,) and np.max(np.abs(errors)) < 1e-12
    assert S.plugin_gap(curves) == pytest.approx(7 / 8, rel=1e-9)
    moved = curves.copy()
    sel = (moved.curve == "expected") & (moved.scale == "std")
    moved.loc[sel, "sum_abs_adv"] = moved.loc[sel, "sum_abs_adv"] + moved.loc[sel, "p"]
    assert np.max(np.abs(S.peak_errors(moved))) >= 0.025     # argmax off 0.5, value at 1 > 0


def _fake_result(seeds=3, steps=10):
    """curves/final frames as run_study returns them, with known per-seed values."""
    rows, fin = [], []
    level = {"GRPO N=8": 0.0, "GRPO N=32": 0.1, "DARS-ET": 0.2, "DARS-HW": 0.3,
             "DARS-HW +B": 0.5}
    for m, v in level.items():
        per_step = 8 * 16 * (1 + v)      # DARS spends more rollouts per step
        for s in range(seeds):
            for t in range(steps):
                for metric, val in (("pass@1", v + 0.01 * t + 0.001 * s),
                                    ("pass@128", v + 0.02 * t), ("entropy", 1 - 0.05 * t + v),
                                    ("rollouts", per_step), ("cum_rollouts", per_step * t)):
                    rows.append((m, s, t, metric, val))
            for metric, val in (("pass@1", v + 0.1 + 0.001 * s), ("pass@128", v + 0.2),
                                ("entropy", 0.5 + v), ("cum_rollouts", per_step * steps)):
                fin.append((m, s, metric, val))
    return {"curves": pd.DataFrame(rows, columns=["method", "seed", "step", "metric", "value"]),
            "final": pd.DataFrame(fin, columns=["method", "seed", "metric", "value"])}


def test_study_numbers_cover_every_declared_claim():
    s = S.StudySettings(num_steps=10, batch_size=16)
    out = S.study_numbers(_fake_result(), s)
    assert set(out) == {c.id for c in D.STUDY_CLAIMS}
    np.testing.assert_allclose(out["dars_raises_passk_hw"], 0.3)
    np.testing.assert_allclose(out["naive_n32_early_not_final"], 0.1)
    np.testing.assert_allclose(out["naive_n32_speeds_early"], 0.1)
    # +B minus mini-batch for the one pair present; "both" takes the smaller gain
    np.testing.assert_allclose(out["breadth_raises_pass1"], 0.2)
    np.testing.assert_allclose(out["dars_b_both"], 0.5)
    np.testing.assert_allclose(out["dars_no_extra_cost_at_convergence"], 1.3)  # the larger
    # at GRPO's budget DARS-HW has spent it earlier: its value is read before its last step
    assert np.all(out["dars_raises_passk_hw_equal_budget"] < 0.3)
