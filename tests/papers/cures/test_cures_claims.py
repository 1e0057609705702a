"""CurES / E3 experiments: the declared claims, and the per-seed numbers they are decided from
(on hand-built driver results and study curves whose answers are known)."""
from __future__ import annotations

import ast
import math
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

from rlvr_lab import claims, experiments
from rlvr_lab.papers.cures import small, study
from simulations import cures, e3

ROOT = Path(__file__).resolve().parents[3]
EXPERIMENTS = {"cures_theory": cures.THEORY_CLAIMS, "cures_study": cures.STUDY_CLAIMS,
               "cures_small": cures.SMALL_CLAIMS, "e3_temperature": e3.TEMPERATURE_CLAIMS,
               "e3_small": e3.SMALL_CLAIMS}


# ----------------------------------------------------------------------------- declarations
@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiments_declare_their_claims_for_the_engine(name):
    exp = experiments.get(name)
    assert [d.id for d in exp.declared] == [d.id for d in EXPERIMENTS[name]]
    assert exp.claims == tuple(d.id for d in EXPERIMENTS[name])
    small_model = exp.setting == "small model"
    controls = [d.id for d in exp.declared if d.control]
    assert controls == ([f"{name}_grpo_beats_base"] if small_model else [])
    assert (exp.plan is not None) == small_model
    if small_model:
        assert exp.plan.bases >= 3 and exp.plan_for(True).bases >= 2
    for d in exp.declared:
        assert d.estimand and d.unit and d.paper_ref, d.id


def test_existing_claim_ids_are_kept():
    ids = {d.id for specs in EXPERIMENTS.values() for d in specs}
    assert {"allocation_lowers_gradient_variance", "sampling_sets_convergence_rate",
            "cures_fewer_rollouts_to_target", "cures_small_final_accuracy",
            "cures_small_rollouts_to_target", "cures_small_posterior_finds_informative",
            "e3_entropy_within_band", "fixed_temperature_entropy_collapses",
            "e3_small_pass1_vs_grpo", "e3_small_passk_vs_base", "e3_small_passk_vs_grpo",
            "e3_small_length_penalty", "raising_nmax_fewer_all_incorrect"} <= ids


def test_final_accuracy_margin_is_below_the_papers_gain():
    spec = {d.id: d for d in cures.SMALL_CLAIMS}["cures_small_final_accuracy"]
    # the paper: +3.30 points (1.5B); the fail side must not reach the claimed effect
    assert spec.rule == "superiority" and spec.direction == ">"
    assert 0 < spec.fail_threshold <= spec.threshold < 0.033
    # a gain surely above the margin passes, one surely below it fails
    assert claims.decide(spec, claims.seeds([0.03, 0.031, 0.029, 0.03])).verdict == "pass"
    assert claims.decide(spec, claims.seeds([0.0, 0.001, -0.001, 0.0])).verdict == "fail"


def test_entropy_band_says_it_holds_by_construction():
    spec = {d.id: d for d in e3.TEMPERATURE_CLAIMS}["e3_entropy_within_band"]
    assert "by construction" in spec.note


def test_cures_stage_does_not_import_e3():
    tree = ast.parse((ROOT / "rlvr_lab/papers/cures/stage.py").read_text())
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if "papers.e3" in n]


# ----------------------------------------------------------------------------- small model
def _block(frac, a=2, s=2, m=10, n=4):
    """Correctness ``[a, s, m, n]`` whose mean is ``frac[arm]`` exactly for every seed."""
    out = np.zeros((a, s, m * n), bool)
    for i in range(a):
        out[i, :, :round(frac[i] * m * n)] = True
    return out.reshape(a, s, m, n)


def _result(base, path, final, zero, *, s=2, steps=12):
    """A driver result: base / eval path (E x [arm fractions]) / final pass@1, zero-adv."""
    correct = np.stack([_block(p, s=s) for p in path])
    base_c, final_c = _block(base, s=s), _block(final, s=s)
    history = {"pass1": np.zeros((steps, 2, s)),
               "zero_adv_frac": np.broadcast_to(np.asarray(zero)[None, :, None],
                                                (steps, 2, s)).copy()}
    return small.Result(state=None, arms=[small.Arm()] * 2, history=history,
                        eval_steps=np.linspace(0, steps, len(path)).astype(int),
                        correct=correct, length=np.full(correct.shape, 5),
                        base=(base_c, np.full(base_c.shape, 5)),
                        final=(final_c, np.full(final_c.shape, 5)), steps=steps, seconds=1.0)


def test_cures_seed_numbers_on_a_known_result():
    res = _result(base=(0.5, 0.5), path=[(0.5, 0.5), (0.5, 0.7), (0.6, 0.8)],
                  final=(0.7, 0.8), zero=(0.5, 0.3))
    got = cures.cures_seed_numbers(res, budget=128)
    np.testing.assert_allclose(got["cures_small_grpo_beats_base"], [0.2, 0.2])
    np.testing.assert_allclose(got["cures_small_final_accuracy"], [0.1, 0.1])
    # target 0.6: GRPO halfway between steps 6 and 12 (1152 rollouts), CurES halfway to 6
    np.testing.assert_allclose(got["target"], [0.6, 0.6])
    np.testing.assert_allclose(got["cures_small_rollouts_to_target"], [1152 - 384] * 2)
    np.testing.assert_allclose(got["cures_small_posterior_finds_informative"], [-0.2, -0.2])
    # a CurES arm that never reaches the target counts as the whole run (12 x 128)
    slow = _result(base=(0.5, 0.5), path=[(0.5, 0.5), (0.5, 0.5), (0.7, 0.55)],
                   final=(0.7, 0.55), zero=(0.5, 0.5))
    got = cures.cures_seed_numbers(slow, budget=128)
    np.testing.assert_allclose(got["cures_small_rollouts_to_target"], [1152 - 12 * 128] * 2)


def test_e3_seed_numbers_on_a_known_result():
    res = _result(base=(0.5, 0.5), path=[(0.5, 0.5), (0.6, 0.7)], final=(0.6, 0.7),
                  zero=(0.4, 0.4))
    res = res._replace(final=(res.final[0], np.where(np.arange(2)[:, None, None, None] == 1,
                                                    4, 5) * np.ones_like(res.final[1])))
    got, sweep = e3.e3_seed_numbers(res, jax.random.key(0), draws=4)
    np.testing.assert_allclose(got["e3_small_grpo_beats_base"], [0.1, 0.1], rtol=1e-5)
    np.testing.assert_allclose(got["e3_small_pass1_vs_grpo"], [0.1, 0.1], rtol=1e-5)
    np.testing.assert_allclose(got["e3_small_length_penalty"], [4 / 5 - 1] * 2, rtol=1e-5)
    # pass@4 (all samples of a problem): problems 0-4 solved (base), 0-5 (GRPO), 0-6 (E3)
    np.testing.assert_allclose(got["e3_small_passk_vs_base"], [0.2, 0.2], rtol=1e-5)
    np.testing.assert_allclose(got["e3_small_passk_vs_grpo"], [0.1, 0.1], rtol=1e-5)
    assert got["raising_nmax_fewer_all_incorrect"].shape == (1,)
    binding = sweep[sweep.binds]
    expect = binding.reduction_points.max() if len(binding) else math.nan
    np.testing.assert_equal(got["raising_nmax_fewer_all_incorrect"][0], expect)


def test_concat_results_and_frames():
    a = _result(base=(0.5, 0.5), path=[(0.5, 0.5), (0.6, 0.7)], final=(0.6, 0.7),
                zero=(0.4, 0.3), s=2)
    b = _result(base=(0.25, 0.25), path=[(0.25, 0.25), (0.5, 0.5)], final=(0.5, 0.5),
                zero=(0.2, 0.1), s=3)
    both = small.concat_results([a, b])
    assert both.pass1().shape == (2, 2, 5) and both.base[0].shape[1] == 5
    np.testing.assert_allclose(both.pass1()[-1, 1], [0.7, 0.7, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(both.history["zero_adv_frac"][0, 0], [0.4, 0.4, 0.2, 0.2, 0.2])
    hist, ev = small.frames(both, ["GRPO", "CurES"])
    assert len(ev) == 2 * 5 * 2 and set(ev.arm) == {"GRPO", "CurES"}
    assert len(hist) == 2 * 5 * 12
    with pytest.raises(ValueError, match="at least one"):
        small.concat_results([])


# ----------------------------------------------------------------------------- bank study
def _curves(acc_by_arm):
    rows = []
    for arm, seeds in acc_by_arm.items():
        for s, acc in enumerate(seeds):
            rows.append(pd.DataFrame({"arm": arm, "seed": s, "step": np.arange(len(acc)),
                                      "rollouts": 100.0 * np.arange(len(acc)),
                                      "accuracy": acc}))
    return pd.concat(rows, ignore_index=True)


def test_seed_reach_and_log_speedup():
    curves = _curves({"uniform GRPO": [[0.2, 0.4, 0.6], [0.2, 0.3, 0.5]],
                      "CurES both": [[0.2, 0.6, 0.7], [0.2, 0.25, 0.3]]})
    reach = study.seed_reach(curves, 0.5)
    np.testing.assert_allclose(reach["uniform GRPO"], [150.0, 200.0])
    assert reach["CurES both"][0] == pytest.approx(75.0) and np.isnan(reach["CurES both"][1])
    summary = pd.DataFrame({"target": [0.5]})
    got = cures.log_speedup(curves, summary, budget=400.0)
    np.testing.assert_allclose(got, [math.log(150 / 75), math.log(200 / 400)])
