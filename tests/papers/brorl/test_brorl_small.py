"""BroRL small-model pieces: the mass-balance sweep on given logits against plain float64
NumPy loops, the decision logits' correct set, and continuing a checkpoint."""
from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvr_lab.papers.brorl import small


def _ref_pg_exact(z, correct, counts, lr):
    """Loops: one sampled-PG logit step, then the exact change of the correct mass."""
    z = np.asarray(z, float)
    p = np.exp(z - z.max())
    p /= p.sum()
    n = counts.sum()
    f = counts / max(n, 1)
    r = np.where(correct, 1.0, -1.0)
    t = float((r * f).sum())
    dz = lr * (r * f - p * t)
    z2 = z + dz
    p2 = np.exp(z2 - z2.max())
    p2 /= p2.sum()
    return float(p2[correct].sum() - p[correct].sum())


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000))
def test_sweep_exact_change_matches_loops(seed):
    rng = np.random.default_rng(seed)
    v = 7
    logits = rng.normal(size=(2, v)) * 2
    correct = np.zeros((2, v), bool)
    correct[0, 1] = correct[1, [2, 5]] = True
    n_values = (1, 4, 16)
    out = small.mass_balance_sweep(jax.random.key(seed), logits, correct, n_values,
                                   trials=3, lr=0.05)
    assert out["pg_exact"].shape == (2, 3, 3)
    # the three terms sum to the first-order total; for small lr the exact change is close
    np.testing.assert_allclose(out["pg_sampled_correct"] + out["pg_sampled_wrong"]
                               + out["pg_unsampled"], out["pg_total"], rtol=1e-10, atol=1e-14)
    # the idealised sampled terms are never negative (the paper's sign result)
    assert (out["ideal_sampled_correct"] >= -1e-15).all()
    assert (out["ideal_sampled_wrong"] >= -1e-15).all()
    # the exact change agrees with the first-order total up to second order in lr (the
    # exact change itself is checked against loops on fixed counts below)
    assert np.abs(out["pg_exact"] - out["pg_total"]).max() <= 0.05 ** 2 * 4


def test_pg_exact_against_loops_on_fixed_counts():
    """The sweep's per-draw quantity is theory.sampled_pg_mass_balance; check it on fixed
    counts against the loop reference (float64)."""
    from rlvr_lab.papers.brorl import theory as mb
    rng = np.random.default_rng(0)
    z = rng.normal(size=9)
    correct = np.zeros(9, bool)
    correct[[0, 4]] = True
    counts = np.array([3, 0, 1, 0, 0, 2, 0, 0, 2], float)
    with jax.enable_x64(True):
        got = float(mb.sampled_pg_mass_balance(z, correct, counts, lr=0.3)["exact"])
    assert got == pytest.approx(_ref_pg_exact(z, correct, counts, 0.3), rel=1e-10, abs=1e-14)


def test_sweep_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_values"):
        small.mass_balance_sweep(None, np.zeros((1, 3)), np.ones((1, 3), bool), (0, 2))
    with pytest.raises(ValueError, match="trials"):
        small.mass_balance_sweep(None, np.zeros((1, 3)), np.ones((1, 3), bool), (2,), trials=0)


def test_decision_logits_correct_set_and_continue_from():
    """On an untrained tiny policy: one correct token per problem (the reference tens digit),
    one-digit answers skipped; continue_from swaps only the start policy."""
    import dataclasses

    from rlvr_lab.envs import arithmetic, tokenizer
    from rlvr_lab.models import transformer
    from rlvr_lab.train import sft
    cfg = dataclasses.replace(sft.PRESETS["quick"], d_model=16, n_layers=1, n_heads=2)
    policy = transformer.init(jax.random.key(0), cfg.model_config())
    probs = [arithmetic.make_problem(47, 85), arithmetic.make_problem(2, 3),
             arithmetic.make_problem(12, 34)]
    logits, correct = small.decision_logits(policy, probs, cfg)
    assert logits.shape == (2, tokenizer.VOCAB_SIZE) and correct.sum(1).tolist() == [1, 1]
    assert np.flatnonzero(correct[0])[0] == tokenizer.encode("3")[0]   # 132 -> "231>132"
    assert np.flatnonzero(correct[1])[0] == tokenizer.encode("4")[0]   # 46 -> "64>46"
    with pytest.raises(ValueError, match="two-digit"):
        small.decision_logits(policy, probs[1:2], cfg)

    class T:
        config = "c"
        base_policy = "old"
    t2 = small.continue_from(T(), "new")
    assert t2.base_policy == "new" and t2.config == "c"
