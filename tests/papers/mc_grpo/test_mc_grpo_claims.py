"""MC-GRPO claims: declarations, the per-seed numbers behind them, and the engine's verdicts."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from rlvr_lab import claims, experiments
from rlvr_lab.papers.mc_grpo import sign_flip as sf
from rlvr_lab.papers.mc_grpo import study
from rlvr_lab.papers.mc_grpo.closure import gap_closure
from simulations import mc_grpo as M

IDS = {
    "mc_grpo_sign_flip": {"flip_reduction_g2", "median_lowers_flips_every_g"},
    "mc_grpo_training": {"g2_matches_g8_within_1pct", "mc_grpo_improves_g2"},
    "mc_grpo_mad_pitfall": {"mad_binary_one_over_eps"},
    "mc_grpo_small": {"small_grpo_g8_raises_pass1", "small_mc_improves_g2",
                      "small_g2_matches_g8_within_1pct", "small_gap_closure",
                      "small_beats_compute_matched", "small_median_lowers_flips",
                      "mc_grpo_across_losses", "mc_grpo_across_losses_grpo",
                      "mc_grpo_across_losses_dapo", "mc_grpo_across_losses_gspo"},
    "mc_grpo_bank_authors": {"bank_mc_improves_g2", "bank_g2_matches_g8_within_1pct",
                             "bank_gap_closure", "bank_beats_compute_matched",
                             "bank_median_lowers_flips"},
}


def test_declared_ids_rules_and_margins():
    for name, ids in IDS.items():
        exp = experiments.get(name)
        assert {d.id for d in exp.declared} == ids
        assert all(d.paper == "MC-GRPO" and d.paper_ref for d in exp.declared)
    small = experiments.get("mc_grpo_small")
    assert [d.id for d in small.declared if d.control] == ["small_grpo_g8_raises_pass1"]
    assert small.plan.bases >= 3 and small.quick_plan.bases >= 2
    # the paper's "within 1%": margin 0.01, never widened
    for d in (d for e in IDS for d in experiments.get(e).declared if "within_1pct" in d.id):
        assert d.rule == "equivalence" and d.threshold == 0.01 and d.fail_threshold == 0.01


def _final(mc, g2, g8, drop):
    return {("MC-GRPO", 2): np.asarray(mc), ("GRPO", 2): np.asarray(g2),
            ("GRPO", 8): np.asarray(g8), ("GRPO G+1 drop min|r|", 2): np.asarray(drop)}


def test_seed_numbers_and_closure_identity():
    rng = np.random.default_rng(0)
    g2 = rng.uniform(0.3, 0.5, 12)
    g8 = g2 + rng.uniform(0.05, 0.15, 12)
    mc = g2 + rng.uniform(-0.05, 0.15, 12)
    drop = g2 + 0.01
    n = study.seed_numbers(_final(mc, g2, g8, drop))
    np.testing.assert_allclose(n["mc_improves_g2"], mc - g2)
    np.testing.assert_allclose(n["g2_matches_g8_within_1pct"], mc - g8)
    np.testing.assert_allclose(n["beats_compute_matched"], mc - drop)
    # mean of the closure difference > 0 exactly when the ratio of means exceeds 0.5
    ratio = gap_closure(mc, g2, g8).mean
    assert (n["gap_closure"].mean() > 0) == (ratio > study.CLOSURE_MIN)
    # arms that did not run: only the comparisons they allow
    part = study.seed_numbers({("MC-GRPO", 2): mc, ("GRPO G+1 drop min|r|", 2): drop})
    assert set(part) == {"beats_compute_matched"}


def test_engine_verdicts_three_ways():
    specs = experiments.get("mc_grpo_bank_authors").declared
    n = 16
    g2 = np.full(n, 0.5) + np.linspace(-0.01, 0.01, n)
    same = _final(g2 + 0.1, g2, g2 + 0.1, g2 + 0.1)   # MC(2) = GRPO(8), beats GRPO(2)
    samples = {f"bank_{k}": claims.seeds(v) for k, v in study.seed_numbers(same).items()}
    samples["bank_median_lowers_flips"] = claims.value(0.5)
    got = {d.spec.id: d.verdict for d in claims.decide_all(specs, samples)}
    assert got["bank_mc_improves_g2"] == "pass"
    assert got["bank_g2_matches_g8_within_1pct"] == "pass"
    assert got["bank_gap_closure"] == "pass"
    assert got["bank_beats_compute_matched"] == "inconclusive"   # a zero difference
    assert got["bank_median_lowers_flips"] == "pass"
    worse = _final(g2 - 0.1, g2, g2 + 0.1, g2)
    samples = {f"bank_{k}": claims.seeds(v) for k, v in study.seed_numbers(worse).items()}
    samples["bank_median_lowers_flips"] = claims.value(-0.2)
    got = {d.spec.id: d.verdict for d in claims.decide_all(specs, samples)}
    assert set(got.values()) == {"fail"}


def test_sign_flip_claims_from_the_exact_table():
    """The paper-like law: reduction 0.25 at G=2, the median helps at G in {2, 3} only, so
    the paper's 'every k in {2, 4, 8}' fails on it (at G=4: (0.066 - 0.078) / 0.066)."""
    law = sf.discrete_law("{0,1.5,2} paper-like", *study.PAPER_LAW)
    table = study.flip_table(jax.random.key(0), [law])
    w = M.paper_like_rows(table)
    assert (w.loc[2, "mean (G)"], w.loc[2, "median (G+1)"]) == pytest.approx((0.1, 0.075))
    better = [g for g in w.index if w.loc[g, "median (G+1)"] < w.loc[g, "mean (G)"]]
    assert better == [2, 3]
    # the reference: a plain loop over the exact flip rates
    ref = min((w.loc[g, "mean (G)"] - w.loc[g, "median (G+1)"]) / w.loc[g, "mean (G)"]
              for g in (2, 4, 8))
    worst = M.every_g_reduction(w)
    assert worst == pytest.approx(ref) and worst < 0
    specs = experiments.get("mc_grpo_sign_flip").declared
    got = claims.decide_all(specs, {"flip_reduction_g2": claims.value(0.25),
                                    "median_lowers_flips_every_g": claims.value(worst)})
    assert [d.verdict for d in got] == ["pass", "fail"]
    ok = claims.decide_all(specs, {"flip_reduction_g2": claims.value(0.25),
                                   "median_lowers_flips_every_g": claims.value(0.1)})
    assert [d.verdict for d in ok] == ["pass", "pass"]


def test_flip_reduction_and_mad_errors():
    laws = np.asarray([study.PAPER_LAW[1]])
    t = study.law_flip_table(laws, study.PAPER_LAW[0], (2,))
    assert study.flip_reduction(t) == pytest.approx(0.25)
    bank = study.binary_bank(num_prompts=16, vocab_size=6, difficulty_a=2.0, difficulty_b=2.0)
    err = study.mad_errors(jax.random.key(0), bank)
    assert err.size > 0 and np.abs(err).max() < 1e-4
    spec = experiments.get("mc_grpo_mad_pitfall").declared
    assert claims.decide_all(spec, {"mad_binary_one_over_eps": err})[0].verdict == "pass"
    assert claims.decide_all(spec, {"mad_binary_one_over_eps": np.append(err, -0.5)}
                             )[0].verdict == "fail"


def test_closure_table_pairs_the_common_seeds():
    """Arms run on more SFT bases (later looks) have more seeds: the table pairs the first."""
    rng = np.random.default_rng(1)
    g2, g8 = rng.uniform(0.3, 0.4, 8), rng.uniform(0.6, 0.7, 8)
    final = {("GRPO", 2): g2, ("GRPO", 8): g8, ("MC-GRPO", 2): g2 + 0.1,
             ("GRPO", 4): g2[:6] + 0.1, ("MC-GRPO", 4): g2[:6] + 0.2}
    t = study.closure_table(final, methods=("MC-GRPO",)).set_index("G")
    assert t.loc[2, "seeds"] == 8 and t.loc[4, "seeds"] == 6
    assert t.loc[4, "closure"] == pytest.approx(0.1 / np.mean(g8[:6] - g2[:6] - 0.1))
