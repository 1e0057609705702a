"""The declared claims of fp8, spec_rl and roll: a positive control each, the per-seed numbers
behind the claims, and the error vectors of the exact claims (decided by rlvr_lab.claims)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rlvr_lab import claims, experiments
from rlvr_lab.papers.fp8 import study as fp8_study
from simulations import fp8, roll, spec_rl


@pytest.mark.parametrize("name", ["fp8", "spec_rl", "roll"])
def test_each_study_declares_one_control_and_nested_plans(name):
    exp = experiments.get(name)
    controls = [d for d in exp.declared if d.control]
    assert len(controls) == 1
    assert exp.plan.bases >= 3 and exp.quick_plan.bases >= 2
    assert exp.plan.max_seeds <= 8   # about 2x the single-base cost (see the modules)


def test_spec_rl_speedup_is_not_applicable_and_rule_still_reported():
    spec = {d.id: d for d in spec_rl.CLAIMS}["rollout_speedup_e05"]
    d = claims.decide(spec, claims.seeds([0.7, 0.8, 0.75]))
    assert d.verdict == claims.NOT_APPLICABLE and "would give fail" in d.reason


def _summary():
    rows = []
    gen = {"vanilla": [100, 120], "l=1": [60, 70], "e^0.5": [40, 75], "inf": [30, 20]}
    q = {"vanilla": [0.7, 0.8], "l=1": [0.7, 0.7], "e^0.5": [0.75, 0.7], "inf": [0.3, 0.4]}
    for lab in gen:
        for s in range(2):
            rows.append(dict(lenience=lab, seed=s, generated=gen[lab][s],
                             heldout_pass1=q[lab][s], base_heldout_pass1=0.5,
                             token_reduction=gen["vanilla"][s] / gen[lab][s],
                             time_speedup=1.0))
    return pd.DataFrame(rows)


def test_spec_rl_seed_numbers():
    ids = frozenset(d.id for d in spec_rl.CLAIMS)
    n = spec_rl.seed_numbers(_summary(), ids)
    assert set(n) == ids
    np.testing.assert_allclose(n["vanilla_raises_pass1"], [0.2, 0.3])
    np.testing.assert_allclose(n["token_reduction_e05"], [2.5, 1.6])
    # seed 1: 70 -> 75 is an increase of 5 / 120 tokens
    np.testing.assert_allclose(n["tokens_monotone_in_lenience"], [-10 / 100, 5 / 120])
    np.testing.assert_allclose(n["quality_e05_not_worse"], [0.05, -0.1])
    np.testing.assert_allclose(n["full_reuse_degrades"], [-0.4, -0.4])
    np.testing.assert_allclose(n["quality_inverted_u"], [0.05, -0.1])
    assert set(spec_rl.seed_numbers(_summary(), {"full_reuse_degrades"})) == {
        "full_reuse_degrades"}


def test_fp8_seed_numbers_pair_each_arm_with_fp32():
    rows = []
    final = {"fp32": [0.8, 0.7], "e4m3": [0.75, 0.7], "e2m1": [0.6, 0.7], "e2m1+TIS": [0.8, 0.6],
             "e2m1+MIS": [0.7, 0.7]}
    for t, vals in final.items():
        for s, v in enumerate(vals):
            rows += [dict(treatment=t, seed=s, step=0, metric="heldout_pass1", value=0.5),
                     dict(treatment=t, seed=s, step=10, metric="heldout_pass1", value=v)]
    n = fp8_study.seed_numbers(pd.DataFrame(rows))
    np.testing.assert_allclose(n["gain"], [0.3, 0.2])
    np.testing.assert_allclose(n["gap_e4m3"], [0.05, 0.0])
    np.testing.assert_allclose(n["gap_e2m1"], [0.2, 0.0])
    np.testing.assert_allclose(n["tis_minus_fp32"], [0.0, -0.1])
    np.testing.assert_allclose(n["mis_minus_fp32"], [-0.1, 0.0])
    assert {v[0] for v in fp8.TRAINING.values()} <= set(n)


def _mapping(token_diffs=0, metric=0.0, rel=0.0):
    m = dict(token_diffs=token_diffs, max_metric_diff=metric, param_rel_diff=rel)
    return {"mappings": {"colocated 4": dict(token_diffs=0, max_metric_diff=0.0,
                                             param_rel_diff=0.0), "2+2": m}}


@pytest.mark.parametrize("kwargs, verdict", [
    (dict(), "pass"),
    (dict(metric=0.5 * roll.METRIC_TOL, rel=0.5 * roll.PARAM_REL_TOL), "pass"),
    (dict(token_diffs=1), "fail"),
    (dict(metric=2 * roll.METRIC_TOL), "fail"),
    (dict(rel=1.5 * roll.PARAM_REL_TOL), "fail"),
])
def test_roll_mapping_errors_decide_in_units_of_tolerance(kwargs, verdict):
    spec = {d.id: d for d in roll.CLAIMS}["roll_device_mappings_identical"]
    assert claims.decide(spec, claims.seeds(roll.mapping_errors(_mapping(**kwargs)))).verdict \
        == verdict


def test_roll_mapping_failure_is_inconclusive():
    spec = {d.id: d for d in roll.CLAIMS}["roll_device_mappings_identical"]
    d = claims.decide(spec, claims.seeds(roll.mapping_errors({"error": "boom"})))
    assert d.verdict == "inconclusive"


def test_roll_accounting_errors():
    table = pd.DataFrame(dict(
        arm=["finish", "roll", "roll"], tokens_error=[0, 0, 0], invariants_ok=[True] * 3,
        same_as_finish=[None, True, True], same_groups_as_dapo=[False, True, False],
        identical_to_dapo=[False, True, False]))
    assert np.max(roll.accounting_errors(table)) == 0
    bad = table.assign(same_as_finish=[None, True, False])
    assert np.max(roll.accounting_errors(bad)) == 1
    assert np.max(roll.accounting_errors(table.assign(tokens_error=[0, 2, 0]))) == 2
